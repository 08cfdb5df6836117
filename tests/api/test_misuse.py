"""Misuse of the C-shaped API: every wrong call returns the vendor's status code, writes exactly
one `E RKNN:` line and never lets a Python exception escape (design §3, §6, §7; facts §4.1)."""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.api import rknn_api
from rknnrt.core import registry
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.errors import ConversionError
from rknnrt.toolkit.samples import default_input

# `E RKNN: [hh:mm:ss.mmm] <function>: <message>` (facts §5.8 log prefix and time stamp).
E_LINE = re.compile(r"^E RKNN: \[\d\d:\d\d:\d\d\.\d{3}\] (rknn_\w+)\b.*\S")
HEADER_SIZE = 64  # rknnrt model file header (rknnrt/model/container.py)


def one_error(rknn_log, function: str | None = None, pattern: str | None = None) -> str:
    """Exactly one `E RKNN:` line since the last read, naming `function` and matching `pattern`."""
    errors = rknn_log.take("E")
    assert len(errors) == 1, errors
    match = E_LINE.match(errors[0])
    assert match, errors[0]
    if function is not None:
        assert match[1] == function, errors[0]
    if pattern is not None:
        assert re.search(pattern, errors[0]), errors[0]
    return errors[0]


def make_input(buf: np.ndarray) -> rk.rknn_input:
    inp = rk.rknn_input()
    inp.index = 0
    inp.buf = buf.ctypes.data
    inp.size = buf.nbytes
    inp.type = rk.RKNN_TENSOR_UINT8
    inp.fmt = rk.RKNN_TENSOR_NHWC
    return inp


IMAGE = default_input()


@pytest.fixture
def ran(capi, ctx):
    """The default-model context after inputs_set and one run."""
    assert capi(rk.rknn_inputs_set, ctx, 1, make_input(IMAGE)) == 0
    assert capi(rk.rknn_run, ctx, None) == 0
    return ctx


@pytest.fixture(scope="module")
def model_for(convert, default_onnx) -> Callable[[str], bytes]:
    """model_for(platform) -> the default model converted for that platform (cached)."""
    cache: dict[str, bytes] = {}

    def get(platform: str) -> bytes:
        if platform not in cache:
            cache[platform] = convert(default_onnx, target_platform=platform)
        return cache[platform]

    return get


# ---- invalid contexts -----------------------------------------------------------------------
def _value(context: Any) -> int:
    return int(context.value) if isinstance(context, rk.rknn_context) else int(context)


_SPARE: list = []


def _spare_mem() -> Any:
    """Live memory that belongs to no context (so only the context argument is wrong)."""
    if not _SPARE:
        _SPARE.append(rk.rknn_create_mem2(0, 4096, rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT))
    return _SPARE[0]


def _args_with_context(name: str, context: Any) -> tuple:
    """Otherwise valid arguments for `name`, with `context` as the context argument."""
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    builders: dict[str, Callable[[], tuple]] = {
        "rknn_destroy": lambda: (context,),
        "rknn_query": lambda: (
            context, rk.RKNN_QUERY_IN_OUT_NUM, rk.rknn_input_output_num(), 8
        ),
        "rknn_inputs_set": lambda: (context, 1, make_input(IMAGE)),
        "rknn_run": lambda: (context, None),
        "rknn_outputs_get": lambda: (context, 1, outs, None),
        "rknn_outputs_release": lambda: (context, 1, outs),
        "rknn_dup_context": lambda: (rk.rknn_context(_value(context)), rk.rknn_context()),
        "rknn_set_core_mask": lambda: (context, rk.RKNN_NPU_CORE_AUTO),
        "rknn_set_batch_core_num": lambda: (context, 1),
        "rknn_set_io_mem": lambda: (context, _spare_mem(), rk.rknn_tensor_attr()),
        "rknn_set_weight_mem": lambda: (context, _spare_mem()),
        "rknn_set_internal_mem": lambda: (context, _spare_mem()),
        "rknn_set_input_shapes": lambda: (context, 1, rk.rknn_tensor_attr()),
        "rknn_set_input_shape": lambda: (context, rk.rknn_tensor_attr()),
        "rknn_wait": lambda: (context, rk.rknn_run_extend()),
    }  # fmt: skip
    if name not in builders:
        pytest.fail(f"{name} is exported but has no misuse case in this test")
    return builders[name]()


# rknn_init only writes *context (its previous value does not matter; see the test below).
CONTEXT_FUNCTIONS = [name for name in rknn_api.__all__ if name != "rknn_init"]


@pytest.mark.parametrize("name", CONTEXT_FUNCTIONS)
def test_destroyed_context_is_ctx_invalid(capi, default_model_bytes, rknn_log, name):
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    assert capi(rk.rknn_destroy, handle) == 0
    rknn_log.clear()
    before = registry.count()
    args = _args_with_context(name, handle.value)
    assert capi(getattr(rk, name), *args) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, name)
    assert registry.count() == before
    if name == "rknn_dup_context":
        assert args[1].value == 0  # nothing written to *context_out


@pytest.mark.parametrize("zero", [0, "rknn_context()"], ids=["int0", "rknn_context0"])
@pytest.mark.parametrize("name", CONTEXT_FUNCTIONS)
def test_null_context_is_ctx_invalid(capi, rknn_log, name, zero):
    context = rk.rknn_context() if zero == "rknn_context()" else 0
    assert capi(getattr(rk, name), *_args_with_context(name, context)) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, name)


def test_every_exported_function_has_a_context_case():
    assert set(rknn_api.__all__) - {"rknn_init"} == set(CONTEXT_FUNCTIONS)
    for name in CONTEXT_FUNCTIONS:
        _args_with_context(name, 0)


def test_never_made_context_is_ctx_invalid(capi, rknn_log):
    outs = (rk.rknn_output * 1)()
    for handle in (1, 0x0FFF, 0xDEADBEEF, 2**64 - 1):
        assert capi(rk.rknn_run, handle, None) == rk.RKNN_ERR_CTX_INVALID
        one_error(rknn_log, "rknn_run")
        assert capi(rk.rknn_outputs_get, handle, 1, outs, None) == rk.RKNN_ERR_CTX_INVALID
        one_error(rknn_log, "rknn_outputs_get")


def test_init_overwrites_a_stale_handle(capi, default_model_bytes, rknn_log):
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    stale = handle.value
    assert capi(rk.rknn_destroy, handle) == 0
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    assert handle.value not in (0, stale)  # handles are never reused
    assert capi(rk.rknn_destroy, stale) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, "rknn_destroy")
    assert capi(rk.rknn_destroy, handle) == 0


def test_double_destroy(capi, default_model_bytes, rknn_log):
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    assert capi(rk.rknn_destroy, handle) == 0
    assert capi(rk.rknn_destroy, handle) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, "rknn_destroy")


# ---- NULL pointers --------------------------------------------------------------------------
NULL_CASES: dict[str, Callable[[Any], tuple[Callable[..., int], tuple]]] = {
    "init.context": lambda c: (rk.rknn_init, (None, b"x" * 100, 100, 0, None)),
    "init.context_null_pointer": lambda c: (
        rk.rknn_init, (ctypes.POINTER(rk.rknn_context)(), b"x" * 100, 100, 0, None)
    ),
    "query.info": lambda c: (rk.rknn_query, (c, rk.RKNN_QUERY_IN_OUT_NUM, None, 8)),
    "query.attr": lambda c: (rk.rknn_query, (c, rk.RKNN_QUERY_INPUT_ATTR, None, 376)),
    "query.c_void_p_null": lambda c: (
        rk.rknn_query, (c, rk.RKNN_QUERY_SDK_VERSION, ctypes.c_void_p(), 512)
    ),
    "inputs_set.inputs": lambda c: (rk.rknn_inputs_set, (c, 1, None)),
    "inputs_set.null_pointer": lambda c: (
        rk.rknn_inputs_set, (c, 1, ctypes.POINTER(rk.rknn_input)())
    ),
    "inputs_set.buf": lambda c: (rk.rknn_inputs_set, (c, 1, _input_with_null_buf())),
    "outputs_get.outputs": lambda c: (rk.rknn_outputs_get, (c, 1, None, None)),
    "outputs_get.prealloc_buf": lambda c: (
        rk.rknn_outputs_get, (c, 1, _prealloc_output_with_null_buf(), None)
    ),
    "outputs_release.outputs": lambda c: (rk.rknn_outputs_release, (c, 1, None)),
    "dup_context.in": lambda c: (rk.rknn_dup_context, (None, rk.rknn_context())),
    "dup_context.out": lambda c: (rk.rknn_dup_context, (c, None)),
}  # fmt: skip


def _input_with_null_buf() -> rk.rknn_input:
    inp = make_input(IMAGE)
    inp.buf = None
    return inp


def _prealloc_output_with_null_buf() -> rk.rknn_output:
    out = rk.rknn_output()
    out.want_float = 1
    out.is_prealloc = 1
    out.size = 40
    return out


@pytest.mark.parametrize("case", list(NULL_CASES))
def test_null_pointer_is_param_invalid(capi, ran, rknn_log, case):
    before = registry.count()
    func, args = NULL_CASES[case](ran)
    assert capi(func, *args) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, func.__name__)
    assert registry.count() == before


def test_run_with_null_extend_is_fine(capi, ran, rknn_log):
    assert capi(rk.rknn_run, ran, None) == 0
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert capi(rk.rknn_outputs_get, ran, 1, outs, None) == 0
    assert capi(rk.rknn_outputs_release, ran, 1, outs) == 0
    assert rknn_log.take("E") == []


# ---- rknn_query -----------------------------------------------------------------------------
ATTR_QUERIES = {
    "INPUT_ATTR": rk.RKNN_QUERY_INPUT_ATTR,
    "OUTPUT_ATTR": rk.RKNN_QUERY_OUTPUT_ATTR,
    "NATIVE_INPUT_ATTR": rk.RKNN_QUERY_NATIVE_INPUT_ATTR,
    "NATIVE_OUTPUT_ATTR": rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR,
    "NATIVE_NHWC_INPUT_ATTR": rk.RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR,
    "NATIVE_NHWC_OUTPUT_ATTR": rk.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR,
}


@pytest.mark.parametrize("index", [1, 7, 0xFFFFFFFF])
@pytest.mark.parametrize("cmd", list(ATTR_QUERIES))
def test_attr_query_wrong_index(capi, ctx, rknn_log, cmd, index):
    attr = rk.rknn_tensor_attr()
    attr.index = index
    rc = capi(rk.rknn_query, ctx, ATTR_QUERIES[cmd], attr, ctypes.sizeof(attr))
    assert rc == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_query", r"index")


@pytest.mark.parametrize("cmd", [99, rk.RKNN_QUERY_CMD_MAX, -1, 0x7FFFFFFF])
def test_unknown_query_cmd(capi, ctx, rknn_log, cmd):
    info = rk.rknn_custom_string()  # big enough for anything
    assert capi(rk.rknn_query, ctx, cmd, info, ctypes.sizeof(info)) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_query", r"(?i)unsupported cmd|unknown")
    assert bytes(info) == bytes(ctypes.sizeof(info))  # nothing written


QUERY_STRUCTS = {
    "IN_OUT_NUM": (rk.RKNN_QUERY_IN_OUT_NUM, rk.rknn_input_output_num),
    "INPUT_ATTR": (rk.RKNN_QUERY_INPUT_ATTR, rk.rknn_tensor_attr),
    "OUTPUT_ATTR": (rk.RKNN_QUERY_OUTPUT_ATTR, rk.rknn_tensor_attr),
    "NATIVE_INPUT_ATTR": (rk.RKNN_QUERY_NATIVE_INPUT_ATTR, rk.rknn_tensor_attr),
    "NATIVE_OUTPUT_ATTR": (rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, rk.rknn_tensor_attr),
    "SDK_VERSION": (rk.RKNN_QUERY_SDK_VERSION, rk.rknn_sdk_version),
    "MEM_SIZE": (rk.RKNN_QUERY_MEM_SIZE, rk.rknn_mem_size),
    "CUSTOM_STRING": (rk.RKNN_QUERY_CUSTOM_STRING, rk.rknn_custom_string),
    "PERF_RUN": (rk.RKNN_QUERY_PERF_RUN, rk.rknn_perf_run),
}


@pytest.mark.parametrize("short_by", [1, "all"])
@pytest.mark.parametrize("query", list(QUERY_STRUCTS))
def test_query_size_smaller_than_struct(capi, ctx, rknn_log, query, short_by):
    cmd, result_type = QUERY_STRUCTS[query]
    info = result_type()
    size = 0 if short_by == "all" else ctypes.sizeof(result_type) - short_by
    assert capi(rk.rknn_query, ctx, cmd, info, size) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_query")
    assert bytes(info) == bytes(ctypes.sizeof(info))  # nothing written


@pytest.mark.parametrize("query", list(QUERY_STRUCTS))
def test_query_exact_size_succeeds(capi, ctx, rknn_log, query):
    cmd, result_type = QUERY_STRUCTS[query]
    info = result_type()
    assert capi(rk.rknn_query, ctx, cmd, info, ctypes.sizeof(info)) == rk.RKNN_SUCC
    assert rknn_log.take("E") == []


def test_query_struct_smaller_than_claimed_size(capi, ctx, rknn_log):
    """A ctypes object knows its size: claiming 376 bytes of an 8-byte struct is refused."""
    small = rk.rknn_input_output_num()
    attr_size = ctypes.sizeof(rk.rknn_tensor_attr)
    rc = capi(rk.rknn_query, ctx, rk.RKNN_QUERY_INPUT_ATTR, small, attr_size)
    assert rc == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_query")
    assert (small.n_input, small.n_output) == (0, 0)


@pytest.mark.parametrize("cmd", [rk.RKNN_QUERY_DEVICE_MEM_INFO])
def test_query_unsupported_on_rk3588_fails(capi, ctx, rknn_log, cmd):
    """DEVICE_MEM_INFO is x for RK3576/RK3588 in RT Table 4-2 (facts §5.1)."""
    info = rk.rknn_custom_string()  # big enough for an rknn_tensor_mem
    assert capi(rk.rknn_query, ctx, cmd, info, ctypes.sizeof(info)) < 0
    one_error(rknn_log, "rknn_query")
    assert bytes(info) == bytes(ctypes.sizeof(info))


# ---- call order -----------------------------------------------------------------------------
def test_run_before_inputs_set_is_input_invalid(capi, ctx, rknn_log):
    ext = rk.rknn_run_extend()
    assert capi(rk.rknn_run, ctx, ext) == rk.RKNN_ERR_INPUT_INVALID
    one_error(rknn_log, "rknn_run", r"images")
    assert ext.frame_id == 0
    # A refused run is not a frame: the first real run is frame 1.
    assert capi(rk.rknn_inputs_set, ctx, 1, make_input(IMAGE)) == 0
    assert capi(rk.rknn_run, ctx, ext) == 0
    assert ext.frame_id == 1


def test_refused_inputs_set_keeps_the_previous_input(capi, ctx, reference, rknn_log):
    assert capi(rk.rknn_inputs_set, ctx, 1, make_input(IMAGE)) == 0
    other = default_input(seed=21)
    short = make_input(other)
    short.size = other.nbytes - 1
    assert capi(rk.rknn_inputs_set, ctx, 1, short) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_inputs_set")
    wrong_type = make_input(other.astype(np.int8))
    wrong_type.type = rk.RKNN_TENSOR_INT8
    assert capi(rk.rknn_inputs_set, ctx, 1, wrong_type) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_inputs_set")
    assert capi(rk.rknn_run, ctx, None) == 0
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == 0
    got = np.frombuffer((ctypes.c_char * 40).from_address(outs[0].buf), np.float32)
    np.testing.assert_allclose(got.reshape(1, 10), reference(IMAGE), rtol=1e-4, atol=1e-5)
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0


def test_outputs_get_before_run_is_output_invalid(capi, ctx, rknn_log):
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == rk.RKNN_ERR_OUTPUT_INVALID
    one_error(rknn_log, "rknn_outputs_get")
    assert (outs[0].buf, outs[0].size) == (None, 0)
    # Still invalid after inputs_set alone.
    assert capi(rk.rknn_inputs_set, ctx, 1, make_input(IMAGE)) == 0
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == rk.RKNN_ERR_OUTPUT_INVALID
    one_error(rknn_log, "rknn_outputs_get")


def test_inputs_set_wrong_input_index(capi, ctx, rknn_log):
    inp = make_input(IMAGE)
    inp.index = 1
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_inputs_set")


@pytest.mark.parametrize("n", [0, -1])
def test_zero_or_negative_counts(capi, ran, rknn_log, n):
    inp = make_input(IMAGE)
    assert capi(rk.rknn_inputs_set, ran, n, inp) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_inputs_set")
    outs = (rk.rknn_output * 1)()
    assert capi(rk.rknn_outputs_get, ran, n, outs, None) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_outputs_get")


def test_more_outputs_than_the_model_has(capi, ran, rknn_log):
    outs = (rk.rknn_output * 2)()
    assert capi(rk.rknn_outputs_get, ran, 2, outs, None) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_outputs_get")


@pytest.mark.parametrize("field", ["type", "fmt"])
def test_invalid_enum_in_rknn_input(capi, ctx, rknn_log, field):
    inp = make_input(IMAGE)
    setattr(inp, field, 77)
    assert capi(rk.rknn_inputs_set, ctx, 1, inp) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_inputs_set")


# ---- rknn_init ------------------------------------------------------------------------------
def _corrupt(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x5A
    return bytes(out)


def _graph_offset(data: bytes) -> int:
    return struct.unpack_from("<Q", data, 32)[0]


BAD_MODELS: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "vendor_rknn_header": (lambda m: b"RKNN" + bytes(1020), r"(?i)vendor|\.rknn"),
    "truncated_half": (lambda m: m[: len(m) // 2], r"(?i)truncat|outside|corrupt"),
    "header_only": (lambda m: m[:HEADER_SIZE], r"(?i)truncat|outside|corrupt"),
    "shorter_than_header": (lambda m: m[:20], r"(?i)too small|truncat|header"),
    "random_bytes": (
        lambda m: np.random.RandomState(0).bytes(4096), r"(?i)invalid rknn model magic"
    ),
    "corrupted_metadata_byte": (lambda m: _corrupt(m, HEADER_SIZE + 10), r"(?i)corrupt|checksum"),
    "corrupted_graph_byte": (lambda m: _corrupt(m, _graph_offset(m) + 20), r"(?i)corrupt|checksum"),
    "wrong_format_version": (
        lambda m: m[:8] + struct.pack("<I", 99) + m[12:], r"(?i)invalid rknn model version"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_init_bad_model_is_model_invalid(capi, default_model_bytes, rknn_log, case):
    make, pattern = BAD_MODELS[case]
    data = make(default_model_bytes)
    assert data != default_model_bytes
    before = registry.count()
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, data, len(data), 0, None) == rk.RKNN_ERR_MODEL_INVALID
    one_error(rknn_log, "rknn_init", pattern)
    assert handle.value == 0  # no context handed out
    assert registry.count() == before


def test_init_bad_model_file_is_model_invalid(capi, default_model_bytes, rknn_log, tmp_path):
    path = tmp_path / "truncated.rknn"
    path.write_bytes(default_model_bytes[: len(default_model_bytes) // 2])
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, str(path), 0, 0, None) == rk.RKNN_ERR_MODEL_INVALID
    one_error(rknn_log, "rknn_init")
    assert handle.value == 0


BAD_INIT_ARGS: dict[str, Callable[[bytes], tuple]] = {
    "empty_bytes_size0": lambda m: (b"", 0),
    "empty_bytes_size1": lambda m: (b"", 1),
    "none_model_size0": lambda m: (None, 0),
    "none_model": lambda m: (None, len(m)),
    "null_address": lambda m: (0, len(m)),
    "size_bigger_than_bytes": lambda m: (m, len(m) + 1),
    "size_bigger_than_bytearray": lambda m: (bytearray(m), len(m) + 64),
    "size_bigger_than_numpy": lambda m: (np.frombuffer(m, np.uint8), len(m) + 1),
    "size_bigger_than_ctypes_buffer": lambda m: (ctypes.create_string_buffer(m, len(m)),
                                                 len(m) + 1),
    "bytes_with_size0": lambda m: (m, 0),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_INIT_ARGS))
def test_init_bad_arguments_are_param_invalid(capi, default_model_bytes, rknn_log, case):
    model, size = BAD_INIT_ARGS[case](default_model_bytes)
    before = registry.count()
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, model, size, 0, None) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_init")
    assert handle.value == 0
    assert registry.count() == before


def test_init_file_slice_beyond_the_file_fails(capi, default_model_bytes, rknn_log, tmp_path):
    path = tmp_path / "model.rknn"
    path.write_bytes(default_model_bytes)
    ext = rk.rknn_init_extend()
    ext.real_model_offset = 64
    ext.real_model_size = len(default_model_bytes)
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, str(path), 0, 0, ext) < 0
    one_error(rknn_log, "rknn_init")
    assert handle.value == 0


def test_init_missing_file_fails_with_one_line(capi, rknn_log, tmp_path):
    handle = rk.rknn_context()
    rc = capi(rk.rknn_init, handle, str(tmp_path / "missing.rknn"), 0, 0, None)
    assert rc < 0
    one_error(rknn_log, "rknn_init", r"missing\.rknn")
    assert handle.value == 0


def test_init_unknown_flag_bits_warn(capi, default_model_bytes, rknn_log):
    handle = rk.rknn_context()
    model = default_model_bytes
    assert capi(rk.rknn_init, handle, model, len(model), 0x80000000, None) == rk.RKNN_SUCC
    try:
        assert handle.value != 0
        warnings = rknn_log.take()
        assert [line[:7] for line in warnings] == ["W RKNN:"], warnings
        assert re.search(r"0x80000000", warnings[0]), warnings
        # The context works.
        assert capi(rk.rknn_inputs_set, handle, 1, make_input(IMAGE)) == 0
        assert capi(rk.rknn_run, handle, None) == 0
    finally:
        assert capi(rk.rknn_destroy, handle) == 0


def test_init_known_flags_do_not_warn(capi, default_model_bytes, rknn_log):
    handle = rk.rknn_context()
    model = default_model_bytes
    flag = rk.RKNN_FLAG_PRIOR_MEDIUM | rk.RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY
    assert capi(rk.rknn_init, handle, model, len(model), flag, None) == rk.RKNN_SUCC
    assert rknn_log.take() == []
    assert capi(rk.rknn_destroy, handle) == 0


# ---- garbage arguments never raise ----------------------------------------------------------
GARBAGE: dict[str, Callable[[Any], tuple[Callable[..., int], tuple]]] = {
    "destroy_str": lambda c: (rk.rknn_destroy, ("ctx",)),
    "destroy_float": lambda c: (rk.rknn_destroy, (1.5,)),
    "query_cmd_str": lambda c: (rk.rknn_query, (c, "IN_OUT_NUM", rk.rknn_input_output_num(), 8)),
    "query_negative_size": lambda c: (
        rk.rknn_query, (c, rk.RKNN_QUERY_IN_OUT_NUM, rk.rknn_input_output_num(), -1)
    ),
    "query_info_object": lambda c: (rk.rknn_query, (c, rk.RKNN_QUERY_IN_OUT_NUM, object(), 8)),
    "query_info_bytes": lambda c: (rk.rknn_query, (c, rk.RKNN_QUERY_IN_OUT_NUM, b"12345678", 8)),
    "inputs_set_object": lambda c: (rk.rknn_inputs_set, (c, 1, object())),
    "inputs_set_wrong_struct": lambda c: (rk.rknn_inputs_set, (c, 1, rk.rknn_output())),
    "inputs_set_list_too_short": lambda c: (rk.rknn_inputs_set, (c, 2, [make_input(IMAGE)])),
    "outputs_get_small_struct": lambda c: (
        rk.rknn_outputs_get, (c, 1, rk.rknn_output_extend(), None)
    ),
    "outputs_get_extend_object": lambda c: (
        rk.rknn_outputs_get, (c, 1, (rk.rknn_output * 1)(), object())
    ),
    "run_extend_object": lambda c: (rk.rknn_run, (c, object())),
    "run_extend_wrong_struct": lambda c: (rk.rknn_run, (c, rk.rknn_output_extend())),
    "wait_extend_object": lambda c: (rk.rknn_wait, (c, object())),
    "wait_extend_wrong_struct": lambda c: (rk.rknn_wait, (c, rk.rknn_output_extend())),
    "init_model_object": lambda c: (rk.rknn_init, (rk.rknn_context(), object(), 10, 0, None)),
    "init_extend_object": lambda c: (rk.rknn_init, (rk.rknn_context(), b"x" * 99, 99, 0, 5.0)),
    "set_core_mask_str": lambda c: (rk.rknn_set_core_mask, (c, "ALL")),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GARBAGE))
def test_garbage_arguments_fail_cleanly(capi, ran, rknn_log, case):
    func, args = GARBAGE[case](ran)
    rc = capi(func, *args)
    assert rc < 0
    one_error(rknn_log, func.__name__)


# ---- multi-core settings (facts §5.1, §5.10) ------------------------------------------------
RK3588_MASKS = {"AUTO": 0, "0": 1, "1": 2, "2": 4, "0_1": 3, "0_1_2": 7, "ALL": 0xFFFF}


def test_core_mask_constants_match_the_header():
    assert {name: getattr(rk, f"RKNN_NPU_CORE_{name}") for name in RK3588_MASKS} == RK3588_MASKS


@pytest.mark.parametrize("mask", list(RK3588_MASKS.values()), ids=list(RK3588_MASKS))
def test_rk3588_accepts_core_mask(capi, ctx, rknn_log, mask):
    assert capi(rk.rknn_set_core_mask, ctx, mask) == rk.RKNN_SUCC
    assert rknn_log.take("E") == []
    # Inference still works under the chosen mask.
    assert capi(rk.rknn_inputs_set, ctx, 1, make_input(IMAGE)) == 0
    assert capi(rk.rknn_run, ctx, None) == 0


@pytest.mark.parametrize("mask", [5, 6, 8, 0xFFFE, rk.RKNN_NPU_CORE_UNDEFINED, -1])
def test_rk3588_rejects_core_mask(capi, ctx, rknn_log, mask):
    assert capi(rk.rknn_set_core_mask, ctx, mask) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_set_core_mask")


@pytest.mark.parametrize("mask", [0, 1, 2, 3, 0xFFFF])
def test_rk3576_accepts_core_mask(capi, make_ctx, model_for, rknn_log, mask):
    context = make_ctx(model_for("rk3576"))
    assert capi(rk.rknn_set_core_mask, context, mask) == rk.RKNN_SUCC
    assert rknn_log.take("E") == []


@pytest.mark.parametrize("mask", [4, 7])
def test_rk3576_rejects_core_mask(capi, make_ctx, model_for, rknn_log, mask):
    context = make_ctx(model_for("rk3576"))
    assert capi(rk.rknn_set_core_mask, context, mask) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_set_core_mask")


@pytest.mark.parametrize("platform", ["rk3566", "rk3568", "rk3562"])
def test_single_core_platform_refuses_core_mask(capi, make_ctx, model_for, rknn_log, platform):
    context = make_ctx(model_for(platform))
    for mask in (0, 1, 0xFFFF):
        rc = capi(rk.rknn_set_core_mask, context, mask)
        assert rc < 0, (platform, mask)
        one_error(rknn_log, "rknn_set_core_mask")


@pytest.mark.parametrize(
    ("platform", "accepted", "rejected"),
    [("rk3588", [1, 2, 3], [0, 4, -1]), ("rk3576", [1, 2], [0, 3])],
)
def test_batch_core_num(capi, make_ctx, model_for, rknn_log, platform, accepted, rejected):
    context = make_ctx(model_for(platform))
    for n in accepted:
        assert capi(rk.rknn_set_batch_core_num, context, n) == rk.RKNN_SUCC, n
        assert rknn_log.take("E") == []
    for n in rejected:
        assert capi(rk.rknn_set_batch_core_num, context, n) == rk.RKNN_ERR_PARAM_INVALID, n
        one_error(rknn_log, "rknn_set_batch_core_num")


def test_batch_core_num_fails_on_rk3566(capi, make_ctx, model_for, rknn_log):
    context = make_ctx(model_for("rk3566"))
    assert capi(rk.rknn_set_batch_core_num, context, 1) < 0
    one_error(rknn_log, "rknn_set_batch_core_num")


def test_converter_refuses_float_model_for_rv1106(default_onnx):
    """rv1106 runs int8 models only (facts §5.1), so its general-API refusal is untestable;
    the converter refuses the float build instead."""
    rknn = RKNN()
    assert rknn.config(target_platform="rv1106") == 0
    assert rknn.load_onnx(default_onnx) == 0
    assert rknn.build(do_quantization=False) == -1
    assert "quantis" in rknn.last_error or "quantiz" in rknn.last_error, rknn.last_error
    with pytest.raises(ConversionError):  # nothing was built
        rknn.model_bytes()


# ---- RKNN_LOG_LEVEL -------------------------------------------------------------------------
def _init_destroy(capi, model: bytes) -> None:
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    assert capi(rk.rknn_destroy, handle) == 0


def test_log_level_3_prints_versions_at_init(capi, default_model_bytes, rknn_log, monkeypatch):
    monkeypatch.setenv("RKNN_LOG_LEVEL", "3")
    _init_destroy(capi, default_model_bytes)
    info = rknn_log.take("I")
    assert any("librknnrt version" in line for line in info), info
    assert any("Driver Information, version" in line for line in info), info
    assert any("target platform: rk3588" in line for line in info), info
    assert all(re.match(r"^I RKNN: \[\d\d:\d\d:\d\d\.\d{3}\] ", line) for line in info), info


def test_default_log_level_is_quiet(capi, default_model_bytes, rknn_log, monkeypatch):
    monkeypatch.delenv("RKNN_LOG_LEVEL", raising=False)
    _init_destroy(capi, default_model_bytes)
    assert rknn_log.take() == []


def test_errors_print_whatever_the_log_level(capi, rknn_log, monkeypatch):
    monkeypatch.setenv("RKNN_LOG_LEVEL", "0")
    assert capi(rk.rknn_run, 0, None) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, "rknn_run")
