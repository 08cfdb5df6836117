"""Single-layer probes of the lookup-table activations (conv or depthwise conv, then Sigmoid,
SiLU, GELU, HardSwish or HardSigmoid with several alpha/beta), each branch its own output, with
seeded weights scaled per probe so that the pre-activation ranges differ.

    python -m tools.vendor_diff.probes OUT_DIR      (writes one ONNX per probe set)

The committed probe (PROBE, tests/vendor/fixtures_arch/lut_probes) is built and dumped in the
vendor's environment by `arch_layers.py OUT_DIR --probe NAME PLATFORM ...`, then compared op by op
with `python -m tools.vendor_diff.vendor_file` like any fixture."""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

ACTS = ("sigmoid", "silu", "gelu", "hswish", "hsig", "hsig_02_04", "hsig_03_06")


def _act(nodes: list, inits: list, x: str, act: str, tag: str) -> str:
    def const(v: float) -> str:
        name = f"{tag}_c{len(inits)}"
        inits.append(nh.from_array(np.array(v, np.float32), name))
        return name

    def node(op: str, ins: list[str], **kw) -> str:
        out = f"{tag}_{op.lower()}{len(nodes)}"
        nodes.append(h.make_node(op, ins, [out], **kw))
        return out

    if act == "sigmoid":
        return node("Sigmoid", [x])
    if act == "silu":
        return node("Mul", [x, node("Sigmoid", [x])])
    if act == "gelu":
        erf = node("Erf", [node("Div", [x, const(math.sqrt(2))])])
        return node("Mul", [node("Mul", [x, node("Add", [erf, const(1.0)])]), const(0.5)])
    if act == "hswish":
        return node("HardSwish", [x])
    alpha, beta = {"hsig": (1 / 6, 0.5), "hsig_02_04": (0.2, 0.4),
                   "hsig_03_06": (0.3, 0.6)}[act]  # fmt: skip
    return node("HardSigmoid", [x], alpha=alpha, beta=beta)


def make(seed: int, depthwise: bool, gain: float) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    c = 16
    nodes: list = []
    inits: list = []
    outs = []
    for k, act in enumerate(ACTS):
        tag = f"p{k}"
        cin = 1 if depthwise else c
        w = rng.standard_normal((c, cin, 3, 3)) * gain * rng.uniform(0.3, 1.5, (c, 1, 1, 1))
        w = (w / math.sqrt(cin * 9)).astype(np.float32)
        b = (rng.standard_normal(c) * 0.3 * gain).astype(np.float32)
        inits += [nh.from_array(w, f"{tag}_w"), nh.from_array(b, f"{tag}_b")]
        y = f"{tag}_conv"
        nodes.append(h.make_node("Conv", ["x", f"{tag}_w", f"{tag}_b"], [y], kernel_shape=[3, 3],
                                 pads=[1, 1, 1, 1], group=c if depthwise else 1))  # fmt: skip
        outs.append(_act(nodes, inits, y, act, tag))
    shape = [1, c, 12, 12]
    graph = h.make_graph(nodes, "lutprobe", [h.make_tensor_value_info("x", TP.FLOAT, shape)],
                         [h.make_tensor_value_info(o, TP.FLOAT, shape) for o in outs], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# the committed probe: Sigmoid, SiLU, GELU, HardSwish, HardSigmoid (1/6, 1/2), (0.2, 0.4) and
# (0.3, 0.6) (a positive addend) after a full conv, pre-activations up to 3x the usual range
PROBE = "conv_g3.0_s2"
PROBES = {f"{'dw' if dw else 'conv'}_g{gain}_s{seed}": (seed, dw, gain)
          for seed, gain in ((1, 1.0), (2, 3.0), (3, 0.4)) for dw in (False, True)}  # fmt: skip


def main() -> int:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, args in PROBES.items():
        onnx.save(make(*args), os.path.join(out, f"{name}.onnx"))
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
