"""Stand-in models for the vendor demos replayed by tools/replay_demos.py.

The snapshots hold no usable weights (their .rknn files are absent or vendor builds of other
models), so each demo gets an rknnrt model with the interface its C code expects: the same
input/output names (where the demo reads them), shapes, dtypes and layer types, built with
onnx's helper from seeded random weights and converted with rknnrt's own converter. The
outputs are therefore not the real model's: the replay checks that the demo's pipeline runs
and agrees with itself, not accuracy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """A small ONNX graph builder: a chain of named nodes with seeded random weights."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, array: np.ndarray, kind: str = "w") -> str:
        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        out = out or self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, out: str | None = None,
             group: int = 1, act: str | None = "Relu") -> str:  # fmt: skip
        w = self.rng.normal(0, (2.0 / (cin // group * k * k)) ** 0.5, (cout, cin // group, k, k))
        b = self.rng.normal(0, 0.05, cout)
        y = self.op(
            "Conv", [x, self.const(w.astype(np.float32)), self.const(b.astype(np.float32), "b")],
            None if act else out, kernel_shape=[k, k], strides=[stride, stride],
            pads=[k // 2] * 4, group=group,
        )  # fmt: skip
        if act == "Clip":  # ReLU6, as mobilenet's
            lo, hi = self.const(np.float32(0), "lo"), self.const(np.float32(6), "hi")
            return self.op("Clip", [y, lo, hi], out)
        return self.op(act, [y], out) if act else y

    def model(self, inputs: list[tuple[str, list[int]]], outputs: list[tuple[str, list[int]]],
              dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:  # fmt: skip
        graph = helper.make_graph(
            self.nodes, "standin",
            [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
            self.inits,
        )  # fmt: skip
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        if not any(n.op_type.startswith("cst") for n in self.nodes):  # custom ops: unchecked
            onnx.checker.check_model(m)
        return m


def _backbone(g: Graph, x: str, strides: int, width: int = 16) -> tuple[str, int]:
    """`strides` stride-2 convolutions: the spatial size is divided by 2**strides."""
    c = 3
    for i in range(strides):
        x = g.conv(x, c, width * (1 + i // 2), stride=2)
        c = width * (1 + i // 2)
    return x, c


def classifier(classes: int, size: int = 224, act: str = "Relu", dynamic: bool = False
               ) -> onnx.ModelProto:  # fmt: skip
    """mobilenet/resnet-like: conv stack, global pooling, Gemm to `classes` logits."""
    g = Graph(classes + size)
    x, c = _backbone(g, "input", 5)
    x = g.conv(x, c, c, group=c, act=act)  # a depthwise layer, as mobilenet's
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    w = g.const(g.rng.normal(0, 0.3, (classes, c)).astype(np.float32))
    b = g.const(g.rng.normal(0, 0.1, classes).astype(np.float32), "b")
    g.op("Gemm", [x, w, b], "output", transB=1)
    hw = ["height", "width"] if dynamic else [size, size]  # dynamic_input needs free dims
    return g.model([("input", [1, 3, *hw])], [("output", [1, classes])])


def yolov5(size: int = 640) -> onnx.ModelProto:
    """Three detection heads 1x255xHxW at strides 8, 16, 32 (80 classes, 3 anchors)."""
    g = Graph(5)
    x, c = _backbone(g, "images", 3)
    outs, heads = [], []
    for i, name in enumerate(("output0", "output1", "output2")):
        if i:
            x = g.conv(x, c, c, stride=2)
        heads.append(g.conv(x, c, 255, k=1, out=name, act=None))
        outs.append((name, [1, 255, size // 8 >> i, size // 8 >> i]))
    return g.model([("images", [1, 3, size, size])], outs)


def yolov8(size: int = 640) -> onnx.ModelProto:
    """The zoo's yolov8 export: per stride a 64-channel DFL box map, an 80-class sigmoid
    score map and a 1-channel score sum (9 outputs)."""
    g = Graph(8)
    x, c = _backbone(g, "images", 3)
    outs = []
    for i in range(3):
        if i:
            x = g.conv(x, c, c, stride=2)
        s = size // 8 >> i
        g.conv(x, c, 64, k=1, out=f"box{i}", act=None)
        score = g.conv(x, c, 80, k=1, out=f"score{i}", act="Sigmoid")
        g.op("ReduceSum", [score, g.const(np.array([1], np.int64), "axes")], f"sum{i}",
             keepdims=1)  # fmt: skip
        g.nodes[-1].op_type = "ReduceSum"
        outs += [(f"box{i}", [1, 64, s, s]), (f"score{i}", [1, 80, s, s]),
                 (f"sum{i}", [1, 1, s, s])]  # fmt: skip
    # ReduceSum's output is clipped as the zoo's export does (score_sum in 0..1 per class)
    return g.model([("images", [1, 3, size, size])], outs)


def retinaface(size: int = 320) -> onnx.ModelProto:
    """RetinaFace_mobile320: 4200 priors (strides 8, 16, 32, two per cell): loc 1x4200x4,
    conf 1x4200x2 (softmax), landmarks 1x4200x10."""
    g = Graph(320)
    x, c = _backbone(g, "input0", 3)
    locs, confs, lands = [], [], []
    for i in range(3):
        if i:
            x = g.conv(x, c, c, stride=2)
        for _kind, n, acc in (("loc", 4, locs), ("conf", 2, confs), ("land", 10, lands)):
            y = g.conv(x, c, 2 * n, k=1, act=None)
            y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
            acc.append(g.op("Reshape", [y, g.const(np.array([1, -1, n], np.int64), "shape")]))
    g.op("Concat", locs, "output0", axis=1)
    conf = g.op("Concat", confs, axis=1)
    g.op("Softmax", [conf], "572", axis=-1)
    g.op("Concat", lands, "571", axis=1)
    n = sum(2 * (size // 8 >> i) ** 2 for i in range(3))
    return g.model([("input0", [1, 3, size, size])],
                   [("output0", [1, n, 4]), ("572", [1, n, 2]), ("571", [1, n, 10])])  # fmt: skip


def ppocr_det(size: int = 480, mean: tuple = (0.0, 0.0, 0.0), std: tuple = (1.0, 1.0, 1.0)
              ) -> onnx.ModelProto:  # fmt: skip
    """DBNet-like: a 1x1xHxW sigmoid probability map at the input's resolution. Random weights
    would give no text regions, so this one marks dark pixels: sigmoid(12 * (0.45 - grey)) on the
    0..1 grey level, dilated by a 5x5 max pool so that the characters of a word join, as DB's
    shrunk text kernels do. The model sees (pixel/255 - mean) / std (mean, std per channel in
    0..1 units: the converter's mean_values/std_values divided by 255), so the 1x1 convolution
    undoes that first: grey = sum_c (x_c * std_c + mean_c) / 3."""
    g = Graph(480)
    w = np.array([-4.0 * s for s in std], np.float32).reshape(1, 3, 1, 1)
    b = np.array([12 * 0.45 - 4.0 * sum(mean)], np.float32)
    x = g.op("Conv", ["x", g.const(w), g.const(b, "b")], kernel_shape=[1, 1])
    x = g.op("MaxPool", [x], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    g.op("Sigmoid", [x], "sigmoid_0.tmp_0")
    return g.model([("x", [1, 3, size, size])], [("sigmoid_0.tmp_0", [1, 1, size, size])])


def ppocr_rec(width: int = 320, classes: int = 6625) -> onnx.ModelProto:
    """CRNN-like: 1x3x48x320 in, 1x40x6625 softmax out (one column per 8 pixels)."""
    g = Graph(6625)
    x = g.conv("x", 3, 16, stride=2)
    x = g.conv(x, 16, 32, stride=2)
    x = g.conv(x, 32, 32, stride=2)  # 1x32x6x40
    x = g.op("ReduceMean", [x], axes=[2], keepdims=0)  # 1x32x40
    x = g.op("Transpose", [x], perm=[0, 2, 1])  # 1x40x32
    w = g.const(g.rng.normal(0, 0.5, (32, classes)).astype(np.float32))
    x = g.op("MatMul", [x, w])
    g.op("Softmax", [x], "softmax_5.tmp_0", axis=-1)
    return g.model([("x", [1, 3, 48, width])], [("softmax_5.tmp_0", [1, width // 8, classes])])


class CstSigmoid:
    """The toolkit2-convention class for the custom op `cstSigmoid` (rknn_custom_cpu_op_demo)."""

    op_type = "cstSigmoid"

    def shape_infer(self, node, in_shapes, in_dtypes):  # noqa: ANN001, ANN201
        return in_shapes[:1], in_dtypes[:1]

    def compute(self, node, inputs):  # noqa: ANN001, ANN201
        return [1.0 / (1.0 + np.exp(-inputs[0]))]


def yolox_custom_sigmoid(size: int = 640) -> onnx.ModelProto:
    """yolox_s_custom_sigmoid: three heads 1x85xHxW (4 box, objectness and 80 classes through
    the custom op cstSigmoid) at strides 8, 16, 32."""
    g = Graph(85)
    x, c = _backbone(g, "images", 3)
    outs = []
    for i, name in enumerate(("output", "788", "output2")):
        if i:
            x = g.conv(x, c, c, stride=2)
        box = g.conv(x, c, 4, k=1, act=None)
        obj = g.op("cstSigmoid", [g.conv(x, c, 1, k=1, act=None)])
        cls = g.op("cstSigmoid", [g.conv(x, c, 80, k=1, act=None)])
        g.op("Concat", [box, obj, cls], name, axis=1)
        outs.append((name, [1, 85, size // 8 >> i, size // 8 >> i]))
    return g.model([("images", [1, 3, size, size])], outs)


def multiple_input() -> onnx.ModelProto:
    """rknn_multiple_input_demo: two inputs (1x3x224x224 and 1x1x224x224) added after a conv."""
    g = Graph(2)
    a = g.conv("input1", 3, 4, act=None)
    b = g.conv("input2", 1, 4, act=None)
    g.op("Add", [a, b], "output")
    return g.model([("input1", [1, 3, 224, 224]), ("input2", [1, 1, 224, 224])],
                   [("output", [1, 4, 224, 224])])  # fmt: skip


def _dataset(onnx_model: onnx.ModelProto, folder: Path, n: int = 4) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        paths = []
        for j, vi in enumerate(onnx_model.graph.input):
            shape = [d.dim_value or 224 for d in vi.type.tensor_type.shape.dim]
            nhwc = [shape[0], *shape[2:], shape[1]]
            p = folder / f"calib_{i}_{j}.npy"
            np.save(p, rng.uniform(0, 255, nhwc).astype(np.float32))
            paths.append(str(p))
        lines.append(" ".join(paths))
    path = folder / "dataset.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def convert(model: onnx.ModelProto, out: Path, *, target: str, quantize: bool,
            mean: list | None = None, std: list | None = None,
            dynamic_input: list | None = None) -> Path:  # fmt: skip
    """ONNX -> rknnrt file with rknnrt's own converter (rknnrt.toolkit.RKNN)."""
    from rknnrt.toolkit import RKNN

    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".onnx")
    onnx.save(model, src)
    rknn = RKNN()
    n_in = len(model.graph.input)
    rknn.config(
        mean_values=mean or [[0, 0, 0]] * n_in, std_values=std or [[255, 255, 255]] * n_in,
        target_platform=target, dynamic_input=dynamic_input,
    )  # fmt: skip
    if any(n.op_type == CstSigmoid.op_type for n in model.graph.node):
        rknn.reg_custom_op(CstSigmoid)
    rknn.load_onnx(str(src))
    rknn.build(
        do_quantization=quantize, dataset=str(_dataset(model, out.parent)) if quantize else None
    )
    rknn.export_rknn(str(out))
    rknn.release()
    if not out.exists():  # the toolkit reports its errors as E lines, as the vendor's does
        raise RuntimeError(f"conversion to {out.name} failed (see the E lines above)")
    return out


MAKERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mobilenet_v1": lambda: classifier(1001, act="Clip"),
    "mobilenet_v2": lambda: classifier(1000, act="Clip"),
    "mobilenet_v2_dyn": lambda: classifier(1000, act="Clip", dynamic=True),
    "resnet50": lambda: classifier(1000),
    "yolov5": yolov5,
    "yolov8": yolov8,
    "retinaface": retinaface,
    "ppocr_det": ppocr_det,
    "ppocr_rec": ppocr_rec,
    "multiple_input": multiple_input,
    "yolox_custom_sigmoid": yolox_custom_sigmoid,
}
