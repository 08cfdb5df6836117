"""The general, zero-copy, threaded and asynchronous API from C, compared with the Python API
on the same model and the same input bytes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import rknnrt as rk


def python_general(model: bytes, buf: np.ndarray, type_: int, fmt: int) -> np.ndarray:
    """The same inference through the Python C-shaped API."""
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, model, len(model), 0, None) == 0
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size = buf.ctypes.data, buf.nbytes
    inputs[0].type, inputs[0].fmt = type_, fmt
    assert rk.rknn_inputs_set(ctx, 1, inputs) == 0
    assert rk.rknn_run(ctx, None) == 0
    outputs = (rk.rknn_output * 1)()
    outputs[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, outputs, None) == 0
    result = np.ctypeslib.as_array(
        ctypes.cast(outputs[0].buf, ctypes.POINTER(ctypes.c_float)), (outputs[0].size // 4,)
    ).copy()
    assert rk.rknn_outputs_release(ctx, 1, outputs) == 0
    assert rk.rknn_destroy(ctx) == 0
    return result


def python_attr(model: bytes, cmd: int, index: int = 0) -> rk.rknn_tensor_attr:
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, model, len(model), 0, None) == 0
    attr = rk.rknn_tensor_attr()
    attr.index = index
    assert rk.rknn_query(ctx, cmd, attr, ctypes.sizeof(attr)) == 0
    assert rk.rknn_destroy(ctx) == 0
    return attr


def test_general_api_every_input_type_and_format(programs, files, floats, default_model_bytes):
    done = programs.run("general_api.c", files["model"], files["image"])
    assert "ALL OK" in done.stdout
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["io"] == "1 1"
    a = python_attr(default_model_bytes, rk.RKNN_QUERY_INPUT_ATTR)
    assert lines["input"] == (
        f"{a.name.decode()} n_dims={a.n_dims} dims={','.join(map(str, a.dims[:4]))} "
        f"fmt={rk.get_format_string(a.fmt)} type={rk.get_type_string(a.type)} "
        f"qnt={rk.get_qnt_type_string(a.qnt_type)} size={a.size}"
    )
    assert a.dims[:4] == [1, 64, 64, 3] and a.name == b"images"
    assert lines["custom_string"] == "RGB"
    assert lines["api_version"].startswith("2.5.0")
    # two E lines, one per refused rknn_inputs_set, nothing else
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 2 and all("rknn_inputs_set" in e for e in errors), done.stderr
    got = floats(done.stdout)
    image = np.fromfile(files["image"], np.uint8).reshape(1, 64, 64, 3)
    nchw = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
    cases = {
        "uint8_nhwc": (image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC),
        "uint8_nchw": (nchw, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NCHW),
        "float32_nhwc": (image.astype(np.float32), rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC),
        "float32_nchw": (nchw.astype(np.float32), rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW),
        "float16_nhwc": (image.astype(np.float16), rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_NHWC),
        "float16_nchw": (nchw.astype(np.float16), rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_NCHW),
    }
    for label, (buf, type_, fmt) in cases.items():
        expected = python_general(default_model_bytes, np.ascontiguousarray(buf), type_, fmt)
        np.testing.assert_array_equal(got[label], expected, err_msg=label)
    np.testing.assert_array_equal(got["prealloc"], got["uint8_nhwc"])
    assert abs(float(got["uint8_nhwc"].sum()) - 1.0) < 1e-5  # a softmax


def image_of(files) -> np.ndarray:
    return np.fromfile(files["image"], np.uint8).reshape(1, 64, 64, 3)


def python_uint8(model: bytes, files) -> np.ndarray:
    return python_general(model, image_of(files), rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)


def test_zero_copy_native_layouts_and_fd(programs, files, floats, default_model_bytes):
    done = programs.run("zero_copy.c", files["model"], files["image"])
    assert "ALL OK" in done.stdout
    assert "E RKNN:" not in done.stderr
    got = floats(done.stdout)
    expected = python_uint8(default_model_bytes, files)
    np.testing.assert_array_equal(got["zero_copy"], expected)
    np.testing.assert_array_equal(got["zero_copy_again"], expected)


def test_three_init_flag_examples(programs, files, floats, default_model_bytes):
    done = programs.run(
        "init_flags.c", files["model"], files["second"], files["weightless"], files["image"]
    )
    assert "ALL OK" in done.stdout, done.stderr
    assert "E RKNN:" not in done.stderr
    got = floats(done.stdout)
    expected = python_uint8(default_model_bytes, files)
    np.testing.assert_array_equal(got["series_a"], expected)
    np.testing.assert_array_equal(
        got["series_b"], python_uint8(files["second"].read_bytes(), files)
    )
    np.testing.assert_array_equal(got["donor"], expected)
    np.testing.assert_array_equal(got["weightless"], expected)
    # in-place weights run through other onnxruntime kernels: equal up to float rounding
    np.testing.assert_allclose(got["zero_copy_model"], expected, rtol=1e-6, atol=1e-7)


@pytest.mark.slow  # a C host process; tests/device/test_threads.py is the fast check
def test_dup_context_in_four_threads(programs, files, floats, default_model_bytes):
    done = programs.run("threads.c", files["model"], files["image"], 4, 3, RKNNRT_NUM_THREADS="1")
    assert "identical 1" in done.stdout and "ALL OK" in done.stdout
    np.testing.assert_array_equal(
        floats(done.stdout)["single"], python_uint8(default_model_bytes, files)
    )


@pytest.mark.slow  # a C host process; tests/device/test_async_runs.py is fast
def test_non_blocking_run_wait_and_async_mask(programs, files, floats, default_model_bytes):
    done = programs.run("async.c", files["model"], files["image"])
    assert "ALL OK" in done.stdout, done.stderr
    got = floats(done.stdout)
    expected = python_uint8(default_model_bytes, files)
    for label in ("blocking", "non_block", "async_1", "async_2"):
        np.testing.assert_array_equal(got[label], expected, err_msg=label)
    # The same call sequence through the Python API gives the same frame ids.
    ctx = rk.rknn_context()
    model = default_model_bytes
    assert rk.rknn_init(ctx, model, len(model), rk.RKNN_FLAG_ASYNC_MASK, None) == 0
    image = image_of(files)
    frames = []
    for _ in range(3):
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size = image.ctypes.data, image.nbytes
        inputs[0].type, inputs[0].fmt = rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
        outputs, ext = (rk.rknn_output * 1)(), rk.rknn_output_extend()
        outputs[0].want_float = 1
        assert rk.rknn_outputs_get(ctx, 1, outputs, ext) == 0
        frames.append(ext.frame_id)
        assert rk.rknn_outputs_release(ctx, 1, outputs) == 0
    assert rk.rknn_destroy(ctx) == 0
    printed = [int(got[f"async_frame_{i}"][0]) for i in range(3)]
    assert printed == frames


def conv4d_float16(convert) -> bytes:
    """A float16 model: a 3x3 conv from a [1, 3, 16, 16] input to 20 channels (C2 = 8 pads
    them to 24 in NC1HWC2), inputs scaled by 1/255."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(3)
    conv = helper.make_node(
        "Conv", ["images", "w", "b"], ["out"], kernel_shape=[3, 3], pads=[1] * 4
    )
    graph = helper.make_graph(
        [conv],
        "conv4d",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 20, 16, 16])],
        [numpy_helper.from_array(rng.randn(20, 3, 3, 3).astype(np.float32), "w"),
         numpy_helper.from_array(rng.randn(20).astype(np.float32), "b")],
    )  # fmt: skip
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return convert(onnx_model, mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]],
                   float_dtype="float16")  # fmt: skip


@pytest.mark.slow  # a model conversion and a C host process
def test_native_output_layouts_and_pass_through(programs, convert, tmp_path, floats):
    """A float16 model with a 4-D output of 20 channels (C2 = 8 pads it to 24): NC1HWC2 and
    NHWC float16 outputs, unpacked in C, and NCHW float32 all equal the Python general API."""
    model = conv4d_float16(convert)
    image = np.random.default_rng(4).integers(0, 256, (1, 16, 16, 3), np.uint8)
    (tmp_path / "conv.rknnrt").write_bytes(model)
    (tmp_path / "image.u8").write_bytes(image.tobytes())
    done = programs.run("native_layouts.c", tmp_path / "conv.rknnrt", tmp_path / "image.u8")
    assert "ALL OK" in done.stdout and "E RKNN:" not in done.stderr, done.stderr
    assert "nc1hwc2_attr fmt=NC1HWC2 type=FP16 n_dims=5" in done.stdout
    assert "nhwc_attr fmt=NHWC type=FP16 n_dims=4" in done.stdout
    got = floats(done.stdout)
    expected = python_general(model, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert expected.size == 20 * 16 * 16
    for label in ("nc1hwc2", "nhwc", "nchw_f32"):
        np.testing.assert_array_equal(got[label], expected, err_msg=label)
    # pass_through: C normalised (x / 255) and rounded to float16 itself
    np.testing.assert_allclose(got["pass_through"], expected, rtol=2e-3, atol=2e-3)


@pytest.mark.slow  # an int8 conversion and a C host process
def test_int8_model_input_types(programs, files, floats, default_onnx, tmp_path):
    from rknnrt.toolkit import RKNN
    from rknnrt.toolkit.samples import default_input
    from tests.conftest import DEFAULT_MEAN, DEFAULT_STD

    rknn = RKNN()
    assert rknn.config(target_platform="rk3588", mean_values=[DEFAULT_MEAN],
                       std_values=[DEFAULT_STD]) == 0  # fmt: skip
    assert rknn.load_onnx(default_onnx) == 0
    calibration = [[default_input(seed=s).transpose(0, 3, 1, 2).astype(np.float32)]
                   for s in range(4)]  # fmt: skip
    assert rknn.build(do_quantization=True, dataset=calibration) == 0, rknn.last_error
    model = rknn.model_bytes()
    (tmp_path / "int8.rknnrt").write_bytes(model)
    done = programs.run("int8_inputs.c", tmp_path / "int8.rknnrt", files["image"])
    assert "ALL OK" in done.stdout and "E RKNN:" not in done.stderr, done.stderr
    assert "input type=INT8 qnt=AFFINE" in done.stdout
    got = floats(done.stdout)
    image = image_of(files)
    nchw = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
    cases = {
        "uint8_nhwc": (image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC),
        "uint8_nchw": (nchw, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NCHW),
        "int8_nhwc": ((image // 2).astype(np.int8), rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_NHWC),
        "float32_nchw": (nchw.astype(np.float32), rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW),
    }
    for label, (buf, type_, fmt) in cases.items():
        expected = python_general(model, np.ascontiguousarray(buf), type_, fmt)
        np.testing.assert_array_equal(got[label], expected, err_msg=label)
    # the last run's output in the model's own type, converted in C, is the float32 one
    np.testing.assert_array_equal(got["own_type_output"], got["float32_nchw"])
    # pass_through quantised in C: the same up to one quantisation step of a few inputs
    np.testing.assert_allclose(got["pass_through"], got["uint8_nhwc"], atol=0.02)


@pytest.mark.slow  # tests/memory/test_init_flags.py is the fast check
def test_perf_detail_without_collect_perf_is_an_empty_success(programs, files):
    """What the custom-op demos do: query PERF_DETAIL on a plain context (a board answers
    success with no detail, airockchip/rknn-toolkit2#437), then on one with the flag."""
    done = programs.run("perf_detail.c", files["model"], files["image"])
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["plain_before_run"] == "len=0 table=0"
    assert lines["plain_after_run"] == "len=0 table=0"
    length, table = lines["perf_after_run"].split()
    assert table == "table=1" and int(length.removeprefix("len=")) > 200
    assert "E RKNN" not in done.stderr
