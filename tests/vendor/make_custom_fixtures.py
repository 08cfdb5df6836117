"""Regenerate tests/vendor/fixtures_custom/: vendor .rknn files holding custom operators, built
with the vendor's rknn-toolkit2 2.5.0 (its custom-op flow: `reg_custom_op` before `load_onnx`).

Run with the vendor's separate environment (never a dependency of rknnrt):

    /work/vendor_env/bin/python tests/vendor/make_custom_fixtures.py [--platforms rk3588 ...]
                                                                      [--dtypes i8 fp16]

The model (`custom`, two inputs) runs NPU convolutions around two custom op types:
- `cstDualResidual(x, y; alpha)` -> (x alpha - y, y alpha - x): the op of the toolkit's own
  custom-op demo (rknpu2 rknn_custom_pytorch_op_demo), here with alpha = 0.75;
- `cstChannelAffine(x; scale: floats, shift: ints, reverse: int, tag: string)` ->
  x[c'] scale[c] + shift[c], with c' = C - 1 - c when reverse is 1, else c: one attribute of each
  kind the toolkit stores (float, floats, int, ints, string; tensor attributes it drops).
The second custom output of cstDualResidual is a model output straight from the op. Inputs,
the simulator's outputs (its `inference` runs the registered classes below) and the toolkit's
report are written as make_fixtures.py writes them; the op definitions here are the reference
tests/vendor/test_vendor_custom.py re-implements from this docstring.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

PLATFORMS = ("rk3588", "rk3576", "rk3566", "rk3562", "rv1126b")
ALPHA = 0.75
SCALE = [0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 1.0, 3.0]
SHIFT = [0, 1, -1, 2, 0, -2, 1, 0]


def _attr(node: object, name: str) -> object:
    from rknn.api.custom_op import get_node_attr  # the vendor toolkit's reader

    return get_node_attr(node, name)


class cstDualResidual:  # noqa: N801 - the toolkit's class convention: the op type's name
    op_type = "cstDualResidual"

    def shape_infer(self, node, in_shapes, in_dtypes):  # type: ignore[no-untyped-def]
        return in_shapes.copy(), in_dtypes.copy()

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        x, y = inputs
        alpha = _attr(node, "alpha")
        return [x * alpha - y, y * alpha - x]


class cstChannelAffine:  # noqa: N801
    op_type = "cstChannelAffine"

    def shape_infer(self, node, in_shapes, in_dtypes):  # type: ignore[no-untyped-def]
        return [in_shapes[0]], [in_dtypes[0]]

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        x = inputs[0]
        scale = np.asarray(_attr(node, "scale"), np.float32).reshape(1, -1, 1, 1)
        shift = np.asarray(_attr(node, "shift"), np.float32).reshape(1, -1, 1, 1)
        if int(_attr(node, "reverse")):
            x = x[:, ::-1]
        return [(x * scale + shift).astype(np.float32)]


def make_onnx() -> onnx.ModelProto:
    rng = np.random.default_rng(24)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return nh.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)

    inits = [w("wa", 8, 3, 3, 3), w("ba", 8), w("wb", 8, 3, 3, 3), w("bb", 8), w("wc", 4, 8, 1, 1),
             w("bc", 4)]  # fmt: skip
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [
        h.make_node("Conv", ["a", "wa", "ba"], ["ca"], name="conv_a", **conv),
        h.make_node("Conv", ["b", "wb", "bb"], ["cb"], name="conv_b", **conv),
        h.make_node("cstDualResidual", ["ca", "cb"], ["r0", "r1"], name="dual",
                    domain="rknn_cst", alpha=ALPHA),  # fmt: skip
        h.make_node("cstChannelAffine", ["r0"], ["af"], name="affine", domain="rknn_cst",
                    scale=SCALE, shift=SHIFT, reverse=1, tag="ch"),  # fmt: skip
        h.make_node("Relu", ["af"], ["rl"], name="relu"),
        h.make_node("Conv", ["rl", "wc", "bc"], ["out"], name="conv_c", kernel_shape=[1, 1]),
    ]
    graph = h.make_graph(
        nodes, "custom",
        [h.make_tensor_value_info(n, TP.FLOAT, [1, 3, 8, 8]) for n in ("a", "b")],
        [h.make_tensor_value_info("out", TP.FLOAT, [1, 4, 8, 8]),
         h.make_tensor_value_info("r1", TP.FLOAT, [1, 8, 8, 8])], inits,
    )  # fmt: skip
    opsets = [h.make_opsetid("", 12), h.make_opsetid("rknn_cst", 1)]
    return h.make_model(graph, opset_imports=opsets, ir_version=7)


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "fixtures_custom"))
    ap.add_argument("--platforms", nargs="*", default=list(PLATFORMS))
    ap.add_argument("--dtypes", nargs="*", default=list(mf.DTYPES))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report_path = os.path.join(args.out, "reported.json")
    reported = {}
    if os.path.exists(report_path):
        with open(report_path) as f:
            reported = json.load(f)
    for platform in args.platforms:
        for dtype in args.dtypes:
            work = tempfile.mkdtemp(prefix="rknnrt_vendor_cst_")
            os.chdir(work)  # the toolkit writes its check*.onnx files into the cwd
            try:
                reported[f"custom_{platform}_{dtype}"] = mf.build_one(
                    "custom", platform, dtype, args.out, work, model=make_onnx(),
                    custom_ops=[cstDualResidual(), cstChannelAffine()],
                )  # fmt: skip
                print("built custom", platform, dtype, flush=True)
            except Exception:  # noqa: BLE001 - report and go on with the others
                print("FAILED custom", platform, dtype, file=sys.stderr, flush=True)
                traceback.print_exc()
            finally:
                os.chdir(here)
                shutil.rmtree(work, ignore_errors=True)
            with open(report_path, "w") as f:
                json.dump(reported, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
