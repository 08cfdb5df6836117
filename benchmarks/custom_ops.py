"""Overhead of a custom operator: the same model with and without an identity custom op.

Model A: Conv -> Conv (one NPU segment). Model B: Conv -> cstIdentity -> Conv (NPU segment,
CPU custom op, NPU segment). The custom op's compute is a ctypes callback that copies its input
(memmove). Both are timed with rknn_run in the same process, in alternating batches; a
model's time in a round is its fastest batch, and the figure is the median over rounds of the
per-run difference (µs) and ratio; the headline uses each model's fastest batch of all rounds
(other processes on a shared machine only ever add time). Goal (issue 17): <= 30 µs.

    PYTHONPATH=$PWD python benchmarks/custom_ops.py [--runs N] [--batches B] [--rounds R]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.toolkit import RKNN


def _model(custom: bool) -> bytes:
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1])]
    if custom:
        nodes.append(helper.make_node("cstIdentity", ["a"], ["b"], name="id", domain="cst"))
    nodes.append(helper.make_node("Conv", ["b" if custom else "a", "w2"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])],
        [w1, w2],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("cst", 1)]

    class CstIdentity:
        op_type = "cstIdentity"

        def shape_infer(self, node, shapes, dtypes):  # type: ignore[no-untyped-def]
            return shapes, dtypes

        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            return [inputs[0]]

    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float32")
    if custom:
        rknn.reg_custom_op(CstIdentity())
    assert rknn.load_onnx(helper.make_model(graph, opset_imports=opsets)) == 0, rknn.last_error
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    return rknn.model_bytes()


def _identity(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
    ctypes.memmove(outs[0].mem.virt_addr, ins[0].mem.virt_addr, outs[0].attr.size)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per batch")
    parser.add_argument("--batches", type=int, default=10, help="batches per model per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    callback = rk.rknn_custom_op_callback(_identity)
    op = rk.rknn_custom_op(version=1, target=rk.RKNN_TARGET_TYPE_CPU, op_type=b"cstIdentity")
    op.compute = callback
    x = np.random.default_rng(1).normal(size=(1, 3, 32, 32)).astype(np.float32)
    contexts = {}
    for name, custom in (("plain", False), ("custom", True)):
        model = _model(custom)
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
        if custom:
            assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
        inp = rk.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes)
        inp.type, inp.fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
        assert rk.rknn_inputs_set(ctx, 1, ctypes.byref(inp)) == 0
        contexts[name] = ctx
    outputs = {}
    for name, ctx in contexts.items():  # the same result, and a warm-up
        assert rk.rknn_run(ctx, None) == 0
        out = rk.rknn_output(want_float=1)
        assert rk.rknn_outputs_get(ctx, 1, ctypes.byref(out), None) == 0
        outputs[name] = np.ctypeslib.as_array(
            ctypes.cast(out.buf, ctypes.POINTER(ctypes.c_float)), (out.size // 4,)
        ).copy()
        rk.rknn_outputs_release(ctx, 1, ctypes.byref(out))
    np.testing.assert_allclose(outputs["custom"], outputs["plain"], rtol=1e-5, atol=1e-5)
    # Batches alternate between the two models, and each model's figure is its fastest batch:
    # on a shared machine, other processes only ever add time, so the minimum is the cost.
    diffs, ratios, bests = [], [], []
    for _ in range(args.rounds):
        best = {name: float("inf") for name in contexts}
        for _ in range(args.batches):
            for name, ctx in contexts.items():
                start = time.perf_counter()
                for _ in range(args.runs):
                    rk.rknn_run(ctx, None)
                best[name] = min(best[name], (time.perf_counter() - start) / args.runs * 1e6)
        bests.append(best)
        diffs.append(best["custom"] - best["plain"])
        ratios.append(best["custom"] / best["plain"])
        print(
            f"round: plain {best['plain']:.1f} us/run, with identity custom op "
            f"{best['custom']:.1f} us/run"
        )
    overall = {name: min(r[name] for r in bests) for name in contexts}
    print(
        f"identity custom op adds {overall['custom'] - overall['plain']:.1f} us per run "
        f"(fastest batches of all rounds: {overall['plain']:.1f} -> {overall['custom']:.1f} us, "
        f"ratio {overall['custom'] / overall['plain']:.3f}; goal <= 30 us); median over rounds "
        f"{statistics.median(diffs):.1f} us, ratio {statistics.median(ratios):.3f}"
    )
    for ctx in contexts.values():
        rk.rknn_destroy(ctx)


if __name__ == "__main__":
    main()
