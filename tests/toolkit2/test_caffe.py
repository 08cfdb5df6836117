"""load_caffe: Caffe files written by the tests (caffe_files.py) converted and compared, layer
by layer, with numpy implementations of Caffe's own definitions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rknnrt.toolkit import RKNN
from rknnrt.toolkit.loaders import caffe

from .caffe_files import caffemodel, layer
from .models import cosine, run_onnx

RNG = np.random.RandomState(7)


def _r(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (RNG.randn(*shape) * scale).astype(np.float32)


def conv(x, w, b, stride=1, pad=0, group=1):
    n, c, h, wd = x.shape
    o, cg, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    og = o // group
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride : i * stride + k, j * stride : j * stride + k]
            for gi in range(group):
                part = win[:, gi * cg : (gi + 1) * cg]
                ws = w[gi * og : (gi + 1) * og]
                out[:, gi * og : (gi + 1) * og, i, j] = np.einsum("nchw,ochw->no", part, ws)
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def deconv(x, w, b, stride):
    n, c, h, wd = x.shape
    _, o, k, _ = w.shape
    out = np.zeros((n, o, (h - 1) * stride + k, (wd - 1) * stride + k))
    for i in range(h):
        for j in range(wd):
            out[:, :, i * stride : i * stride + k, j * stride : j * stride + k] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w
            )
    return out + b.reshape(1, -1, 1, 1)


def caffe_pool(x, k, s, pad, mode):
    """Caffe's PoolingLayer forward: ceil rounding, the last window starting inside the image,
    average divided by the window clipped to the padded input."""
    n, c, h, w = x.shape
    oh = int(np.ceil((h + 2 * pad - k) / s)) + 1
    ow = int(np.ceil((w + 2 * pad - k) / s)) + 1
    if pad and (oh - 1) * s >= h + pad:
        oh -= 1
    if pad and (ow - 1) * s >= w + pad:
        ow -= 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * s - pad, j * s - pad
            he, we = min(hs + k, h + pad), min(ws + k, w + pad)
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            win = x[:, :, hs:he, ws:we]
            out[:, :, i, j] = win.max(axis=(2, 3)) if mode == "MAX" else \
                win.sum(axis=(2, 3)) / size  # fmt: skip
    return out


def _net():
    """A prototxt exercising every supported layer, its caffemodel, and the numpy forward."""
    blobs = {
        "conv1": [_r(8, 3, 3, 3), _r(8)],
        "bn1": [_r(8), np.abs(_r(8)) + 0.5, np.array([2.0], np.float32)],
        "sc1": [_r(8) + 1, _r(8)],
        "dw": [_r(8, 1, 3, 3)],
        "prelu": [np.abs(_r(8)) * 0.3],
        "conv2": [_r(8, 8, 1, 1), _r(8)],
        "up": [_r(16, 4, 2, 2), _r(4)],
        "norm": [np.abs(_r(4)) + 1],
        "ip": [_r(10, 100, scale=0.2), _r(10)],
    }
    text = 'name: "tiny"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 13 dim: 13 }\n'
    text += layer(
        "conv1",
        "Convolution",
        ["data"],
        ["conv1"],
        "convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 "
        'weight_filler { type: "msra" } }',
    )
    text += layer(
        "bn1",
        "BatchNorm",
        ["conv1"],
        ["conv1"],
        "batch_norm_param { use_global_stats: true eps: 1e-5 }",
    )
    text += layer("sc1", "Scale", ["conv1"], ["conv1"], "scale_param { bias_term: true }")
    text += layer("relu1", "ReLU", ["conv1"], ["conv1"], "relu_param { negative_slope: 0.1 }")
    text += layer(
        "pool1",
        "Pooling",
        ["conv1"],
        ["pool1"],
        "pooling_param { pool: MAX kernel_size: 2 stride: 2 }",
    )
    text += layer(
        "dw",
        "Convolution",
        ["pool1"],
        ["dw"],
        "convolution_param { num_output: 8 bias_term: false kernel_size: 3 pad: 1 group: 8 }",
    )
    text += layer("prelu", "PReLU", ["dw"], ["dw"])
    text += layer(
        "conv2",
        "Convolution",
        ["dw"],
        ["conv2"],
        "convolution_param { num_output: 8 kernel_size: 1 }",
    )
    text += layer(
        "sum",
        "Eltwise",
        ["dw", "conv2"],
        ["sum"],
        "eltwise_param { operation: SUM coeff: 1 coeff: 0.5 }",
    )
    text += layer("prod", "Eltwise", ["sum", "dw"], ["prod"], "eltwise_param { operation: PROD }")
    text += layer("mx", "Eltwise", ["prod", "conv2"], ["mx"], "eltwise_param { operation: MAX }")
    text += layer("cat", "Concat", ["sum", "mx"], ["cat"], "concat_param { axis: 1 }")
    text += layer(
        "up",
        "Deconvolution",
        ["cat"],
        ["up"],
        "convolution_param { num_output: 4 kernel_size: 2 stride: 2 }",
    )
    text += layer(
        "pool2",
        "Pooling",
        ["up"],
        ["pool2"],
        "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }",
    )
    text += layer(
        "norm",
        "Normalize",
        ["pool2"],
        ["norm"],
        "norm_param { across_spatial: false channel_shared: false eps: 1e-10 }",
    )
    text += layer(
        "perm",
        "Permute",
        ["norm"],
        ["perm"],
        "permute_param { order: 0 order: 2 order: 3 order: 1 }",
    )
    text += layer("flat", "Flatten", ["perm"], ["flat"])
    text += layer("ip", "InnerProduct", ["flat"], ["ip"], "inner_product_param { num_output: 10 }")
    text += layer("drop", "Dropout", ["ip"], ["ip"], "dropout_param { dropout_ratio: 0.5 }")
    text += layer("prob", "Softmax", ["ip"], ["prob"])
    text += layer(
        "gap", "Pooling", ["cat"], ["gap"], "pooling_param { pool: AVE global_pooling: true }"
    )
    text += layer(
        "gap_flat", "Reshape", ["gap"], ["gap_flat"], "reshape_param { shape { dim: 0 dim: -1 } }"
    )
    text += layer("loss", "SoftmaxWithLoss", ["ip"], ["loss"], "include { phase: TRAIN }")

    def forward(x):
        b = blobs
        y = conv(x, b["conv1"][0], b["conv1"][1], 2, 1)
        f = 1 / 2.0
        y = (y - b["bn1"][0].reshape(1, -1, 1, 1) * f) / np.sqrt(
            b["bn1"][1].reshape(1, -1, 1, 1) * f + 1e-5
        )
        y = y * b["sc1"][0].reshape(1, -1, 1, 1) + b["sc1"][1].reshape(1, -1, 1, 1)
        y = np.where(y > 0, y, 0.1 * y)
        p1 = caffe_pool(y, 2, 2, 0, "MAX")
        d = conv(p1, b["dw"][0], None, 1, 1, group=8)
        d = np.where(d > 0, d, d * b["prelu"][0].reshape(1, -1, 1, 1))
        c2 = conv(d, b["conv2"][0], b["conv2"][1])
        s = d + 0.5 * c2
        mx = np.maximum(s * d, c2)
        cat = np.concatenate([s, mx], 1)
        up = deconv(cat, b["up"][0], b["up"][1], 2)
        p2 = caffe_pool(up, 3, 2, 1, "AVE")
        n = p2 / np.sqrt((p2**2).sum(1, keepdims=True) + 1e-10) * b["norm"][0].reshape(1, -1, 1, 1)
        flat = n.transpose(0, 2, 3, 1).reshape(1, -1)
        ip = flat @ b["ip"][0].T + b["ip"][1]
        e = np.exp(ip - ip.max())
        return [e / e.sum(), cat.mean(axis=(2, 3)).reshape(1, -1)]

    return text, blobs, forward


@pytest.fixture
def files(tmp_path):
    text, blobs, forward = _net()
    (tmp_path / "tiny.prototxt").write_text(text)
    (tmp_path / "tiny.caffemodel").write_bytes(caffemodel(blobs))
    return tmp_path / "tiny.prototxt", tmp_path / "tiny.caffemodel", forward


def test_every_layer_matches_caffes_definition(files) -> None:
    proto, weights, forward = files
    model = caffe.load(proto, weights)
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["prob", "gap_flat"]
    shapes = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim]
              for o in model.graph.output}  # fmt: skip
    assert shapes == {"prob": [1, 10], "gap_flat": [1, 16]}
    assert "loss" not in {n.name for n in model.graph.node}  # TRAIN-only layer left out
    x = RNG.rand(1, 3, 13, 13).astype(np.float32) * 2 - 1
    got = run_onnx(model, {"data": x})
    for g, e in zip(got, forward(x.astype(np.float64))):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)


def test_through_the_converter_float_and_int8(files) -> None:
    proto, weights, forward = files
    x = RNG.rand(1, 3, 13, 13).astype(np.float32) * 2 - 1
    expected = forward(x.astype(np.float64))
    for quantise in (False, True):
        rknn = RKNN()
        assert rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1]) == 0
        assert rknn.load_caffe(model=str(proto), blobs=str(weights)) == 0, rknn.last_error
        data = [RNG.rand(1, 3, 13, 13).astype(np.float32) * 2 - 1 for _ in range(4)]
        assert rknn.build(do_quantization=quantise, dataset=data if quantise else None) == 0, \
            rknn.last_error  # fmt: skip
        assert rknn.init_runtime() == 0
        outs = rknn.inference([x], data_format="nchw")
        floor = 0.98 if quantise else 0.9999
        assert cosine(outs[1], expected[1]) > floor
        assert np.argmax(outs[0]) == np.argmax(expected[0]) or quantise
        rknn.release()


def _write(tmp_path, text: str, blobs: dict) -> tuple[str, str]:
    (tmp_path / "m.prototxt").write_text(text)
    (tmp_path / "m.caffemodel").write_bytes(caffemodel(blobs))
    return str(tmp_path / "m.prototxt"), str(tmp_path / "m.caffemodel")


HEAD = 'input: "data"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 8\ninput_dim: 8\n'


@pytest.mark.parametrize("kind, words", [
    ("PriorBox", "layer 'l' (PriorBox) is not supported: it runs on the host"),
    ("DetectionOutput", "(DetectionOutput) is not supported"),
    ("LRN", "layer 'l' (LRN): this layer type is not supported by rknnrt's Caffe reader"),
])  # fmt: skip
def test_unsupported_layers_are_refused_by_name(tmp_path, kind, words) -> None:
    proto, weights = _write(tmp_path, HEAD + layer("l", kind, ["data"], ["out"]), {})
    rknn = RKNN()
    assert rknn.load_caffe(proto, weights) == -1
    assert words in rknn.last_error


def test_bad_files_fail_with_one_line(tmp_path, capsys) -> None:
    conv = layer("c", "Convolution", ["data"], ["c"], "convolution_param { num_output: 4 "
                 "kernel_size: 3 }")  # fmt: skip
    proto, weights = _write(tmp_path, HEAD + conv, {})
    rknn = RKNN()
    assert rknn.load_caffe(proto, weights) == -1
    assert "layer 'c' (Convolution): the caffemodel has 0 blob(s) for it" in rknn.last_error
    (tmp_path / "m.caffemodel").write_bytes(b"\xff\xff\xff")
    assert rknn.load_caffe(proto, weights) == -1
    assert "not a caffemodel" in rknn.last_error
    (tmp_path / "m.prototxt").write_text('layers { name: "c" type: CONVOLUTION }\n')
    assert rknn.load_caffe(proto, weights) == -1 and "old-format" in rknn.last_error
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("E load_caffe:") for line in err)
    (tmp_path / "m.prototxt").write_text(HEAD)
    assert rknn.load_caffe(proto) == -1 and "needs blobs=" in rknn.last_error


def test_dynamic_input_takes_other_sizes_than_the_prototxts(tmp_path) -> None:
    """The vendor's dynamic_shape example: a prototxt declaring 1x3x224x224 built for three
    sizes (its input dims are only Caffe's default)."""
    blobs = {"c": [_r(4, 3, 3, 3), _r(4)], "ip": [_r(3, 4), _r(3)]}
    text = HEAD + layer("c", "Convolution", ["data"], ["c"],
                        "convolution_param { num_output: 4 kernel_size: 3 pad: 1 }")
    text += layer("r", "ReLU", ["c"], ["c"])
    text += layer("g", "Pooling", ["c"], ["g"], "pooling_param { pool: AVE global_pooling: true }")
    text += layer("f", "Flatten", ["g"], ["f"])
    text += layer("ip", "InnerProduct", ["f"], ["ip"], "inner_product_param { num_output: 3 }")
    text += layer("rs", "Reshape", ["ip"], ["out"], "reshape_param { shape { dim: 0 dim: -1 "
                  "dim: 1 } }")  # fmt: skip
    proto, weights = _write(tmp_path, text, blobs)
    sets = [[[1, 3, 8, 8]], [[1, 3, 12, 12]], [[1, 3, 6, 10]]]
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1], dynamic_input=sets,
                float_dtype="float32")  # fmt: skip
    assert rknn.load_caffe(proto, weights) == 0, rknn.last_error
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    for (shape,) in sets:
        x = RNG.rand(*shape).astype(np.float32) - 0.5
        y = np.maximum(conv(x.astype(np.float64), *blobs["c"], 1, 1), 0).mean(axis=(2, 3))
        expected = (y @ blobs["ip"][0].T + blobs["ip"][1]).reshape(1, 3, 1)
        (got,) = rknn.inference([x], data_format="nchw")
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
