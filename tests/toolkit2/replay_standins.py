"""Stand-ins for the model files the upstream scripts download (replay_upstream.py runs them).

Each builder gives an ONNX model with the interface of the file the example expects (input and
output names, shapes, the layer kinds its convert step or post-processing depends on), made by
this project's own code with seeded weights. Their outputs are not the real models': a replay
checks that the vendor's unchanged script runs through rknnrt and that what it prints is of
the right form. Where random weights would make the post-processing print nothing at all
(text detection and recognition), the weights are set by hand so that the model reacts to the
image (dark pixels, ink per column) and the demo's later stages have something to work on.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.toolkit2.models import Graph
from tools.replay.standins import ppocr_det as _dark_pixel_db


def classifier(size: int = 224, classes: int = 1000, seed: int = 0,
               input_name: str = "data") -> onnx.ModelProto:  # fmt: skip
    """ImageNet-shaped classifier: [1,3,size,size] -> [1,classes] logits."""
    g = Graph(seed)
    x = g.node("Relu", [g.conv(input_name, "c1", 3, 16, stride=4)], "r1")
    x = g.node("Relu", [g.conv(x, "c2", 16, 32, stride=4)], "r2")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], "gap")], "flat")
    w = g.const("fc.w", (g.rng.randn(32, classes) * 0.5).astype(np.float32))
    # resnet50v2.onnx's output name: the accuracy_analysis example reads its snapshot file
    g.node("MatMul", [x, w], "resnetv24_dense0_fwd")
    return g.model([(input_name, [1, 3, size, size])], ["resnetv24_dense0_fwd"], opset=11,
                   name="classifier")  # fmt: skip


def yolov5_heads(size: int = 640, seed: int = 1) -> onnx.ModelProto:
    """yolov5s_relu.onnx's interface: images [1,3,640,640] -> three [1,255,h,w] heads at
    strides 8, 16 and 32 (Conv + Relu backbone, Resize + Concat neck)."""
    g = Graph(seed)
    x = g.node("Relu", [g.conv("images", "s2", 3, 8, stride=2)], "a2")
    x = g.node("Relu", [g.conv(x, "s4", 8, 16, stride=2)], "a4")
    p8 = g.node("Relu", [g.conv(x, "s8", 16, 16, stride=2)], "a8")
    p16 = g.node("Relu", [g.conv(p8, "s16", 16, 32, stride=2)], "a16")
    p32 = g.node("Relu", [g.conv(p16, "s32", 32, 32, stride=2)], "a32")
    roi = g.const("roi", np.zeros(0, np.float32))
    sc = g.const("sc", np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [p32, roi, sc], "up32", mode="nearest")
    n16 = g.node("Relu", [g.conv(g.node("Concat", [up, p16], "cat16", axis=1), "n16", 64, 32)],
                 "b16")  # fmt: skip
    outs = []
    for name, src, cin in (("output", p8, 16), ("417", n16, 32), ("419", p32, 32)):
        outs.append(g.conv(src, name, cin, 255, k=1))
    return g.model([("images", [1, 3, size, size])], outs, opset=12, name="yolov5s_relu")


def _silu_backbone(g: Graph) -> tuple[str, list[tuple[str, int, int]]]:
    """The Conv + SiLU stem of the YOLOv8-family stand-ins: the stride-4 map (16 channels) and
    the (tensor, channels, stride) feature maps at strides 8, 16 and 32."""
    x = g.silu(g.conv("images", "s2", 3, 8, stride=2), "a2")
    x = p4 = g.silu(g.conv(x, "s4", 8, 16, stride=2), "a4")
    feats = []
    for stride, (cin, cout) in zip((8, 16, 32), ((16, 16), (16, 32), (32, 32))):
        x = g.silu(g.conv(x, f"s{stride}", cin, cout, stride=2), f"a{stride}")
        feats.append((x, cout, stride))
    return p4, feats


def _sharpen(g: Graph, conv: str, gain: float, shift: float) -> None:
    """Scale the weights of `conv` by `gain` and add `shift` to its bias: its output becomes
    gain * output + shift."""
    for i, t in enumerate(g.inits):
        if t.name in (f"{conv}.w", f"{conv}.b"):
            a = numpy_helper.to_array(t) * gain + (shift if t.name.endswith(".b") else 0.0)
            g.inits[i] = numpy_helper.from_array(a.astype(np.float32), t.name)


def _box_class_sum(g: Graph, x: str, c: int, stride: int) -> list[str]:
    """The zoo's split YOLOv8 head at one stride: box distribution [1,64,h,w], class scores
    [1,80,h,w] (Sigmoid) and their sum clipped to 0..1 [1,1,h,w]. With seeded weights every
    cell would score about 0.6 in every class (thousands of near-tied detections); the class
    logits are spread (x7) and shifted (-8) so that, as with a trained model, most cells score
    near 0 and a few clearly win (about 1% of the cells above the demos' 0.25 threshold)."""
    box = g.conv(x, f"box{stride}", c, 64, k=1)
    logits = g.conv(x, f"cls{stride}_logits", c, 80, k=1)
    _sharpen(g, logits, 7.0, -8.0)
    cls = g.node("Sigmoid", [logits], f"cls{stride}")
    total = g.node("ReduceSum", [cls, g.const(f"ax{stride}", np.array([1], np.int64))],
                   f"sum{stride}_raw", keepdims=1)  # fmt: skip
    lo, hi = g.const(f"lo{stride}", np.float32(0)), g.const(f"hi{stride}", np.float32(1))
    return [box, cls, g.node("Clip", [total, lo, hi], f"score_sum{stride}")]


def yolov8_heads(size: int = 640, seed: int = 2) -> onnx.ModelProto:
    """The model zoo's yolov8/yolo11 ONNX interface: images [1,3,640,640] -> per stride 8, 16,
    32: box distribution [1,64,h,w], class scores [1,80,h,w] (Sigmoid), score sum [1,1,h,w]."""
    g = Graph(seed)
    _p4, feats = _silu_backbone(g)
    outs = [o for x, c, stride in feats for o in _box_class_sum(g, x, c, stride)]
    return g.model([("images", [1, 3, size, size])], outs, opset=13, name="yolov8")


def yolov8_seg_heads(size: int = 640, seed: int = 4) -> onnx.ModelProto:
    """The model zoo's yolov8_seg ONNX interface (its README: the original [1,116,8400] output
    split per stride): per stride 8, 16, 32 box [1,64,h,w], class scores [1,80,h,w], score sum
    [1,1,h,w] and 32 mask coefficients [1,32,h,w]; last the mask prototypes [1,32,160,160]."""
    g = Graph(seed)
    p4, feats = _silu_backbone(g)
    outs = []
    for x, c, stride in feats:
        outs += [*_box_class_sum(g, x, c, stride), g.conv(x, f"seg{stride}", c, 32, k=1)]
    outs.append(g.silu(g.conv(p4, "proto_conv", 16, 32), "proto"))
    return g.model([("images", [1, 3, size, size])], outs, opset=13, name="yolov8_seg")


def yolov8_pose_heads(size: int = 640, seed: int = 3) -> onnx.ModelProto:
    """The model zoo's yolov8_pose ONNX interface: images [1,3,640,640] -> three [1,65,h,w]
    detection heads and keypoints [1,17,3,8400]; the keypoint branches carry the tensor names
    its convert.py gives custom_hybrid ('/model.22/cv4.K/cv4.K.0/act/Mul_output_0' ...
    '/model.22/Concat_6_output_0')."""
    g = Graph(seed)
    _p4, feats = _silu_backbone(g)
    outs, kpts = [], []
    flat = g.const("flat", np.array([1, 51, -1], np.int64))
    for k, (x, c, _stride) in enumerate(feats):
        outs.append(g.conv(x, f"det{k}", c, 65, k=1))
        pre = g.conv(x, f"/model.22/cv4.{k}/cv4.{k}.0/conv/Conv_output_0", c, 16)
        act = g.node("Mul", [pre, g.node("Sigmoid", [pre], f"/model.22/cv4.{k}/sig")],
                     f"/model.22/cv4.{k}/cv4.{k}.0/act/Mul_output_0")  # fmt: skip
        kpt = g.conv(act, f"/model.22/cv4.{k}/cv4.{k}.2/Conv_output_0", 16, 51, k=1)
        kpts.append(g.node("Reshape", [kpt, flat], f"/model.22/Reshape_{k}_output_0"))
    cat = g.node("Concat", kpts, "/model.22/Concat_6_output_0", axis=2)
    shape = g.const("kshape", np.array([1, 17, 3, -1], np.int64))
    outs.append(g.node("Reshape", [g.node("Sigmoid", [cat], "kpt_sig"), shape], "kpt"))
    return g.model([("images", [1, 3, size, size])], outs, opset=12, name="yolov8_pose")


# PPOCR-Det's convert.py normalises with ImageNet's mean/std (given in 0..255)
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def ppocr_det(size: int = 480) -> onnx.ModelProto:
    """ppocrv4_det.onnx's interface: x [1,3,480,480] -> sigmoid_0.tmp_0 [1,1,480,480], a DB
    probability map that marks dark pixels of the image the demo's normalisation gives."""
    return _dark_pixel_db(size, tuple(m / 255 for m in IMAGENET_MEAN),
                          tuple(s / 255 for s in IMAGENET_STD))  # fmt: skip


# the recogniser's reading: blank where a column holds no ink, else the character whose
# (presence, coverage) centre is nearest; a few classes of the 6625 are ever chosen
REC_CLASSES = 6625
REC_CHARS = {  # class index -> (ink presence, ink coverage) centre
    101: (0.25, 0.03), 202: (0.25, 0.07), 303: (0.25, 0.11), 404: (0.25, 0.15),
    505: (0.25, 0.19),
}  # fmt: skip
REC_SHARPNESS = 2500.0


def ppocr_rec(height: int = 48, width: int = 320) -> onnx.ModelProto:
    """ppocrv4_rec.onnx's interface: x [1,3,48,320] -> softmax_11.tmp_0 [1,40,6625] (one CTC
    step per 8 columns, class 0 the blank). As Paddle2ONNX writes the model, the output's
    first two dimensions are symbolic ('p2o.DynamicDimension.N') and the sequence reshape
    takes its target shape from a Shape node at run time. The input stays fixed: convert.py
    sets no dynamic_input, and the vendor's load_onnx refuses free input dimensions then.

    The reading (0..1 input: the demo divides by 255): darkness d = 1 - grey less its mean
    over the crop; per column its maximum over the rows (presence) and its positive mean
    (coverage), averaged over each 8-column step; the logits are a nearest-centre rule over
    (presence, coverage), the blank's centre at (0, 0)."""
    g = Graph(11)
    d = g.node("Conv", ["x", g.const("grey.w", np.full((1, 3, 1, 1), -1 / 3, np.float32)),
                        g.const("grey.b", np.ones(1, np.float32))], "dark",
               kernel_shape=[1, 1])  # fmt: skip
    c = g.node("Sub", [d, g.node("ReduceMean", [d], "dark_mean", axes=[2, 3], keepdims=1)],
               "contrast")  # fmt: skip
    presence = g.node("ReduceMax", [c], "presence", axes=[2], keepdims=1)
    coverage = g.node("ReduceMean", [g.node("Relu", [c], "ink")], "coverage", axes=[2],
                      keepdims=1)  # fmt: skip
    feats = g.node("Concat", [presence, coverage], "col_feats", axis=1)  # [1,2,1,W]
    steps = g.node("AveragePool", [feats], "steps", kernel_shape=[1, 8], strides=[1, 8])
    # [N,2,1,T] -> [N,T,2]: the target shape [N, T, 2] is read from the tensor at run time
    shape = g.node("Shape", [steps], "steps_shape")
    n = g.node("Gather", [shape, g.const("i0", np.array([0], np.int64))], "n", axis=0)
    t = g.node("Gather", [shape, g.const("i3", np.array([3], np.int64))], "t", axis=0)
    target = g.node("Concat", [n, t, g.const("two", np.array([2], np.int64))], "seq_shape",
                    axis=0)  # fmt: skip
    seq = g.node("Transpose", [g.node("Squeeze", [steps, g.const("ax2", np.array([2], np.int64))],
                                      "steps_sq")], "steps_t", perm=[0, 2, 1])  # fmt: skip
    seq = g.node("Reshape", [seq, target], "seq")
    w = np.zeros((2, REC_CLASSES), np.float32)
    b = np.full(REC_CLASSES, -100.0, np.float32)
    b[0] = 0.0  # blank: centre (0, 0)
    for k, centre in REC_CHARS.items():
        w[:, k] = 2 * REC_SHARPNESS * np.array(centre)
        b[k] = -REC_SHARPNESS * float(np.dot(centre, centre))
    logits = g.node("Add", [g.node("MatMul", [seq, g.const("cls.w", w)], "cls_mm"),
                            g.const("cls.b", b)], "logits")  # fmt: skip
    g.node("Softmax", [logits], "softmax_11.tmp_0", axis=2)
    graph = helper.make_graph(
        g.nodes, "ppocrv4_rec",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, height, width])],
        [helper.make_tensor_value_info("softmax_11.tmp_0", TensorProto.FLOAT,
                                       ["p2o.DynamicDimension.2", "p2o.DynamicDimension.3",
                                        REC_CLASSES])],
        g.inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model
