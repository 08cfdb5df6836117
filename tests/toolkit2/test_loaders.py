"""load_pytorch / load_tflite / load_tensorflow / load_caffe / load_darknet, and old ONNX
opsets upgraded by the converter."""

from __future__ import annotations

import builtins
import io
import sys
import types

import numpy as np
import onnx
import pytest

from rknnrt.toolkit import RKNN

from .models import Graph, run_onnx, tiny_cnn


@pytest.mark.parametrize(("call", "module", "extra"), [
    (lambda r, p: r.load_pytorch(p, [[1, 3, 8, 8]]), "torch", "pytorch"),
    (lambda r, p: r.load_tflite(p), "tf2onnx", "tensorflow"),
    (lambda r, p: r.load_tensorflow(p, ["x"], [[1, 8, 8, 3]], ["y"]), "tf2onnx", "tensorflow"),
])  # fmt: skip
def test_missing_extra_names_the_pip_install(tmp_path, monkeypatch, capsys, call, module,
                                             extra) -> None:  # fmt: skip
    real_import = builtins.__import__

    def no_module(name, *args, **kwargs):
        if name.split(".")[0] == module:
            raise ImportError(f"No module named '{module}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_module)
    monkeypatch.delitem(sys.modules, module, raising=False)
    path = tmp_path / "model.bin"
    path.write_bytes(b"x")
    rknn = RKNN()
    assert call(rknn, str(path)) == -1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pip install 'rknnrt[{extra}]'" in err[0]


class _FakeTorch(types.ModuleType):
    """Just enough of torch for the TorchScript -> ONNX glue: jit.load, zeros, no_grad and an
    onnx.export that writes a known ONNX model and records how it was called."""

    def __init__(self, exported: onnx.ModelProto) -> None:
        super().__init__("torch")
        self.calls: list[dict] = []
        self.float32 = "float32"
        fake = self

        class _NoGrad:
            def __enter__(self):
                return None

            def __exit__(self, *exc):
                return False

        class _Module:
            def eval(self):
                fake.calls.append({"eval": True})

        def export(module, args, f, input_names=None, opset_version=None, dynamo=None):
            fake.calls.append({"shapes": [a.shape for a in args], "names": input_names,
                               "opset": opset_version, "dynamo": dynamo})
            f.write(exported.SerializeToString())

        self.no_grad = _NoGrad
        self.zeros = lambda size, dtype=None: np.zeros(size, np.float32)
        self.jit = types.SimpleNamespace(load=lambda path, map_location=None: _Module())
        self.onnx = types.SimpleNamespace(export=export)


def test_torchscript_glue_with_a_fake_torch(tmp_path, monkeypatch) -> None:
    exported = tiny_cnn()
    fake = _FakeTorch(exported)
    monkeypatch.setitem(sys.modules, "torch", fake)
    path = tmp_path / "model.pt"
    path.write_bytes(b"torchscript")
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_pytorch(str(path), input_size_list=[[1, 3, 16, 16]]) == 0, rknn.last_error
    assert fake.calls[0] == {"eval": True}
    assert fake.calls[1] == {"shapes": [(1, 3, 16, 16)], "names": ["input0"], "opset": 13,
                             "dynamo": False}  # fmt: skip
    assert rknn.build(do_quantization=False) == 0 and rknn.init_runtime() == 0
    x = np.random.RandomState(0).rand(1, 3, 16, 16).astype(np.float32)
    np.testing.assert_allclose(rknn.inference([x], data_format="nchw")[0],
                               run_onnx(exported, {"images": x})[0], rtol=1e-5, atol=1e-5)
    assert rknn.load_pytorch(str(path), input_size_list=None) == -1
    assert "needs input_size_list" in rknn.last_error
    assert rknn.load_pytorch(str(tmp_path / "missing.pt"), [[1, 3, 16, 16]]) == -1
    assert "no such file" in rknn.last_error


@pytest.mark.slow
def test_load_pytorch_with_real_torch(tmp_path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (the pytorch extra)")
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 4, 1), torch.nn.Upsample(scale_factor=2))
    torch.jit.trace(net.eval(), torch.zeros(1, 3, 8, 8)).save(str(tmp_path / "net.pt"))
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_pytorch(str(tmp_path / "net.pt"), [[1, 3, 8, 8]]) == 0, rknn.last_error
    assert rknn.build(do_quantization=False) == 0 and rknn.init_runtime() == 0
    x = np.random.RandomState(0).rand(1, 3, 8, 8).astype(np.float32)
    expected = net(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(rknn.inference([x], data_format="nchw")[0], expected,
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    (tmp_path / "bad.pt").write_bytes(b"not torchscript")
    assert rknn.load_pytorch(str(tmp_path / "bad.pt"), [[1, 3, 8, 8]]) == -1
    assert "is not a TorchScript model" in rknn.last_error


def test_caffe_and_darknet_name_unreadable_and_missing_files(tmp_path) -> None:
    rknn = RKNN()
    for name in ("m.prototxt", "m.caffemodel", "m.cfg", "m.weights"):
        (tmp_path / name).write_text("x")
    assert rknn.load_caffe(str(tmp_path / "m.prototxt"), str(tmp_path / "m.caffemodel")) == -1
    assert "m.prototxt: not a Caffe prototxt" in rknn.last_error
    assert rknn.load_caffe(str(tmp_path / "no.prototxt"), str(tmp_path / "m.caffemodel")) == -1
    assert "cannot read Caffe prototxt" in rknn.last_error and "no.prototxt" in rknn.last_error
    assert rknn.load_darknet(str(tmp_path / "no.cfg"), str(tmp_path / "m.weights")) == -1
    assert "cannot read Darknet files" in rknn.last_error and "no.cfg" in rknn.last_error


def test_old_opset_is_upgraded(capsys) -> None:
    g = Graph(4)
    x = g.node("Relu", [g.conv("x", "c1", 3, 4)], "r1")
    g.node("Upsample", [x, g.const("sc", np.array([1, 1, 2, 2], np.float32))], "y",
           mode="nearest")  # fmt: skip
    model = g.model([("x", [1, 3, 4, 4])], ["y"], opset=9)
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_onnx(model) == 0, rknn.last_error
    assert "upgraded the model from ONNX opset 9 to 13" in capsys.readouterr().err
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    inp = np.random.RandomState(0).rand(1, 3, 4, 4).astype(np.float32)
    np.testing.assert_allclose(rknn.inference([inp], data_format="nchw")[0],
                               run_onnx(model, {"x": inp})[0], rtol=1e-5, atol=1e-6)


def test_load_onnx_accepts_bytes() -> None:
    """load_onnx takes a path (vendor), bytes or a ModelProto (rknnrt extensions)."""
    blob = io.BytesIO(tiny_cnn().SerializeToString()).getvalue()
    rknn = RKNN()
    assert rknn.load_onnx(blob) == 0
    assert rknn.load_onnx(b"garbage") == -1 and "cannot read ONNX model" in rknn.last_error


def test_tensorflow_nhwc_inputs_become_nchw() -> None:
    """What load_tflite/load_tensorflow do to tf2onnx's graph unless input_is_nchw=True."""
    from rknnrt.toolkit.loaders import tensorflow

    def nhwc_model():
        g = Graph(5)
        t = g.node("Transpose", ["x"], "t", perm=[0, 3, 1, 2])  # as tf2onnx's graphs start
        g.node("Relu", [g.conv(t, "c", 3, 4)], "y")
        return g.model([("x", [1, 8, 6, 3])], ["y"])

    wrapped = tensorflow.inputs_as_nchw(nhwc_model())
    dims = [d.dim_value for d in wrapped.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 8, 6]
    # the inserted Transpose and tf2onnx's Transpose(0,3,1,2) cancel: the Conv reads the input
    assert [n.op_type for n in wrapped.graph.node] == ["Conv", "Relu"]
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1], float_dtype="float32")
    assert rknn.load_onnx(wrapped) == 0 and rknn.build(do_quantization=False) == 0
    assert rknn.init_runtime() == 0
    nhwc = np.random.RandomState(3).rand(1, 8, 6, 3).astype(np.float32)
    expected = run_onnx(nhwc_model(), {"x": nhwc})[0]
    np.testing.assert_allclose(rknn.inference([nhwc])[0], expected, rtol=1e-5, atol=1e-5)
