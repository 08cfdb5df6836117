"""Attention-block probes of the int8 transformer ops (exNorm, exSDPAttention or rk3566's
exMatMul): LayerNorm, Q/K/V projections, softmax(Q K^T s) V over several heads, the output
projection and a residual, with seeded weights; the token count, width, heads and scale s differ
per probe (the fixtures' transformer has 12 tokens, 2 heads of 16 and s = 1/4).

    python -m tools.vendor_diff.attention_probes OUT_DIR      (writes one ONNX per probe)

Built and dumped in the vendor's environment by `arch_layers.py OUT_DIR --probe NAME PLATFORM
...` (the committed ones: tests/vendor/fixtures_arch/attn_probes, dumps in layers/), then compared
op by op with `python -m tools.vendor_diff.vendor_file` like any fixture."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

# name -> (seed, tokens, width, heads, scale)
PROBES = {
    "attn_a": (11, 10, 48, 4, 0.3),  # 4 heads of 12, s not a power of two
    "attn_b": (12, 16, 64, 2, 0.125),
    "attn_c": (13, 12, 32, 2, 1.0),  # s = 1: no scale programmed
    # the attention's output zero point is 0 (calibrated so: seed 34 of 20-43 tried), which
    # its P V tasks leave out of their output conversion
    "attn_z": (34, 12, 32, 2, 0.25),
}


def make(seed: int, tokens: int, width: int, heads: int, scale: float) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []

    def const(array: np.ndarray) -> str:
        name = f"c{len(inits)}"
        inits.append(nh.from_array(array, name))
        return name

    def op(kind: str, ins: list[str], **attrs: object) -> str:
        out = f"{kind.lower()}{len(nodes)}"
        nodes.append(h.make_node(kind, ins, [out], name=out, **attrs))
        return out

    def linear(x: str) -> str:
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        bias = (0.05 * rng.standard_normal(width)).astype(np.float32)
        return op("Add", [op("MatMul", [x, const(w)]), const(bias)])

    def split(x: str) -> str:
        shape = np.array([1, tokens, heads, width // heads], np.int64)
        return op("Transpose", [op("Reshape", [x, const(shape)])], perm=[0, 2, 1, 3])

    gamma = (1 + 0.1 * rng.standard_normal(width)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(width)).astype(np.float32)
    n1 = op("LayerNormalization", ["x", const(gamma), const(beta)], axis=-1, epsilon=1e-5)
    q, k, v = (split(linear(n1)) for _ in range(3))
    scores = op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]),
                        const(np.array(scale, np.float32))])  # fmt: skip
    a = op("MatMul", [op("Softmax", [scores], axis=-1), v])
    a = op("Reshape", [op("Transpose", [a], perm=[0, 2, 1, 3]),
                       const(np.array([1, tokens, width], np.int64))])  # fmt: skip
    out = op("Add", ["x", linear(a)])
    shape = [1, tokens, width]
    graph = h.make_graph(nodes, "attnprobe", [h.make_tensor_value_info("x", TP.FLOAT, shape)],
                         [h.make_tensor_value_info(out, TP.FLOAT, shape)], inits)  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> int:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, args in PROBES.items():
        onnx.save(make(*args), os.path.join(out, f"{name}.onnx"))
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
