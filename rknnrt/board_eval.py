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


@dataclass
class PerfReport:
    table: str  # RKNN_QUERY_PERF_DETAIL text
    run_us: int  # RKNN_QUERY_PERF_RUN run_duration


class _Context:
    def __init__(self, model: bytes, flag: int) -> None:
        self.ctx = rk.rknn_context()
        ret = rk.rknn_init(ctypes.byref(self.ctx), model, len(model), flag, None)
        if ret != rk.RKNN_SUCC:
            raise RuntimeError(f"rknn_init failed: {ret}")

    def query(self, cmd: int, info: ctypes.Structure) -> None:
        ret = rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))
        if ret != rk.RKNN_SUCC:
            raise RuntimeError(f"rknn_query({cmd}) failed: {ret}")

    def close(self) -> None:
        rk.rknn_destroy(self.ctx)


def _random_inputs(c: _Context, seed: int) -> list[np.ndarray]:
    """One input per model input in its normal attribute's shape and type (NHWC for 4-D)."""
    num = rk.rknn_input_output_num()
    c.query(rk.RKNN_QUERY_IN_OUT_NUM, num)
    rng = np.random.default_rng(seed)
    arrays = []
    for i in range(num.n_input):
        attr = rk.rknn_tensor_attr(index=i)
        c.query(rk.RKNN_QUERY_INPUT_ATTR, attr)
        dims = list(attr.dims)[: attr.n_dims]
        if attr.n_dims == 4 and attr.fmt == rk.RKNN_TENSOR_NCHW:
            dims = [dims[0], dims[2], dims[3], dims[1]]
        arrays.append(rng.integers(0, 256, dims).astype(np.uint8) if len(dims) == 4
                      else rng.standard_normal(dims).astype(np.float32))  # fmt: skip
    return arrays


def eval_perf(model: bytes, core_mask: int = 0, inputs: list[np.ndarray] | None = None,
              seed: int = 0) -> PerfReport:  # fmt: skip
    """One run with RKNN_FLAG_COLLECT_PERF_MASK and the given core mask (0: AUTO); inputs:
    NHWC uint8 images or float arrays per input (default: random)."""
    c = _Context(model, rk.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        _stand_in_for_custom_ops(c, model)
        if core_mask and rk.rknn_set_core_mask(c.ctx, core_mask) != rk.RKNN_SUCC:
            raise RuntimeError(f"rknn_set_core_mask({core_mask:#x}) failed")
        arrays = inputs if inputs is not None else _random_inputs(c, seed)
        items = (rk.rknn_input * len(arrays))()
        for i, a in enumerate(arrays):
            a = np.ascontiguousarray(a)
            four_d = a.ndim == 4
            items[i].index, items[i].buf, items[i].size = i, a.ctypes.data, a.nbytes
            items[i].type = rk.RKNN_TENSOR_UINT8 if a.dtype == np.uint8 else rk.RKNN_TENSOR_FLOAT32
            items[i].fmt = rk.RKNN_TENSOR_NHWC if four_d else rk.RKNN_TENSOR_UNDEFINED
            arrays[i] = a  # keep the buffer alive until the run
        if rk.rknn_inputs_set(c.ctx, len(arrays), items) != rk.RKNN_SUCC:
            raise RuntimeError("rknn_inputs_set failed")
        if rk.rknn_run(c.ctx, None) != rk.RKNN_SUCC:
            raise RuntimeError("rknn_run failed")
        detail = rk.rknn_perf_detail()
        c.query(rk.RKNN_QUERY_PERF_DETAIL, detail)
        run = rk.rknn_perf_run()
        c.query(rk.RKNN_QUERY_PERF_RUN, run)
        text = ctypes.string_at(detail.perf_data, detail.data_len).decode()
        return PerfReport(text, int(run.run_duration))
    finally:
        c.close()


def _stand_in_for_custom_ops(c: _Context, model: bytes) -> None:
    """A model with custom ops is timed with stand-ins that write zeros (docs/custom-ops.md)."""
    from .model.custom_ops import custom_op_types

    types = custom_op_types(model)
    if types:
        ops = [rk.rknn_custom_op_standin(t) for t in types]
        if rk.rknn_register_custom_ops(c.ctx, ops, len(ops)) != rk.RKNN_SUCC:
            raise RuntimeError("rknn_register_custom_ops failed")
        sys.stderr.write(f"I custom op(s) {', '.join(types)}: timed with stand-ins that write "
                         "zeros (no implementation is given here)\n")  # fmt: skip


def eval_memory(model: bytes) -> dict[str, int]:
    """RKNN_QUERY_MEM_SIZE after a plain rknn_init, as a board would answer it."""
    c = _Context(model, 0)
    try:
        mem = rk.rknn_mem_size()
        c.query(rk.RKNN_QUERY_MEM_SIZE, mem)
        return {name: int(getattr(mem, name)) for name, _ in mem._fields_[:5]}
    finally:
        c.close()
