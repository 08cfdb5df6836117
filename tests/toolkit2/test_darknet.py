"""load_darknet: a YOLOv3-shaped cfg + weights, checked against a numpy implementation of
Darknet's own layer arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.toolkit import RKNN

from .models import cosine

CFG = """[net]
width=8
height=8
channels=3

[convolutional]
batch_normalize=1
filters=4
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=4
size=1
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=1

[shortcut]
from=-3
activation=linear

[convolutional]
filters=6
size=1
pad=1
activation=linear

[yolo]
mask = 0,1,2

[route]
layers = -3

[upsample]
stride=2

[route]
layers = -1, 0

[convolutional]
filters=6
size=1
pad=1
activation=linear

[yolo]
mask = 3,4,5
"""


def _conv(x, w, b, pad):
    c_out, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    h, wd = xp.shape[1] - k + 1, xp.shape[2] - k + 1
    out = np.zeros((c_out, h, wd))
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("oc,chw->ohw", w[:, :, dy, dx], xp[:, dy : dy + h, dx : dx + wd])
    return out + b.reshape(-1, 1, 1)


def _maxpool(x, size, stride):
    pad = size - 1
    xp = np.pad(x, ((0, 0), (pad // 2, pad - pad // 2), (pad // 2, pad - pad // 2)),
                constant_values=-np.inf)  # fmt: skip
    h = (x.shape[1] + pad - size) // stride + 1
    w = (x.shape[2] + pad - size) // stride + 1
    out = np.full((x.shape[0], h, w), -np.inf)
    for dy in range(size):
        for dx in range(size):
            window = xp[:, dy : dy + stride * h : stride, dx : dx + stride * w : stride]
            out = np.maximum(out, window)
    return out


def _leaky(x):
    return np.where(x > 0, x, 0.1 * x)


def _files(tmp_path):
    rng = np.random.RandomState(0)
    params, chunks = [], [np.array([0, 2, 0], np.int32).tobytes(), np.int64(5).tobytes()]
    for c_in, c_out, k, bn in ((3, 4, 3, True), (4, 4, 1, False), (4, 6, 1, False),
                               (8, 6, 1, False)):  # fmt: skip
        bias = rng.randn(c_out).astype(np.float32)
        extra = [rng.rand(c_out).astype(np.float32) + 0.5, rng.randn(c_out).astype(np.float32),
                 rng.rand(c_out).astype(np.float32) + 0.5] if bn else []  # fmt: skip
        w = (rng.randn(c_out, c_in, k, k) * 0.5).astype(np.float32)
        chunks += [a.tobytes() for a in (bias, *extra, w)]
        params.append((bias, extra, w))
    (tmp_path / "net.cfg").write_text(CFG)
    (tmp_path / "net.weights").write_bytes(b"".join(chunks))
    return params


def _reference(x, params):
    (b0, (scale, mean, var), w0), (b2, _, w2), (b5, _, w5), (b10, _, w10) = params
    l0 = _conv(x, w0, np.zeros(4), 1)
    l0 = _leaky((l0 - mean.reshape(-1, 1, 1)) / (np.sqrt(var).reshape(-1, 1, 1) + 1e-6)
                * scale.reshape(-1, 1, 1) + b0.reshape(-1, 1, 1))  # fmt: skip
    l1 = _maxpool(l0, 2, 2)
    l2 = _leaky(_conv(l1, w2, b2, 0))
    l3 = _maxpool(l2, 2, 1)
    l4 = l3 + l1
    l5 = _conv(l4, w5, b5, 0)
    l8 = l4.repeat(2, 1).repeat(2, 2)
    l9 = np.concatenate([l8, l0], 0)
    l10 = _conv(l9, w10, b10, 0)
    return [l5[None], l10[None]]


def test_darknet_reader_matches_darknet_arithmetic(tmp_path) -> None:
    params = _files(tmp_path)
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == 0, \
        rknn.last_error  # fmt: skip
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    x = np.random.RandomState(1).rand(1, 3, 8, 8).astype(np.float32)
    outs = rknn.inference([x], data_format="nchw")
    refs = _reference(x[0].astype(np.float64), params)
    assert [o.shape for o in outs] == [(1, 6, 4, 4), (1, 6, 8, 8)]
    for got, ref in zip(outs, refs):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda cfg: cfg.replace("[maxpool]\nsize=2\nstride=2", "[local]\nsize=2"),
     "[local] is not supported"),
    (lambda cfg: cfg.replace("activation=leaky", "activation=swish", 1), "activation 'swish'"),
    (lambda cfg: cfg.replace("layers = -3", "layers = -30"), "out of range"),
    (lambda cfg: cfg.replace("[net]", "[netty]"), "the first section must be [net]"),
])  # fmt: skip
def test_darknet_errors(tmp_path, edit, message) -> None:
    _files(tmp_path)
    (tmp_path / "net.cfg").write_text(edit(CFG))
    rknn = RKNN()
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == -1
    assert message in rknn.last_error


def test_darknet_weights_must_match(tmp_path) -> None:
    _files(tmp_path)
    data = (tmp_path / "net.weights").read_bytes()
    rknn = RKNN()
    (tmp_path / "net.weights").write_bytes(data[:-8])
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == -1
    assert "the weights end early" in rknn.last_error
    (tmp_path / "net.weights").write_bytes(data + b"\0" * 8)
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == -1
    assert "8 bytes left over" in rknn.last_error


@pytest.mark.parametrize("quantise", [False, True])
def test_float16_and_int8_builds_match_the_reference(tmp_path, quantise) -> None:
    """The outputs of the yolo layers are graph outputs whose type the build changes: the
    build used to fail with onnxruntime's 'Type (tensor(float)) of output arg ... does not
    match expected type' text."""
    params = _files(tmp_path)
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1])
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == 0
    rng = np.random.RandomState(2)
    data = [rng.rand(1, 3, 8, 8).astype(np.float32) for _ in range(4)]
    assert rknn.build(do_quantization=quantise, dataset=data if quantise else None) == 0, \
        rknn.last_error  # fmt: skip
    assert rknn.init_runtime() == 0
    x = rng.rand(1, 3, 8, 8).astype(np.float32)
    outs = rknn.inference([x], data_format="nchw")
    for got, ref in zip(outs, _reference(x[0].astype(np.float64), params)):
        if quantise:
            assert cosine(got, ref) > 0.99
        else:
            np.testing.assert_allclose(got, ref, rtol=2e-2, atol=5e-2)


def test_an_engine_failure_is_one_line_in_rknnrts_words(tmp_path, capsys, monkeypatch) -> None:
    import onnxruntime as ort

    from rknnrt.toolkit import lower

    raw = ("[ONNXRuntimeError] : 1 : FAIL : Type Error: Type (tensor(float)) of output arg "
           "(convolutional_105) of node () does not match expected type (tensor(int8)).")

    def fail(*args, **kwargs):
        raise ort.capi.onnxruntime_pybind11_state.Fail(raw)

    monkeypatch.setattr(lower, "_known_shapes", lambda model: {})
    monkeypatch.setattr(lower, "_run_for_shapes", fail)
    _files(tmp_path)
    rknn = RKNN()
    assert rknn.load_darknet(str(tmp_path / "net.cfg"), str(tmp_path / "net.weights")) == 0
    assert rknn.build(do_quantization=False) == -1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[ONNXRuntimeError]" not in err[0]
    assert err[0] == ("E build: cannot determine tensor shapes: tensor 'convolutional_105' is "
                      "computed as float but the graph declares it int8: the converted graph "
                      "is inconsistent (an rknnrt converter bug, please report it with the "
                      "model)")


def test_engine_words_shortens_other_engine_errors() -> None:
    from rknnrt.toolkit.errors import engine_words

    said = engine_words(RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : " + "x" * 500))
    assert said.startswith("onnxruntime rejected the converted graph (INVALID_GRAPH): xxx")
    assert said.endswith(" ...") and len(said) < 400
