"""One fuzz batch in its own process (run by test_fuzz.py under a memory cap):

    python -m tests.hardening.fuzz_worker MODELS_DIR SEED START STOP RESULTS

Loads every case of [START, STOP) by bytes and by path, runs the accepted ones and writes one
JSON line per case to RESULTS ("begin" lines first, so that a crash names its case). Writes
nothing to stdout itself: anything there came from the load path.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

import rknnrt as rk

from .fuzz_cases import mutate


def _feeds(ctx: rk.rknn_context) -> list[tuple[np.ndarray, int]] | None:
    """One seeded float32 array per model input (its size from the query) and its format."""
    num = rk.rknn_input_output_num()
    if rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num)):
        return None
    feeds = []
    for i in range(min(num.n_input, 16)):
        attr = rk.rknn_tensor_attr(index=i)
        if rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, ctypes.byref(attr), ctypes.sizeof(attr)):
            return None
        if attr.n_elems > 1 << 24:
            return None
        x = np.random.RandomState(7 + i).rand(attr.n_elems).astype(np.float32) * 255
        feeds.append((x, attr.fmt if attr.n_dims == 4 else rk.RKNN_TENSOR_UNDEFINED))
    return feeds


def _run_zero_copy(ctx: rk.rknn_context, feeds: list[tuple[np.ndarray, int]]) -> bytes:
    """One run through zero-copy memory (the rv1103/rv1106 mini runtime has no
    rknn_inputs_set): float32 inputs, every output bound as float32; the first one's bytes."""
    num = rk.rknn_input_output_num()
    if rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num)):
        return b"query failed"
    mems, first = [], None
    try:
        for i, (x, _) in enumerate(feeds):
            attr = rk.rknn_tensor_attr(index=i)
            rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, ctypes.byref(attr), ctypes.sizeof(attr))
            attr.type = rk.RKNN_TENSOR_FLOAT32
            attr.fmt = rk.RKNN_TENSOR_NCHW if attr.n_dims == 4 else rk.RKNN_TENSOR_UNDEFINED
            mem = rk.rknn_create_mem(ctx, x.nbytes)
            if not mem:
                return b"create_mem failed"
            mems.append(mem)
            ctypes.memmove(mem.contents.virt_addr, x.ctypes.data, x.nbytes)
            if rk.rknn_set_io_mem(ctx, mem, attr):
                return b"set_io_mem failed"
        for i in range(min(num.n_output, 16)):
            attr = rk.rknn_tensor_attr(index=i)
            rk.rknn_query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, ctypes.byref(attr), ctypes.sizeof(attr))
            if attr.n_elems > 1 << 24:
                return b"output too large failed"
            attr.type = rk.RKNN_TENSOR_FLOAT32
            mem = rk.rknn_create_mem(ctx, max(attr.n_elems, 1) * 4)
            if not mem:
                return b"create_mem failed"
            mems.append(mem)
            first = first or mem
            if rk.rknn_set_io_mem(ctx, mem, attr):
                return b"set_io_mem failed"
        if first is None or rk.rknn_run(ctx, None):
            return b"run failed"
        return ctypes.string_at(first.contents.virt_addr, first.contents.size)
    finally:
        for mem in mems:
            rk.rknn_destroy_mem(ctx, mem)


def _attempt(source: bytes | str) -> tuple[int, bytes | None]:
    """rknn_init's status and, when it succeeds, the first output of one run (float32 bytes)."""
    ctx = rk.rknn_context()
    size = 0 if isinstance(source, str) else len(source)
    status = rk.rknn_init(ctypes.byref(ctx), source, size, 0, None)
    if status != rk.RKNN_SUCC:
        return status, None
    try:
        feeds = _feeds(ctx)
        if feeds is None:
            return status, b"query failed"
        inputs = (rk.rknn_input * len(feeds))()
        for i, (x, fmt) in enumerate(feeds):
            inputs[i].index, inputs[i].buf, inputs[i].size = i, x.ctypes.data, x.nbytes
            inputs[i].type, inputs[i].fmt = rk.RKNN_TENSOR_FLOAT32, fmt
        if rk.rknn_inputs_set(ctx, len(feeds), inputs):
            return status, _run_zero_copy(ctx, feeds)
        if rk.rknn_run(ctx, None):
            return status, b"run failed"
        outputs = (rk.rknn_output * 1)()
        outputs[0].want_float = 1
        if rk.rknn_outputs_get(ctx, 1, outputs, None):
            return status, b"outputs_get failed"
        result = ctypes.string_at(outputs[0].buf, outputs[0].size)
        rk.rknn_outputs_release(ctx, 1, outputs)
        return status, result
    finally:
        rk.rknn_destroy(ctx)


def main() -> None:
    models_dir, seed, start, stop, results = sys.argv[1:6]
    models = {p.stem: p.read_bytes() for p in sorted(Path(models_dir).glob("*.rknn"))}
    reference = {}
    for name, blob in models.items():
        status, output = _attempt(blob)
        assert status == 0 and output and not output.endswith(b"failed"), (name, status)
        reference[name] = output
    case_path = os.path.join(os.path.dirname(results), f"case-{start}.rknn")
    with open(results, "w") as out:
        for index in range(int(start), int(stop)):
            out.write(json.dumps({"begin": index}) + "\n")
            out.flush()
            name, kind, blob, exact = mutate(models, int(seed), index)
            record = {"i": index, "model": name, "kind": kind, "exact": exact, "escaped": None,
                      "size": len(blob)}  # fmt: skip
            try:
                with open(case_path, "wb") as f:
                    f.write(blob)
                by_bytes = _attempt(blob)
                by_path = _attempt(case_path)
                record["status"] = [by_bytes[0], by_path[0]]
                accepted = [o for s, o in (by_bytes, by_path) if s == 0]
                record["same"] = all(o == reference[name] for o in accepted) if accepted else None
            except BaseException:  # noqa: B036 - an escaped exception is the finding
                record["escaped"] = traceback.format_exc()[-2000:]
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
