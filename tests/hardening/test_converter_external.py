"""Issue 11 item 2: the converter reads external data only from inside a model's own folder,
and never for a model given as bytes or a ModelProto (which have no folder)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.model import container
from rknnrt.model.meta import ModelMeta
from rknnrt.toolkit import RKNN

WEIGHT = np.arange(1, 9, dtype=np.float32).reshape(1, 8)


def _model(location: str) -> onnx.ModelProto:
    """y = x * w with w stored externally at `location`."""
    w = numpy_helper.from_array(np.zeros_like(WEIGHT), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "32")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [w],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _build(source) -> tuple[int, str, RKNN]:
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    status = rknn.load_onnx(source)
    if status == 0:
        status = rknn.build(do_quantization=False)
    return status, rknn.last_error or "", rknn


@pytest.fixture
def secret_cwd(tmp_path, monkeypatch):
    """A working directory holding the file the model names (which must never be read)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "w.bin").write_bytes((WEIGHT * 1000).tobytes())
    monkeypatch.chdir(cwd)
    return cwd


def test_bytes_and_modelproto_never_read_the_working_directory(secret_cwd) -> None:
    model = _model("w.bin")
    for source in (model, model.SerializeToString()):
        status, error, _ = _build(source)
        assert status == -1
        assert "tensor 'w'" in error and "external data" in error


def test_path_resolves_inside_the_model_folder(secret_cwd, tmp_path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(WEIGHT.tobytes())
    onnx.save(_model("w.bin"), folder / "m.onnx")
    status, error, rknn = _build(str(folder / "m.onnx"))
    assert status == 0, error
    blob = rknn.model_bytes()
    sections = container.read(memoryview(blob))
    meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    (spec,) = meta.weights
    stored = np.frombuffer(sections.weights, np.float32, 8, spec.offset)
    np.testing.assert_array_equal(stored, WEIGHT.ravel())  # the folder's file, not the cwd's


@pytest.mark.parametrize(
    "location", ["../cwd/w.bin", "{cwd}/w.bin", "link.bin", "sub/../../cwd/w.bin"]
)
def test_path_never_leaves_the_model_folder(secret_cwd, tmp_path, location) -> None:
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    os.symlink(secret_cwd / "w.bin", folder / "link.bin")  # a symlink that leaves the folder
    onnx.save(_model(location.format(cwd=secret_cwd)), folder / "m.onnx")
    status, error, _ = _build(str(folder / "m.onnx"))
    assert status == -1
    assert "tensor 'w'" in error and "outside the model's folder" in error


def test_external_data_past_the_file_end_is_refused(tmp_path) -> None:
    (tmp_path / "w.bin").write_bytes(WEIGHT.tobytes()[:16])
    onnx.save(_model("w.bin"), tmp_path / "m.onnx")
    status, error, _ = _build(str(tmp_path / "m.onnx"))
    assert status == -1 and "lies outside 'w.bin'" in error
