"""What a board's `eval_perf` / `eval_memory` would report, through the public runtime API only.

These are the functions rknn-toolkit2-style code (rknnrt.toolkit's RKNN.eval_perf and
RKNN.eval_memory) calls: they load a converted model into a context as an application on a board
would and return what the queries answer. The interface is the query results:
RKNN_QUERY_PERF_DETAIL (the vendor's layer table with estimated board times, docs/performance.md),
RKNN_QUERY_PERF_RUN (µs per run on the board) and RKNN_QUERY_MEM_SIZE.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

import numpy as np

from . import api as rk
from .client import Client
from .core import switches


@dataclass
class PerfReport:
    table: str  # RKNN_QUERY_PERF_DETAIL text
    run_us: int  # RKNN_QUERY_PERF_RUN run_duration


def _random_inputs(c: Client, seed: int) -> list[np.ndarray]:
    """One input per model input in its normal attribute's shape and type (NHWC for 4-D)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for attr in c.inputs:
        dims = list(attr.dims)[: attr.n_dims]
        if attr.n_dims == 4 and attr.fmt == rk.RKNN_TENSOR_NCHW:
            dims = [dims[0], dims[2], dims[3], dims[1]]
        arrays.append(rng.integers(0, 256, dims).astype(np.uint8) if len(dims) == 4
                      else rng.standard_normal(dims).astype(np.float32))  # fmt: skip
    return arrays


def eval_perf(model: bytes, core_mask: int = 0, inputs: list[np.ndarray] | None = None,
              seed: int = 0, host_times: bool = False) -> PerfReport:  # fmt: skip
    """One run with RKNN_FLAG_COLLECT_PERF_MASK and the given core mask (0: AUTO); inputs:
    NHWC uint8 images or float arrays per input (default: random). `host_times`: Time(us) and
    PERF_RUN in this PC's times (the RKNNRT_PERF_HOST switch, for this call only). A failed
    call raises ClientError (a RuntimeError) naming it."""
    with switches.override(switches.PERF_HOST, "1" if host_times else None):
        return _eval_perf(model, core_mask, inputs, seed)


def _eval_perf(model: bytes, core_mask: int, inputs: list[np.ndarray] | None,
               seed: int) -> PerfReport:  # fmt: skip
    c = Client(model, rk.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        _stand_in_for_custom_ops(c, model)
        if core_mask:
            c.set_core_mask(core_mask)
        arrays = [np.ascontiguousarray(a)
                  for a in (inputs if inputs is not None else _random_inputs(c, seed))]  # fmt: skip
        c.set_inputs(
            arrays,
            [rk.RKNN_TENSOR_UINT8 if a.dtype == np.uint8 else rk.RKNN_TENSOR_FLOAT32
             for a in arrays],
            [rk.RKNN_TENSOR_NHWC if a.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED for a in arrays],
        )  # fmt: skip
        c.run()
        detail = rk.rknn_perf_detail()
        c.query(rk.RKNN_QUERY_PERF_DETAIL, detail)
        run = rk.rknn_perf_run()
        c.query(rk.RKNN_QUERY_PERF_RUN, run)
        text = ctypes.string_at(detail.perf_data, detail.data_len).decode()
        return PerfReport(text, int(run.run_duration))
    finally:
        c.close()


def _stand_in_for_custom_ops(c: Client, model: bytes) -> None:
    """A model with custom ops is timed with stand-ins that write zeros (docs/custom-ops.md)."""
    from .model.container import custom_op_types

    types = custom_op_types(model)
    if types:
        c.register_custom_ops([rk.rknn_custom_op_standin(t) for t in types])
        sys.stderr.write(f"I custom op(s) {', '.join(types)}: timed with stand-ins that write "
                         "zeros (no implementation is given here)\n")  # fmt: skip


def eval_memory(model: bytes) -> dict[str, int]:
    """RKNN_QUERY_MEM_SIZE after a plain rknn_init, as a board would answer it."""
    c = Client(model, 0)
    try:
        mem = rk.rknn_mem_size()
        c.query(rk.RKNN_QUERY_MEM_SIZE, mem)
        return {name: int(getattr(mem, name)) for name, _ in mem._fields_[:5]}
    finally:
        c.close()
