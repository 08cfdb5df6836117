"""init_runtime / inference / eval_perf / eval_memory / get_sdk_version / list_devices /
load_rknn / codegen / reg_custom_op on rknnrt's own runtime, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.model import container
from rknnrt.toolkit import RKNN

from .models import run_onnx, tiny_cnn, two_input_model, write_images


@pytest.fixture
def built() -> RKNN:
    rknn = RKNN()
    assert rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255],
                       float_dtype="float32") == 0  # fmt: skip
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.build(do_quantization=False) == 0
    return rknn


def _reference(image_nhwc: np.ndarray) -> np.ndarray:
    x = image_nhwc.astype(np.float64).transpose(0, 3, 1, 2) / 255.0
    return run_onnx(tiny_cnn(), {"images": x})[0]


def test_inference_input_rules(built: RKNN, capsys) -> None:
    assert built.inference([np.zeros((1, 16, 16, 3), np.uint8)]) is None  # before init
    assert "E inference: the runtime is not initialised" in capsys.readouterr().err
    assert built.init_runtime() == 0
    image = np.random.RandomState(0).randint(0, 256, (1, 16, 16, 3)).astype(np.uint8)
    expected = _reference(image)
    cases = {
        "nhwc uint8": ([image], None),
        "nchw": ([image.transpose(0, 3, 1, 2).copy()], "nchw"),
        "nchw list": ([image.transpose(0, 3, 1, 2).copy()], ["nchw"]),
        "3-D HWC": ([image[0]], None),
        "3-D CHW": ([image[0].transpose(2, 0, 1).copy()], "nchw"),
        "float64": ([image.astype(np.float64)], None),
        "float32": ([image.astype(np.float32)], None),
        "int32": ([image.astype(np.int32)], None),
        "one array": (image, None),
    }
    for name, (inputs, fmt) in cases.items():
        out = built.inference(inputs, data_format=fmt)
        assert out is not None, name
        assert out[0].dtype == np.float32 and out[0].shape == (1, 4, 16, 16), name
        np.testing.assert_allclose(out[0], expected, rtol=1e-4, atol=1e-4, err_msg=name)


def test_inference_errors_return_none(built: RKNN, capsys) -> None:
    assert built.init_runtime() == 0
    image = np.zeros((1, 16, 16, 3), np.uint8)
    assert built.inference([image, image]) is None
    assert "the model has 1 inputs, 2 were given" in capsys.readouterr().err
    assert built.inference([image], data_format="nc1hwc2") is None
    assert built.inference([np.array(["a"] * 768).reshape(1, 16, 16, 3)]) is None
    err = capsys.readouterr().err
    assert "data_format 'nc1hwc2'" in err and "not a number type" in err


def test_two_inputs_data_format_per_input() -> None:
    model = two_input_model()
    rknn = RKNN()
    assert rknn.config(float_dtype="float32") == 0
    assert rknn.load_onnx(model) == 0 and rknn.build(do_quantization=False) == 0
    assert rknn.init_runtime() == 0
    rng = np.random.RandomState(1)
    img, vec = rng.rand(1, 3, 8, 8).astype(np.float32), rng.rand(1, 4).astype(np.float32)
    (out,) = rknn.inference([img, vec], data_format=["nchw", None])
    np.testing.assert_allclose(out, run_onnx(model, {"img": img, "vec": vec})[0], rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_named_target_is_simulated_with_one_info_line(built: RKNN, capsys) -> None:
    assert built.init_runtime(target="RK3588") == 0
    err = capsys.readouterr().err
    assert err.count("I no rk3588 board is attached") == 1
    assert built.init_runtime(target="rk9999") == -1
    assert "target 'rk9999' is not one of" in built.last_error


def test_eval_perf_memory_sdk_devices(built: RKNN, capsys) -> None:
    assert built.eval_perf() is None  # no runtime yet
    capsys.readouterr()
    assert built.init_runtime(perf_debug=True, eval_mem=True) == 0
    report = built.eval_perf(is_print=True)
    printed = capsys.readouterr().out
    assert report in printed + "\n" and "Conv" in report and "Total time of one run" in report
    memory = built.eval_memory(is_print=False)
    assert memory["total_weight_allocation"] > 0
    assert memory["total_model_allocation"] == (memory["total_weight_allocation"]
                                                + memory["total_internal_allocation"])
    assert "API: 2.5.0" in built.get_sdk_version()
    assert built.list_devices() == ([], [])


def test_export_load_rknn_init_inference(built: RKNN, tmp_path) -> None:
    path = tmp_path / "m.rknnrt"
    assert built.export_rknn(path) == 0
    loaded = RKNN()
    assert loaded.load_rknn(str(path)) == 0
    assert loaded.init_runtime() == 0
    image = np.random.RandomState(2).randint(0, 256, (1, 16, 16, 3)).astype(np.uint8)
    np.testing.assert_allclose(loaded.inference([image])[0], _reference(image), rtol=1e-4,
                               atol=1e-4)  # fmt: skip
    assert loaded.accuracy_analysis([image]) == -1  # needs the build of this session
    assert "built in this session" in loaded.last_error
    assert RKNN().load_rknn(str(tmp_path / "missing.rknnrt")) == -1
    lite = RKNNLite()
    assert lite.load_rknn(str(path)) == 0 and lite.init_runtime() == 0
    np.testing.assert_array_equal(lite.inference([image])[0], loaded.inference([image])[0])
    loaded.release()
    assert loaded.inference([image]) is None


def test_codegen_writes_a_c_program(built: RKNN, tmp_path) -> None:
    x = np.random.RandomState(0).rand(1, 16, 16, 3).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "demo"
    assert built.codegen(str(out), inputs=[str(tmp_path / "x.npy")]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["CMakeLists.txt", "input0.raw", "main.c",
                                                     "tiny_cnn.rknnrt"]  # fmt: skip
    np.testing.assert_array_equal(np.fromfile(out / "input0.raw", np.float32), x.ravel())
    assert (out / "tiny_cnn.rknnrt").read_bytes() == built.model_bytes()
    assert "rknn_init(&ctx" in (out / "main.c").read_text()
    assert built.codegen(str(out)) == -1  # exists, no overwrite
    assert built.codegen(str(out), overwrite=True) == 0
    two = [str(tmp_path / "x.npy")] * 2  # the model has one input
    assert built.codegen(str(tmp_path / "two"), inputs=two) == -1
    assert "2 input files for a model with 1 inputs" in built.last_error


def test_codegen_takes_an_image_as_the_vendors_example_does(built: RKNN, tmp_path) -> None:
    pytest.importorskip("PIL", reason="reading images needs Pillow (the images extra)")
    image = np.random.RandomState(1).randint(0, 256, (20, 24, 3)).astype(np.uint8)
    (path,) = write_images(str(tmp_path), [image])
    assert built.codegen(str(tmp_path / "demo"), inputs=[path]) == 0, built.last_error
    raw = np.fromfile(tmp_path / "demo" / "input0.raw", np.float32)
    from PIL import Image

    resized = np.asarray(Image.fromarray(image).resize((16, 16), Image.BILINEAR), np.float32)
    np.testing.assert_array_equal(raw, resized.ravel())  # NHWC RGB at the input's size


class CustomSoftplus:
    op_type = "cstSoftplus"

    def shape_infer(self, node, in_shapes, in_dtypes):
        return in_shapes, in_dtypes

    def compute(self, node, inputs):
        return [np.log1p(np.exp(inputs[0]))]


def test_reg_custom_op_takes_a_class_or_an_instance_and_build_keeps_the_node(capsys) -> None:
    from onnx import TensorProto, helper

    from rknnrt.model import custom_ops as stored

    graph = helper.make_graph(
        [helper.make_node("cstSoftplus", ["x"], ["y"], name="sp", domain="rknn.custom")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("rknn.custom", 1)])
    for registered in (CustomSoftplus, CustomSoftplus()):  # the vendor's docs pass a class
        rknn = RKNN()
        assert rknn.reg_custom_op(registered) == 0, rknn.last_error
        assert rknn.load_onnx(model) == 0, rknn.last_error
        assert rknn.build(do_quantization=False) == 0, rknn.last_error
        kept = onnx.load_model_from_string(bytes(container.read(
            memoryview(rknn.model_bytes())).graph))  # fmt: skip
        customs = [n.op_type for n in kept.graph.node if n.domain == stored.CUSTOM_DOMAIN]
        assert customs == ["cstSoftplus"]
    assert RKNN().reg_custom_op(object) == -1


def test_runtime_failures_print_one_line(built: RKNN, tmp_path, capsys) -> None:
    assert built.init_runtime() == 0
    capsys.readouterr()
    assert built.inference([np.zeros((1, 9, 9, 3), np.float32)]) is None  # wrong shape
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if line.startswith("E ")]) == 1
    assert "inference failed" in built.last_error
    (tmp_path / "broken.rknnrt").write_bytes(built.model_bytes()[:100])
    broken = RKNN()
    assert broken.load_rknn(str(tmp_path / "broken.rknnrt")) == 0
    assert broken.init_runtime() == -1
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if line.startswith("E ")]) == 1
    assert "E RKNN:" in err
