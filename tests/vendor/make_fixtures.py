"""Regenerate the vendor .rknn fixtures of tests/vendor/ with the vendor's rknn-toolkit2 2.5.0.

Run with the vendor's separate environment (never a dependency of rknnrt):

    /work/vendor_env/bin/python tests/vendor/make_fixtures.py [--out tests/vendor/fixtures]
                                                              [--only NAME ...]

For every small model below (built with onnx.helper, seeded) and every platform x dtype it
exports `<model>_<platform>_<dtype>.rknn`, runs the vendor simulator on 3 seeded inputs and
stores, in `<model>_<platform>_<dtype>.npz`, the inputs (in0, in1, ... as NCHW float32, one
leading axis per sample) and the simulator's outputs (out0, out1, ...). `reported.json` gathers
what the toolkit itself reports about each file: the IO dtypes of its build warnings, the IO
quantisation parameters of its quantised graph (check.onnx), the IO rows of its verbose "Feature
Tensor Information Table", the weight and internal memory sizes of its log, the custom string
given to config() and the simulator outputs' shapes. Exports are not byte-reproducible (the
vendor leaks uninitialised bytes), so regenerated fixtures differ in bytes, not in content.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

PLATFORMS = ("rk3588", "rk3566", "rk3576")
DTYPES = ("i8", "fp16")
SAMPLES = 3
CUSTOM = "vendor-fixture"


def _w(rng: np.random.Generator, name: str, *shape: int, s: float = 0.3) -> onnx.TensorProto:
    return nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, TP.FLOAT, shape)


def m_convpool(rng):
    """conv 3->16 + relu + maxpool + flatten + gemm."""
    inits = [_w(rng, "c1_w", 16, 3, 3, 3), _w(rng, "c1_b", 16, s=0.1),
             _w(rng, "fc_w", 10, 16 * 8 * 8, s=0.05), _w(rng, "fc_b", 10, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Flatten", ["p1"], ["f1"], axis=1),
        h.make_node("Gemm", ["f1", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    return nodes, inits, [_vi("x", [1, 3, 16, 16])], [_vi("y", [1, 10])]


def m_residual(rng):
    """stem conv + relu, residual conv pair with add, depthwise branch, concat, 1x1 conv."""
    inits = [_w(rng, "stem_w", 8, 4, 3, 3), _w(rng, "stem_b", 8, s=0.1),
             _w(rng, "a_w", 8, 8, 3, 3), _w(rng, "a_b", 8, s=0.1),
             _w(rng, "b_w", 8, 8, 3, 3), _w(rng, "b_b", 8, s=0.1),
             _w(rng, "dw_w", 8, 1, 3, 3), _w(rng, "dw_b", 8, s=0.1),
             _w(rng, "pw_w", 12, 16, 1, 1), _w(rng, "pw_b", 12, s=0.1)]  # fmt: skip
    p = dict(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    nodes = [
        h.make_node("Conv", ["x", "stem_w", "stem_b"], ["s"], **p),
        h.make_node("Relu", ["s"], ["s_r"]),
        h.make_node("Conv", ["s_r", "a_w", "a_b"], ["a"], **p),
        h.make_node("Relu", ["a"], ["a_r"]),
        h.make_node("Conv", ["a_r", "b_w", "b_b"], ["b"], **p),
        h.make_node("Add", ["b", "s_r"], ["res"]),
        h.make_node("Conv", ["s_r", "dw_w", "dw_b"], ["dw"], group=8, **p),
        h.make_node("Concat", ["res", "dw"], ["cat"], axis=1),
        h.make_node("Conv", ["cat", "pw_w", "pw_b"], ["y"], kernel_shape=[1, 1]),
    ]
    return nodes, inits, [_vi("x", [1, 4, 16, 16])], [_vi("y", [1, 12, 16, 16])]


def m_swish(rng):
    """strided conv, swish (sigmoid x mul), reshape, transpose, softmax; a second output."""
    inits = [_w(rng, "c_w", 6, 3, 3, 3), _w(rng, "c_b", 6, s=0.1),
             nh.from_array(np.array([1, 6, 64], np.int64), "shp")]  # fmt: skip
    nodes = [
        h.make_node(
            "Conv",
            ["x", "c_w", "c_b"],
            ["c"],
            pads=[1, 1, 1, 1],
            kernel_shape=[3, 3],
            strides=[2, 2],
        ),  # fmt: skip
        h.make_node("Sigmoid", ["c"], ["sg"]),
        h.make_node("Mul", ["c", "sg"], ["sw"]),
        h.make_node("Reshape", ["sw", "shp"], ["rs"]),
        h.make_node("Transpose", ["rs"], ["tr"], perm=[0, 2, 1]),
        h.make_node("Softmax", ["tr"], ["y"], axis=-1),
        h.make_node("Sigmoid", ["sw"], ["y2"]),
    ]
    outs = [_vi("y", [1, 64, 6]), _vi("y2", [1, 6, 8, 8])]
    return nodes, inits, [_vi("x", [1, 3, 16, 16])], outs


def m_twoinput(rng):
    """two inputs: a 1x1 conv on an image, a gemm on a vector, broadcast add."""
    shape = nh.from_array(np.array([1, 4, 1, 1], np.int64), "shp")
    inits = [_w(rng, "c_w", 4, 3, 1, 1), _w(rng, "c_b", 4, s=0.1), _w(rng, "g_w", 16, 4, s=0.2),
             _w(rng, "g_b", 4, s=0.1), shape]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x1", "c_w", "c_b"], ["c"], kernel_shape=[1, 1]),
        h.make_node("Gemm", ["x2", "g_w", "g_b"], ["g"]),
        h.make_node("Reshape", ["g", "shp"], ["gr"]),
        h.make_node("Add", ["c", "gr"], ["y"]),
    ]
    return nodes, inits, [_vi("x1", [1, 3, 8, 8]), _vi("x2", [1, 16])], [_vi("y", [1, 4, 8, 8])]


def m_oddwidth(rng):
    """odd widths and channel counts: two inputs (3 and 5 channels, 15x15), add, reshape."""
    inits = [_w(rng, "ca_w", 5, 3, 3, 3), _w(rng, "ca_b", 5, s=0.1),
             _w(rng, "cb_w", 5, 5, 1, 1), _w(rng, "cb_b", 5, s=0.1),
             nh.from_array(np.array([1, 5, 225], np.int64), "shp")]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["a", "ca_w", "ca_b"], ["ca"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Conv", ["b", "cb_w", "cb_b"], ["cb"], kernel_shape=[1, 1]),
        h.make_node("Add", ["ca", "cb"], ["y"]),
        h.make_node("Reshape", ["y", "shp"], ["y2"]),
    ]
    ins = [_vi("a", [1, 3, 15, 15]), _vi("b", [1, 5, 15, 15])]
    return nodes, inits, ins, [_vi("y", [1, 5, 15, 15]), _vi("y2", [1, 5, 225])]


def m_gap(rng):
    """1-channel input of odd width, conv 1->7 + relu, conv 7->9 stride 2, global average pool,
    flatten, gemm: the classification head of a ResNet."""
    inits = [_w(rng, "c1_w", 7, 1, 3, 3), _w(rng, "c1_b", 7, s=0.1),
             _w(rng, "c2_w", 9, 7, 3, 3, s=0.2), _w(rng, "c2_b", 9, s=0.1),
             _w(rng, "fc_w", 5, 9, s=0.3), _w(rng, "fc_b", 5, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node(
            "Conv",
            ["r1", "c2_w", "c2_b"],
            ["c2"],
            pads=[1, 1, 1, 1],
            kernel_shape=[3, 3],
            strides=[2, 2],
        ),  # fmt: skip
        h.make_node("Relu", ["c2"], ["r2"]),
        h.make_node("GlobalAveragePool", ["r2"], ["g"]),
        h.make_node("Flatten", ["g"], ["f"], axis=1),
        h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    return nodes, inits, [_vi("x", [1, 1, 12, 13])], [_vi("y", [1, 5])]


def m_mlp(rng):
    """a 2-D input: gemm + relu, gemm, softmax."""
    inits = [_w(rng, "g1_w", 20, 13, s=0.3), _w(rng, "g1_b", 13, s=0.1),
             _w(rng, "g2_w", 13, 6, s=0.3), _w(rng, "g2_b", 6, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Gemm", ["x", "g1_w", "g1_b"], ["g1"]),
        h.make_node("Relu", ["g1"], ["r1"]),
        h.make_node("Gemm", ["r1", "g2_w", "g2_b"], ["g2"]),
        h.make_node("Softmax", ["g2"], ["y"], axis=-1),
    ]
    return nodes, inits, [_vi("x", [1, 20])], [_vi("y", [1, 6])]


def m_sigmoid(rng):
    """conv 4->6 + sigmoid gate times a second conv branch, maxpool 3x3 stride 1."""
    inits = [_w(rng, "ga_w", 6, 4, 3, 3), _w(rng, "ga_b", 6, s=0.1),
             _w(rng, "gb_w", 6, 4, 1, 1), _w(rng, "gb_b", 6, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "ga_w", "ga_b"], ["ga"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Sigmoid", ["ga"], ["gs"]),
        h.make_node("Conv", ["x", "gb_w", "gb_b"], ["gb"], kernel_shape=[1, 1]),
        h.make_node("Mul", ["gs", "gb"], ["m"]),
        h.make_node(
            "MaxPool", ["m"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]
        ),  # fmt: skip
    ]
    return nodes, inits, [_vi("x", [1, 4, 10, 12])], [_vi("y", [1, 6, 10, 12])]


def m_transpose(rng):
    """conv, reshape to tokens, transpose, reshape back, concat with the conv output."""
    inits = [_w(rng, "c_w", 8, 3, 3, 3), _w(rng, "c_b", 8, s=0.1),
             nh.from_array(np.array([1, 8, 36], np.int64), "s1"),
             nh.from_array(np.array([1, 8, 6, 6], np.int64), "s2")]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "c_w", "c_b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Reshape", ["c", "s1"], ["r"]),
        h.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        h.make_node("Reshape", ["t", "s2"], ["u"]),
        h.make_node("Concat", ["c", "u"], ["y"], axis=1),
    ]
    return nodes, inits, [_vi("x", [1, 3, 6, 6])], [_vi("y", [1, 16, 6, 6])]


def m_wide(rng):
    """an 8-channel input (NC1HWC2 natively) of odd width, two 3x3 convs 8->10->6."""
    inits = [_w(rng, "c1_w", 10, 8, 3, 3, s=0.2), _w(rng, "c1_b", 10, s=0.1),
             _w(rng, "c2_w", 6, 10, 3, 3, s=0.2), _w(rng, "c2_b", 6, s=0.1)]  # fmt: skip
    p = dict(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    nodes = [
        h.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], **p),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("Conv", ["r1", "c2_w", "c2_b"], ["y"], **p),
    ]
    return nodes, inits, [_vi("x", [1, 8, 10, 11])], [_vi("y", [1, 6, 10, 11])]


def m_pixels(rng):
    """the convpool network on an image normalised by the runtime (config mean/std): inputs
    are pixels in [0, 255]."""
    return m_convpool(rng)


def m_fire(rng):
    """conv 3->48, conv 48->64: the second's weights are stored as two input-channel tiles
    (32 + 16) per block of output channels, as in SqueezeNet's fire6/fire7 expands."""
    inits = [_w(rng, "c1_w", 48, 3, 1, 1), _w(rng, "c1_b", 48, s=0.1),
             _w(rng, "c2_w", 64, 48, 1, 1, s=0.2), _w(rng, "c2_b", 64, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], kernel_shape=[1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("Conv", ["r1", "c2_w", "c2_b"], ["y"], kernel_shape=[1, 1]),
    ]
    return nodes, inits, [_vi("x", [1, 3, 4, 4])], [_vi("y", [1, 64, 4, 4])]


def m_avgpool(rng):
    """AveragePools on the input: 3x3 stride 2 pad 1 without the pads in the count
    (ShuffleNet's; its output flattened is the first model output), then 4x4 with pads only at
    the end (Inception v1's 7x7 head) and 3x3 stride 1 pad 1 counting the pads. The vendor
    runs the first two on the CPU, which stores its outputs NCHW: the 4-D output comes from the
    last, an NPU op, and the other output is 2-D."""
    shape = nh.from_array(np.array([1, 8 * 7 * 7], np.int64), "shp")
    nodes = [
        h.make_node(
            "AveragePool", ["x"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        ),  # fmt: skip
        h.make_node("Reshape", ["p1", "shp"], ["y1"]),
        h.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[4, 4], pads=[0, 0, 1, 1]),
        h.make_node(
            "AveragePool",
            ["p2"],
            ["y2"],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),  # fmt: skip
    ]
    outs = [_vi("y1", [1, 8 * 7 * 7]), _vi("y2", [1, 8, 5, 5])]
    return nodes, [shape], [_vi("x", [1, 8, 13, 13])], outs


def m_lrn(rng):
    """conv 3->16 + relu, LRN with non-default attributes, conv, LRN with ONNX's defaults
    (Inception v1's), a 1x1 conv (LRN runs on the vendor's CPU: see m_avgpool)."""
    inits = [_w(rng, "c1_w", 16, 3, 3, 3, s=0.6), _w(rng, "c1_b", 16, s=0.1),
             _w(rng, "c2_w", 12, 16, 1, 1), _w(rng, "c2_b", 12, s=0.1),
             _w(rng, "o_w", 6, 12, 1, 1), _w(rng, "o_b", 6, s=0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("LRN", ["r1"], ["n1"], size=3, alpha=0.2, beta=0.6, bias=1.5),
        h.make_node("Conv", ["n1", "c2_w", "c2_b"], ["c2"], kernel_shape=[1, 1]),
        h.make_node("LRN", ["c2"], ["n2"], size=5),
        h.make_node("Conv", ["n2", "o_w", "o_b"], ["y"], kernel_shape=[1, 1]),
    ]
    return nodes, inits, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 6, 8, 8])]


# config() extras per model: mean/std the runtime applies to the inputs.
NORMALISATION = {"pixels": dict(mean_values=[[120, 110, 100]], std_values=[[60, 50, 40]])}

_ALL = (m_convpool, m_residual, m_swish, m_twoinput, m_oddwidth, m_gap, m_mlp, m_sigmoid,
        m_transpose, m_wide, m_pixels, m_fire, m_avgpool, m_lrn)  # fmt: skip
MODELS = {f.__name__[2:]: f for f in _ALL}
# Each model's weight seed (100 + position): stable when models are added at the end.
SEED_ORDER = ("convpool", "gap", "mlp", "oddwidth", "residual", "sigmoid", "swish", "transpose",
              "twoinput", "wide", "pixels", "fire", "avgpool", "lrn")  # fmt: skip


def make_onnx(name: str) -> onnx.ModelProto:
    rng = np.random.default_rng(SEED_ORDER.index(name) + 100)
    nodes, inits, ins, outs = MODELS[name](rng)
    for k, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{k}"
    model = h.make_model(h.make_graph(nodes, name, ins, outs, inits),
                         opset_imports=[h.make_opsetid("", 13)])  # fmt: skip
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _shapes(model: onnx.ModelProto) -> list[list[int]]:
    return [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]


_FEATURE_ROW = re.compile(
    r"RKNN: \[[^\]]*\] \d+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\(\S*\))\s+(\(\S*\))\s+\|\s+"
    r"0x([0-9a-f]+)\*?\s*0x([0-9a-f]+)\s+0x([0-9a-f]+)"
)


def parse_log(text: str, model: onnx.ModelProto) -> dict:
    """What the verbose build log says about the IO tensors and the memory sizes."""
    io = {i.name for i in model.graph.input} | {o.name for o in model.graph.output}
    rows = {}
    for m in _FEATURE_ROW.finditer(text):
        user, tensor, dtype, fmt, orig, native, start, _end, size = m.groups()
        if tensor in io and tensor not in rows:  # first row: where the IO tensor is allocated
            rows[tensor] = dict(user=user, dtype=dtype, fmt=fmt, orig=orig, native=native,
                                start=int(start, 16), size=int(size, 16))  # fmt: skip
    changed = dict(re.findall(r"default (?:input|output) dtype of '([^']+)' is changed from "
                              r"'float32' to '(\w+)'", text))  # fmt: skip
    mem = dict(re.findall(r"Total (Internal|Weight) Memory Size: ([0-9.]+\w+)", text))
    return dict(feature_rows=rows, dtype_changed=changed, memory=mem)


def io_quant(check_onnx: str, model: onnx.ModelProto) -> dict:
    """The IO tensors' scale and zero point in the vendor's quantised graph."""
    if not os.path.exists(check_onnx):
        return {}
    inits = {i.name: nh.to_array(i) for i in onnx.load(check_onnx).graph.initializer}
    out = {}
    for name in [i.name for i in model.graph.input] + [o.name for o in model.graph.output]:
        if f"{name}_quant_scale" in inits and inits[f"{name}_quant_scale"].size:
            out[name] = dict(scale=float(inits[f"{name}_quant_scale"].ravel()[0]),
                             zp=int(inits[f"{name}_quant_zero_point"].ravel()[0]))  # fmt: skip
    return out


def build_one(name: str, platform: str, dtype: str, out_dir: str, work: str,
              model: onnx.ModelProto | None = None,
              custom_ops: list | None = None) -> dict:  # fmt: skip
    """Build, export and simulate one fixture (`model`: make_onnx(name) unless given;
    `custom_ops`: op classes given to reg_custom_op first, which the simulator then runs)."""
    from rknn.api import RKNN  # the vendor toolkit: only in its own environment

    model = model if model is not None else make_onnx(name)
    onnx_path = os.path.join(work, f"{name}.onnx")
    onnx.save(model, onnx_path)
    rng = np.random.default_rng(7)
    shapes = _shapes(model)
    calib = []
    for k in range(4):
        paths = []
        for i, shape in enumerate(shapes):
            path = os.path.join(work, f"{name}_calib{k}_{i}.npy")
            if name in NORMALISATION:
                sample = rng.uniform(0, 255, shape).round()
            else:
                sample = rng.standard_normal(shape)
            np.save(path, sample.astype(np.float32))
            paths.append(path)
        calib.append(" ".join(paths))
    with open(os.path.join(work, "dataset.txt"), "w") as f:
        f.write("\n".join(calib) + "\n")
    # The test inputs are calibration samples: every intermediate then lies inside its
    # quantisation range. (Outside it the board saturates where the simulator, which keeps
    # some fused intermediates in float, does not: docs/vendor-rknn.md.)
    tests = [[np.load(p, allow_pickle=False) for p in line.split(" ")] for line in calib[:SAMPLES]]
    log_path = os.path.join(work, "build.log")
    rknn = RKNN(verbose=True)
    rknn.config(target_platform=platform, custom_string=CUSTOM, **NORMALISATION.get(name, {}))
    for op in custom_ops or []:
        assert rknn.reg_custom_op(op) == 0
    assert rknn.load_onnx(onnx_path) == 0
    # The compiler's tables go to the process's own stdout: capture fds 1 and 2 at OS level.
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    with open(log_path, "w") as log_file:
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
        try:
            ok = rknn.build(do_quantization=dtype == "i8",
                            dataset=os.path.join(work, "dataset.txt"))  # fmt: skip
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    assert ok == 0, "build failed"
    check = os.path.join(rknn.rknn_base.temp_dir.name, "check.onnx")
    quant = io_quant(check, model)
    stem = f"{name}_{platform}_{dtype}"
    assert rknn.export_rknn(os.path.join(out_dir, stem + ".rknn")) == 0
    assert rknn.init_runtime() == 0  # the simulator: never pass target=
    arrays = {}
    for xs in tests:
        outs = rknn.inference(inputs=xs, data_format=["nchw"] * len(xs))
        for i, x in enumerate(xs):
            arrays.setdefault(f"in{i}", []).append(x)
        for i, o in enumerate(outs):
            arrays.setdefault(f"out{i}", []).append(np.asarray(o))
    rknn.release()
    np.savez_compressed(os.path.join(out_dir, stem + ".npz"),
                        **{k: np.stack(v) for k, v in arrays.items()})  # fmt: skip
    with open(log_path, errors="replace") as f:
        log = parse_log(f.read(), model)
    return dict(
        model=name, platform=platform, dtype=dtype, custom_string=CUSTOM,
        inputs=[i.name for i in model.graph.input], outputs=[o.name for o in model.graph.output],
        input_shapes=shapes, io_quant=quant,
        sim_output_shapes=[list(np.shape(v[0])) for k, v in sorted(arrays.items())
                           if k.startswith("out")],
        **log,
    )  # fmt: skip


def build_dynamic(out_dir: str, work: str) -> None:
    """`dynamic_wide_rk3588_fp16.rknn`: the wide model with two input shapes (a dynamic-shape
    build holds one graph per shape set; rknnrt refuses it by name). No simulator run."""
    from rknn.api import RKNN

    model = make_onnx("wide")
    for vi in [*model.graph.input, *model.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        dims[2].dim_param, dims[3].dim_param = "h", "w"
    onnx_path = os.path.join(work, "wide_dyn.onnx")
    onnx.save(model, onnx_path)
    rknn = RKNN(verbose=False)
    rknn.config(target_platform="rk3588", dynamic_input=[[[1, 8, 10, 11]], [[1, 8, 16, 16]]])
    assert rknn.load_onnx(onnx_path) == 0
    assert rknn.build(do_quantization=False) == 0
    assert rknn.export_rknn(os.path.join(out_dir, "dynamic_wide_rk3588_fp16.rknn")) == 0
    rknn.release()


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "fixtures"))
    ap.add_argument("--only", nargs="*", default=None, help="model names to rebuild")
    ap.add_argument("--platforms", nargs="*", default=list(PLATFORMS))
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES))
    ap.add_argument("--dynamic", action="store_true", help="(re)build only the dynamic model")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.dynamic:
        work = tempfile.mkdtemp(prefix="rknnrt_vendor_fx_")
        os.chdir(work)
        try:
            build_dynamic(args.out, work)
        finally:
            os.chdir(here)
            shutil.rmtree(work, ignore_errors=True)
        return 0
    report_path = os.path.join(args.out, "reported.json")
    reported = {}
    if os.path.exists(report_path):
        with open(report_path) as f:
            reported = json.load(f)
    for name in args.only or list(MODELS):
        for platform in args.platforms:
            for dtype in args.dtypes:
                work = tempfile.mkdtemp(prefix="rknnrt_vendor_fx_")
                os.chdir(work)  # the toolkit writes its check*.onnx files into the cwd
                try:
                    reported[f"{name}_{platform}_{dtype}"] = build_one(
                        name, platform, dtype, args.out, work
                    )
                    print("built", name, platform, dtype, flush=True)
                except Exception:  # noqa: BLE001 - report and go on with the others
                    print("FAILED", name, platform, dtype, file=sys.stderr, flush=True)
                    traceback.print_exc()
                finally:
                    os.chdir(here)
                    shutil.rmtree(work, ignore_errors=True)
                with open(report_path, "w") as f:
                    json.dump(reported, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
