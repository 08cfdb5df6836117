"""The general (copying) API end to end on the bundled default model (facts §4.1, §5.2, §5.3).

init -> query -> inputs_set -> run -> outputs_get -> outputs_release -> destroy, with the
outputs compared against onnxruntime on the original ONNX model fed (x - mean) / std.
"""

from __future__ import annotations

import ctypes
import pathlib
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.toolkit.samples import default_input

RTOL, ATOL = 1e-4, 1e-5
N_ELEMS = 1 * 64 * 64 * 3
ITEMSIZE = {rk.RKNN_TENSOR_FLOAT32: 4, rk.RKNN_TENSOR_FLOAT16: 2, rk.RKNN_TENSOR_UINT8: 1}
NP_TYPE = {
    rk.RKNN_TENSOR_FLOAT32: np.float32,
    rk.RKNN_TENSOR_FLOAT16: np.float16,
    rk.RKNN_TENSOR_UINT8: np.uint8,
    rk.RKNN_TENSOR_INT8: np.int8,
}
INPUT_SIZE_RE = re.compile(r"param input size\((\d+)\) < model input size\((\d+)\)")


# ---- helpers --------------------------------------------------------------------------------
def query_attr(capi, context, cmd: int, index: int = 0) -> rk.rknn_tensor_attr:
    attr = rk.rknn_tensor_attr()
    attr.index = index
    assert capi(rk.rknn_query, context, cmd, attr, ctypes.sizeof(attr)) == rk.RKNN_SUCC
    return attr


def make_input(buf: np.ndarray, type_: int, fmt: int, pass_through: int = 0, size=None):
    inp = rk.rknn_input()
    inp.index = 0
    inp.buf = buf.ctypes.data
    inp.size = buf.nbytes if size is None else size
    inp.pass_through = pass_through
    inp.type = type_
    inp.fmt = fmt
    return inp


def as_buffer(nhwc: np.ndarray, type_: int, fmt: int) -> np.ndarray:
    data = nhwc.astype(NP_TYPE[type_])
    if fmt == rk.RKNN_TENSOR_NCHW:
        data = data.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(data)


def set_run_get(capi, context, buf: np.ndarray, type_: int, fmt: int, **kw) -> np.ndarray:
    """inputs_set + run + outputs_get(want_float=1) + outputs_release; a copy of output 0."""
    inp = make_input(buf, type_, fmt, **kw)
    assert capi(rk.rknn_inputs_set, context, 1, inp) == rk.RKNN_SUCC
    return run_get(capi, context)


def run_get(capi, context) -> np.ndarray:
    assert capi(rk.rknn_run, context, None) == rk.RKNN_SUCC
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert capi(rk.rknn_outputs_get, context, 1, outs, None) == rk.RKNN_SUCC
    assert outs[0].size == 40
    result = read_f32(outs[0].buf, outs[0].size).reshape(1, 10).copy()
    assert capi(rk.rknn_outputs_release, context, 1, outs) == rk.RKNN_SUCC
    return result


def read_f32(address: int, size: int) -> np.ndarray:
    assert address, "NULL output buffer"
    return np.frombuffer((ctypes.c_char * size).from_address(address), np.float32)


def float_image(seed: int = 1) -> np.ndarray:
    """An NHWC float32 image with fractional values in [0, 256)."""
    rng = np.random.RandomState(seed)
    return rng.uniform(0.0, 255.99, size=(1, 64, 64, 3)).astype(np.float32)


# ---- the full sequence ----------------------------------------------------------------------
def test_full_sequence(capi, default_model_bytes, reference, rknn_log):
    ctx = rk.rknn_context()
    assert capi(rk.rknn_init, ctx, default_model_bytes, len(default_model_bytes), 0, None) == 0
    assert ctx.value != 0

    io_num = rk.rknn_input_output_num()
    assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_IN_OUT_NUM, io_num, ctypes.sizeof(io_num)) == 0
    assert (io_num.n_input, io_num.n_output) == (1, 1)

    in_attr = query_attr(capi, ctx, rk.RKNN_QUERY_INPUT_ATTR)
    out_attr = query_attr(capi, ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
    assert in_attr.name == b"images" and out_attr.name == b"probs"

    sdk = rk.rknn_sdk_version()
    assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_SDK_VERSION, sdk, ctypes.sizeof(sdk)) == 0
    assert re.fullmatch(rb"\d+\.\d+\.\d+\S* \(.+\)", sdk.api_version), sdk.api_version
    assert re.fullmatch(rb"\d+\.\d+\.\d+", sdk.drv_version), sdk.drv_version

    mem = rk.rknn_mem_size()
    assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_MEM_SIZE, mem, ctypes.sizeof(mem)) == 0
    # 3802 float32 parameters once BatchNormalization is folded into the convolutions.
    assert mem.total_weight_size >= 3802 * 4
    # The largest intermediate tensor alone is [1,16,32,32] float32.
    assert mem.total_internal_size >= 16 * 32 * 32 * 4
    assert mem.total_dma_allocated_size >= mem.total_weight_size + mem.total_internal_size
    assert (mem.total_sram_size, mem.free_sram_size) == (0, 0)  # SRAM not enabled

    cs = rk.rknn_custom_string()
    assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_CUSTOM_STRING, cs, ctypes.sizeof(cs)) == 0
    assert cs.string == b"RGB"

    image = default_input()
    inp = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == 0

    expected = reference(image)
    for frame in (1, 2, 3):
        ext = rk.rknn_run_extend()
        assert capi(rk.rknn_run, ctx, ext) == 0
        assert ext.frame_id == frame

        perf = rk.rknn_perf_run()
        assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_PERF_RUN, perf, ctypes.sizeof(perf)) == 0
        assert 0 < perf.run_duration < 10_000_000

        outs = (rk.rknn_output * 1)()
        outs[0].want_float = 1
        out_ext = rk.rknn_output_extend()
        assert capi(rk.rknn_outputs_get, ctx, 1, outs, out_ext) == 0
        assert out_ext.frame_id == frame
        assert outs[0].size == out_attr.n_elems * 4 == 40
        got = read_f32(outs[0].buf, outs[0].size).reshape(1, 10)
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
        assert got.sum() == pytest.approx(1.0, abs=1e-5)  # softmax
        assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0

    assert capi(rk.rknn_destroy, ctx) == 0
    assert rknn_log.take("E") == [] and rknn_log.take("W") == []


# ---- attributes -----------------------------------------------------------------------------
def _assert_attr(attr, *, index, dims, name, fmt, type_, size, w_stride, size_with_stride):
    n_elems = int(np.prod(dims))
    assert attr.index == index
    assert attr.n_dims == len(dims)
    assert list(attr.dims) == list(dims) + [0] * (16 - len(dims))
    assert attr.name == name
    assert attr.n_elems == n_elems
    assert attr.size == size
    assert attr.fmt == fmt
    assert attr.type == type_
    assert attr.qnt_type == rk.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC
    assert (attr.zp, attr.scale, attr.fl) == (0, 1.0, 0)
    assert attr.w_stride == w_stride
    assert attr.size_with_stride == size_with_stride
    assert attr.pass_through == 0
    assert attr.h_stride == 0


def test_input_attr(capi, ctx):
    attr = query_attr(capi, ctx, rk.RKNN_QUERY_INPUT_ATTR)
    _assert_attr(
        attr,
        index=0,
        dims=[1, 64, 64, 3],
        name=b"images",
        fmt=rk.RKNN_TENSOR_NHWC,
        type_=rk.RKNN_TENSOR_FLOAT32,
        size=N_ELEMS * 4,
        w_stride=64,
        size_with_stride=N_ELEMS * 4,
    )


def test_output_attr_2d_is_undefined(capi, ctx):
    attr = query_attr(capi, ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
    _assert_attr(
        attr,
        index=0,
        dims=[1, 10],
        name=b"probs",
        fmt=rk.RKNN_TENSOR_UNDEFINED,
        type_=rk.RKNN_TENSOR_FLOAT32,
        size=40,
        w_stride=0,
        size_with_stride=40,
    )


@pytest.mark.parametrize(
    "cmd", [rk.RKNN_QUERY_NATIVE_INPUT_ATTR, rk.RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR]
)
def test_native_input_attr(capi, ctx, cmd):
    # 4-D, C = 3 -> NHWC natively; width 64 is already 16-aligned on rk3588 (facts §5.2).
    attr = query_attr(capi, ctx, cmd)
    _assert_attr(
        attr,
        index=0,
        dims=[1, 64, 64, 3],
        name=b"images",
        fmt=rk.RKNN_TENSOR_NHWC,
        type_=rk.RKNN_TENSOR_FLOAT32,
        size=N_ELEMS * 4,
        w_stride=64,
        size_with_stride=N_ELEMS * 4,
    )


@pytest.mark.parametrize(
    "cmd", [rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, rk.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR]
)
def test_native_output_attr_2d(capi, ctx, cmd):
    attr = query_attr(capi, ctx, cmd)
    _assert_attr(
        attr,
        index=0,
        dims=[1, 10],
        name=b"probs",
        fmt=rk.RKNN_TENSOR_UNDEFINED,
        type_=rk.RKNN_TENSOR_FLOAT32,
        size=40,
        w_stride=0,
        size_with_stride=40,
    )


def test_query_index_is_an_input_field(capi, ctx):
    """The caller's garbage in the other fields does not leak into the result."""
    attr = rk.rknn_tensor_attr()
    ctypes.memset(ctypes.addressof(attr), 0xAB, ctypes.sizeof(attr))
    attr.index = 0
    assert capi(rk.rknn_query, ctx, rk.RKNN_QUERY_INPUT_ATTR, attr, ctypes.sizeof(attr)) == 0
    assert list(attr.dims[4:]) == [0] * 12
    assert attr.name == b"images"
    assert (attr.pass_through, attr.h_stride) == (0, 0)


# ---- input conversions (facts §5.3) ---------------------------------------------------------
@pytest.mark.parametrize("fmt", [rk.RKNN_TENSOR_NHWC, rk.RKNN_TENSOR_NCHW], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize(
    "type_",
    [rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_UINT8],
    ids=["FLOAT32", "FLOAT16", "UINT8"],
)
def test_input_conversion_matrix(capi, ctx, reference, type_, fmt):
    image = default_input() if type_ == rk.RKNN_TENSOR_UINT8 else float_image()
    buf = as_buffer(image, type_, fmt)
    got = set_run_get(capi, ctx, buf, type_, fmt)
    # The reference sees exactly the values the buffer holds (fp16 rounding included).
    held = image.astype(NP_TYPE[type_]).astype(np.float32)
    assert type_ != rk.RKNN_TENSOR_FLOAT16 or not np.array_equal(held, image)
    expected = reference(held)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_uint8_equals_float32_of_the_same_integers(capi, ctx):
    image = default_input()
    u8 = set_run_get(capi, ctx, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    f32 = set_run_get(
        capi, ctx, image.astype(np.float32), rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC
    )
    np.testing.assert_array_equal(u8, f32)


def test_float16_is_within_fp16_rounding_of_float32(capi, ctx, reference):
    image = float_image(seed=7)
    f32 = set_run_get(capi, ctx, image, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC)
    f16 = set_run_get(
        capi, ctx, image.astype(np.float16), rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_NHWC
    )
    np.testing.assert_allclose(f16, reference(image.astype(np.float16)), rtol=RTOL, atol=ATOL)
    # fp16 keeps ~11 bits: inputs move by <= 0.125 of 255, which barely moves a softmax.
    np.testing.assert_allclose(f16, f32, rtol=0, atol=5e-3)
    assert not np.array_equal(f16, f32)


def test_nhwc_and_nchw_give_identical_results(capi, ctx):
    image = float_image(seed=3)
    nhwc = set_run_get(capi, ctx, image, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC)
    nchw = set_run_get(
        capi,
        ctx,
        np.ascontiguousarray(image.transpose(0, 3, 1, 2)),
        rk.RKNN_TENSOR_FLOAT32,
        rk.RKNN_TENSOR_NCHW,
    )
    np.testing.assert_array_equal(nhwc, nchw)


@pytest.mark.parametrize(
    ("type_", "np_type"),
    [
        (rk.RKNN_TENSOR_INT8, np.int8),
        (rk.RKNN_TENSOR_INT16, np.int16),
        (rk.RKNN_TENSOR_INT32, np.int32),
        (rk.RKNN_TENSOR_INT64, np.int64),
        (rk.RKNN_TENSOR_BOOL, np.bool_),
    ],
    ids=["INT8", "INT16", "INT32", "INT64", "BOOL"],
)
def test_buffer_type_not_accepted_for_float_input(capi, ctx, rknn_log, type_, np_type):
    """Float model inputs take uint8/float16/float32 buffers only (facts §5.3)."""
    buf = np.ascontiguousarray(default_input().astype(np_type))
    inp = make_input(buf, type_, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    assert len(rknn_log.take("E")) == 1
    # Nothing was set: a run still finds the input missing.
    assert capi(rk.rknn_run, ctx, None) == rk.RKNN_ERR_INPUT_INVALID


def test_input_count_mismatch_only_warns(capi, ctx, reference, rknn_log):
    """n_inputs != the model's input count logs a warning, not an error (facts §4.1)."""
    image = default_input(seed=3)
    inputs = (rk.rknn_input * 2)()
    inputs[0] = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    inputs[1] = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 2, inputs) == rk.RKNN_SUCC
    assert len(rknn_log.take("W")) == 1
    np.testing.assert_allclose(run_get(capi, ctx), reference(image), rtol=RTOL, atol=ATOL)
    assert rknn_log.take("E") == []


@pytest.mark.parametrize(
    "type_",
    [rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_UINT8],
    ids=["FLOAT32", "FLOAT16", "UINT8"],
)
def test_too_small_input_buffer(capi, ctx, rknn_log, type_):
    need = N_ELEMS * ITEMSIZE[type_]
    buf = as_buffer(default_input(), type_, rk.RKNN_TENSOR_NHWC)
    assert buf.nbytes == need
    inp = make_input(buf, type_, rk.RKNN_TENSOR_NHWC, size=need - 1)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    errors = rknn_log.take("E")
    assert len(errors) == 1
    match = INPUT_SIZE_RE.search(errors[0])
    assert match, errors[0]
    assert (int(match[1]), int(match[2])) == (need - 1, need)


def test_zero_size_input_is_param_invalid(capi, ctx, rknn_log):
    inp = make_input(default_input(), rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC, size=0)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    errors = rknn_log.take("E")
    assert len(errors) == 1
    match = INPUT_SIZE_RE.search(errors[0])
    assert match and (int(match[1]), int(match[2])) == (0, N_ELEMS), errors


def test_larger_input_buffer_is_accepted(capi, ctx, reference, rknn_log):
    image = float_image(seed=4)
    big = np.full(N_ELEMS + 1000, np.nan, np.float32)  # the tail must be ignored
    big[:N_ELEMS] = image.reshape(-1)
    got = set_run_get(capi, ctx, big, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC)
    np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)
    assert rknn_log.take("E") == []


def test_pass_through_native_nhwc_equals_normal_path(capi, ctx, reference):
    image = float_image(seed=5)
    normal = set_run_get(capi, ctx, image, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC)
    # Native layout per facts §5.2: NHWC, w_stride = align(64, 16) = 64 on rk3588, float32.
    w_stride = 64
    native = np.zeros((1, 64, w_stride, 3), np.float32)
    native[:, :, :64, :] = reference.normalise_nhwc(image).transpose(0, 2, 3, 1)
    # With pass_through=1 the type and fmt fields are ignored (facts §5.3).
    got = set_run_get(capi, ctx, native, rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_NCHW, pass_through=1)
    np.testing.assert_allclose(got, normal, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)


def test_pass_through_too_small_is_param_invalid(capi, ctx, rknn_log):
    native = np.zeros((1, 64, 64, 3), np.float32)
    inp = make_input(
        native, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC, pass_through=1, size=native.nbytes - 4
    )
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    errors = rknn_log.take("E")
    assert len(errors) == 1 and INPUT_SIZE_RE.search(errors[0]), errors


def _small_conv_model(width: int) -> onnx.ModelProto:
    rng = np.random.RandomState(11)
    w = numpy_helper.from_array(rng.randn(4, 3, 3, 3).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.randn(4).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)
    graph = helper.make_graph(
        [node],
        "small_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, width])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


# The width alignment is in bytes (vendor .rknn field 20 holds 16 int8 / 8 float16 pixels on
# rk3588, 8 / 4 on rk3566: docs/vendor-rknn.md): float32 rows align to 4 px (16 B) / 2 px (8 B).
@pytest.mark.parametrize(("platform", "w_stride"), [("rk3588", 24), ("rk3566", 22)])
def test_pass_through_with_w_stride_padding(capi, convert, make_ctx, platform, w_stride):
    """Width 21, float32: native rows are padded to 16 bytes (rk3588) or 8 bytes (rk3566)."""
    mean, std = [1.0, 2.0, 3.0], [2.0, 4.0, 8.0]
    onnx_model = _small_conv_model(21)
    model = convert(onnx_model, target_platform=platform, mean_values=[mean], std_values=[std])
    ctx = make_ctx(model)
    native_attr = query_attr(capi, ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR)
    assert native_attr.fmt == rk.RKNN_TENSOR_NHWC
    assert list(native_attr.dims[:4]) == [1, 8, 21, 3]
    assert native_attr.w_stride == w_stride
    assert native_attr.size_with_stride == 8 * w_stride * 3 * 4
    out_attr = query_attr(capi, ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
    assert out_attr.fmt == rk.RKNN_TENSOR_NCHW
    assert list(out_attr.dims[:4]) == [1, 4, 8, 21] and out_attr.size == 4 * 8 * 21 * 4

    rng = np.random.RandomState(2)
    image = rng.uniform(0, 10, size=(1, 8, 21, 3)).astype(np.float32)
    normalised = (image - np.float32(mean)) / np.float32(std)
    native = np.full((1, 8, w_stride, 3), 1e30, np.float32)  # padding must be ignored
    native[:, :, :21, :] = normalised

    def go(buf, pass_through):
        inp = make_input(buf, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC, pass_through)
        assert capi(rk.rknn_inputs_set, ctx, 1, inp) == 0
        assert capi(rk.rknn_run, ctx, None) == 0
        outs = (rk.rknn_output * 1)()
        outs[0].want_float = 1
        assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == 0
        result = read_f32(outs[0].buf, outs[0].size).reshape(1, 4, 8, 21).copy()
        assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0
        return result

    normal = go(image, 0)
    passed = go(native, 1)
    import onnxruntime as ort

    session = ort.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    expected = session.run(None, {"x": np.ascontiguousarray(normalised.transpose(0, 3, 1, 2))})[0]
    np.testing.assert_allclose(normal, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(passed, expected, rtol=RTOL, atol=ATOL)


# ---- outputs --------------------------------------------------------------------------------
@pytest.fixture
def ran(capi, ctx, reference):
    """(ctx, expected output) after inputs_set + one run."""
    image = default_input()
    inp = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == 0
    assert capi(rk.rknn_run, ctx, None) == 0
    return ctx, reference(image)


@pytest.mark.parametrize("want_float", [1, 0])
def test_outputs_get_runtime_buffer(capi, ran, want_float):
    ctx, expected = ran
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = want_float
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == 0
    # A float32 model's output dtype is float32, so want_float=0 gives the same bytes.
    assert outs[0].size == 40
    assert outs[0].is_prealloc == 0
    got = read_f32(outs[0].buf, outs[0].size).reshape(1, 10)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0


@pytest.mark.parametrize("extra", [0, 24])
def test_outputs_get_preallocated(capi, ran, extra):
    ctx, expected = ran
    buf = np.full(10 + extra // 4, -7.0, np.float32)
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    outs[0].is_prealloc = 1
    outs[0].buf = buf.ctypes.data
    outs[0].size = buf.nbytes
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == 0
    assert outs[0].buf == buf.ctypes.data  # the caller's buffer, filled in place
    np.testing.assert_allclose(buf[:10].reshape(1, 10), expected, rtol=RTOL, atol=ATOL)
    assert np.all(buf[10:] == -7.0)  # nothing written past the output
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0
    np.testing.assert_allclose(buf[:10].reshape(1, 10), expected, rtol=RTOL, atol=ATOL)


def test_outputs_get_preallocated_too_small(capi, ran, rknn_log):
    ctx, _ = ran
    buf = np.full(9, -7.0, np.float32)
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    outs[0].is_prealloc = 1
    outs[0].buf = buf.ctypes.data
    outs[0].size = buf.nbytes
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == rk.RKNN_ERR_PARAM_INVALID
    errors = rknn_log.take("E")
    assert len(errors) == 1 and re.search(r"param output size", errors[0]), errors
    assert np.all(buf == -7.0)


def test_output_extend_frame_id_follows_runs(capi, ran):
    ctx, _ = ran
    for frame in (2, 3):
        ext = rk.rknn_run_extend()
        assert capi(rk.rknn_run, ctx, ext) == 0
        assert ext.frame_id == frame
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    out_ext = rk.rknn_output_extend()
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, out_ext) == 0
    assert out_ext.frame_id == 3
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0


# ---- pointer and handle forms (design §3) ---------------------------------------------------
POINTER_FORMS = {
    "struct": lambda s: s,
    "byref": lambda s: ctypes.byref(s),
    "pointer": lambda s: ctypes.pointer(s),
    "address": lambda s: ctypes.addressof(s),
    "c_void_p": lambda s: ctypes.c_void_p(ctypes.addressof(s)),
}


@pytest.mark.parametrize("form", list(POINTER_FORMS))
def test_pointer_forms(capi, default_model_bytes, reference, form):
    wrap = POINTER_FORMS[form]
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, wrap(handle), model, len(model), 0, None) == 0
    assert handle.value != 0
    try:
        attr = rk.rknn_tensor_attr()
        attr.index = 0
        cmd = rk.RKNN_QUERY_INPUT_ATTR
        assert capi(rk.rknn_query, handle, cmd, wrap(attr), ctypes.sizeof(attr)) == 0
        assert list(attr.dims[:4]) == [1, 64, 64, 3]

        image = default_input()
        inp = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
        assert capi(rk.rknn_inputs_set, handle, 1, wrap(inp)) == 0

        ext = rk.rknn_run_extend()
        assert capi(rk.rknn_run, handle, wrap(ext)) == 0
        assert ext.frame_id == 1

        out = rk.rknn_output()
        out.want_float = 1
        out_ext = rk.rknn_output_extend()
        assert capi(rk.rknn_outputs_get, handle, 1, wrap(out), wrap(out_ext)) == 0
        assert out_ext.frame_id == 1
        assert out.size == 40  # written through the pointer into the caller's struct
        got = read_f32(out.buf, out.size).reshape(1, 10)
        np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)
        assert capi(rk.rknn_outputs_release, handle, 1, wrap(out)) == 0

        dup = rk.rknn_context()
        assert capi(rk.rknn_dup_context, wrap(handle), wrap(dup)) == 0
        assert dup.value not in (0, handle.value)
        assert capi(rk.rknn_destroy, dup) == 0
    finally:
        assert capi(rk.rknn_destroy, handle) == 0


@pytest.mark.parametrize("as_int", [False, True], ids=["rknn_context", "int"])
def test_context_by_value_forms(capi, default_model_bytes, reference, as_int):
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    context = int(handle.value) if as_int else handle
    io_num = rk.rknn_input_output_num()
    cmd = rk.RKNN_QUERY_IN_OUT_NUM
    assert capi(rk.rknn_query, context, cmd, io_num, ctypes.sizeof(io_num)) == 0
    assert (io_num.n_input, io_num.n_output) == (1, 1)
    image = default_input(seed=9)
    got = set_run_get(capi, context, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_set_core_mask, context, rk.RKNN_NPU_CORE_0) == 0
    assert capi(rk.rknn_destroy, context) == 0
    assert capi(rk.rknn_destroy, handle) == rk.RKNN_ERR_CTX_INVALID


def test_arrays_of_structs_as_python_lists(capi, ctx, reference):
    image = default_input(seed=4)
    inp = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 1, [inp]) == 0
    assert capi(rk.rknn_run, ctx, None) == 0
    out = rk.rknn_output()
    out.want_float = 1
    assert capi(rk.rknn_outputs_get, ctx, 1, [out], None) == 0
    np.testing.assert_allclose(
        read_f32(out.buf, out.size).reshape(1, 10), reference(image), rtol=RTOL, atol=ATOL
    )
    assert capi(rk.rknn_outputs_release, ctx, 1, [out]) == 0


MODEL_FORMS = [
    "bytes",
    "bytearray",
    "memoryview",
    "numpy",
    "address",
    "c_void_p",
    "path_str",
    "path_obj",
]


@pytest.mark.parametrize("form", MODEL_FORMS)
def test_model_forms(capi, default_model_bytes, reference, tmp_path, form):
    data = default_model_bytes
    keep = None
    if form == "bytes":
        model, size = data, len(data)
    elif form == "bytearray":
        model, size = bytearray(data), len(data)
    elif form == "memoryview":
        model, size = memoryview(data), len(data)
    elif form == "numpy":
        model, size = np.frombuffer(data, np.uint8).copy(), len(data)
    elif form in ("address", "c_void_p"):
        keep = ctypes.create_string_buffer(data, len(data))
        address = ctypes.addressof(keep)
        model = address if form == "address" else ctypes.c_void_p(address)
        size = len(data)
    else:
        path = tmp_path / "default.rknn"
        path.write_bytes(data)
        model, size = (str(path) if form == "path_str" else pathlib.Path(path)), 0
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, model, size, 0, None) == 0
    del keep  # the runtime copied what it needs (no MODEL_BUFFER_ZERO_COPY)
    try:
        image = default_input(seed=2)
        got = set_run_get(capi, handle, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
        np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)
        cs = rk.rknn_custom_string()
        assert capi(rk.rknn_query, handle, rk.RKNN_QUERY_CUSTOM_STRING, cs, 1024) == 0
        assert cs.string == b"RGB"
    finally:
        assert capi(rk.rknn_destroy, handle) == 0


def test_model_from_file_with_extend_slice(capi, default_model_bytes, reference, tmp_path):
    """real_model_offset/real_model_size select the model inside a larger file."""
    path = tmp_path / "bundle.bin"
    path.write_bytes(b"\x00" * 100 + default_model_bytes + b"\xff" * 50)
    ext = rk.rknn_init_extend()
    ext.real_model_offset = 100
    ext.real_model_size = len(default_model_bytes)
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, str(path), 0, 0, ext) == 0
    try:
        image = default_input(seed=6)
        got = set_run_get(capi, handle, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
        np.testing.assert_allclose(got, reference(image), rtol=RTOL, atol=ATOL)
    finally:
        assert capi(rk.rknn_destroy, handle) == 0


# ---- rknn_dup_context -----------------------------------------------------------------------
def test_dup_context_shares_program_and_gives_equal_results(capi, ctx, reference):
    dup = rk.rknn_context()
    assert capi(rk.rknn_dup_context, ctx, dup) == 0
    assert dup.value not in (0, ctx.value)
    try:
        original, copy = registry.get(ctx.value), registry.get(dup.value)
        assert copy is not original
        assert copy.model is original.model
        assert copy.weights.program is original.weights.program
        assert copy.weights.array is original.weights.array

        # Same attributes on both.
        for cmd in (rk.RKNN_QUERY_INPUT_ATTR, rk.RKNN_QUERY_OUTPUT_ATTR):
            a, b = query_attr(capi, ctx, cmd), query_attr(capi, dup, cmd)
            assert bytes(a) == bytes(b)

        image = default_input(seed=8)
        r_ctx = set_run_get(capi, ctx, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
        r_dup = set_run_get(capi, dup, image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
        np.testing.assert_array_equal(r_ctx, r_dup)
        np.testing.assert_allclose(r_dup, reference(image), rtol=RTOL, atol=ATOL)

        # The duplicate keeps working after the original is destroyed.
        assert capi(rk.rknn_destroy, ctx) == 0
        np.testing.assert_array_equal(run_get(capi, dup), r_dup)
    finally:
        assert capi(rk.rknn_destroy, dup) == 0


def test_dup_context_does_not_inherit_inputs(capi, ctx):
    image = default_input()
    inp = make_input(image, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == 0
    dup = rk.rknn_context()
    assert capi(rk.rknn_dup_context, ctx, dup) == 0
    try:
        assert capi(rk.rknn_run, dup, None) == rk.RKNN_ERR_INPUT_INVALID
    finally:
        assert capi(rk.rknn_destroy, dup) == 0
