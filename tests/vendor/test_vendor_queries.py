"""Level 1: every query answer for a vendor file equals what the vendor toolkit reported."""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator

import pytest

import rknnrt as rk
from rknnrt.model.vendor_rknn import board_rules, fileformat
from tests.conftest import init_context

from .vendor_data import REPORTED, STEMS, UNSUPPORTED, model_bytes

_TYPES = {"int8": rk.RKNN_TENSOR_INT8, "float16": rk.RKNN_TENSOR_FLOAT16}
_FMTS = {"NHWC": rk.RKNN_TENSOR_NHWC, "NCHW": rk.RKNN_TENSOR_NCHW,
         "NC1HWC2": rk.RKNN_TENSOR_NC1HWC2, "UNDEFINED": rk.RKNN_TENSOR_UNDEFINED}  # fmt: skip


@pytest.fixture(scope="module", params=[s for s in STEMS if s not in UNSUPPORTED])
def stem_ctx(request, capi) -> Iterator[tuple[str, rk.rknn_context]]:
    """One context per fixture file, shared by the query tests (queries change nothing);
    pytest groups the tests by file, so one context is alive at a time."""
    ctx = init_context(capi, model_bytes(request.param))
    yield request.param, ctx
    assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC


def _query_attr(ctx: rk.rknn_context, cmd: int, index: int) -> rk.rknn_tensor_attr:
    attr = rk.rknn_tensor_attr()
    attr.index = index
    assert rk.rknn_query(ctx, cmd, attr, ctypes.sizeof(attr)) == rk.RKNN_SUCC
    return attr


def _kbytes(text: str) -> int:
    value, unit = re.fullmatch(r"([0-9.]+)(\w+)", text).groups()
    return round(float(value) * {"B": 1, "KB": 1024, "MB": 1024 * 1024}[unit])


def _shape(text: str) -> list[int]:
    return [int(v) for v in text.strip("()").split(",")]


def test_queries_equal_the_toolkit_report(stem_ctx: tuple[str, rk.rknn_context]) -> None:
    stem, ctx = stem_ctx
    rep = REPORTED[stem]
    io_num = rk.rknn_input_output_num()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, io_num, ctypes.sizeof(io_num)) == 0
    assert (io_num.n_input, io_num.n_output) == (len(rep["inputs"]), len(rep["outputs"]))
    default = "int8" if rep["dtype"] == "i8" else "float16"
    for k, name in enumerate(rep["inputs"]):
        attr = _query_attr(ctx, rk.RKNN_QUERY_INPUT_ATTR, k)
        shape = rep["input_shapes"][k]
        assert attr.name.decode() == name
        dims = [shape[0], shape[2], shape[3], shape[1]] if len(shape) == 4 else shape
        assert list(attr.dims[: attr.n_dims]) == dims
        assert attr.type == _TYPES[rep["dtype_changed"].get(name, default)]
        _check_quant(attr, rep["io_quant"].get(name))
    for k, name in enumerate(rep["outputs"]):
        attr = _query_attr(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, k)
        assert attr.name.decode() == name
        assert list(attr.dims[: attr.n_dims]) == rep["sim_output_shapes"][k]
        expected = rep["dtype_changed"].get(name, "float16")
        assert attr.type == _TYPES[expected]
        _check_quant(attr, rep["io_quant"].get(name) if expected == "int8" else None)
        row = rep["feature_rows"].get(name)
        native = _query_attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, k)
        if row is not None and row["fmt"] == "NC1HWC2":
            # the log's C2; the data fits the log's allocation
            n, c, h, w = rep["sim_output_shapes"][k]
            c2 = _shape(row["native"])[-1]
            assert native.fmt == rk.RKNN_TENSOR_NC1HWC2
            assert list(native.dims[: native.n_dims]) == [n, -(-c // c2), h, w, c2]
            assert native.size_with_stride <= row["size"]
    mem = rk.rknn_mem_size()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_MEM_SIZE, mem, ctypes.sizeof(mem)) == 0
    if rep["platform"] == "rk3576":
        # rk3576 files store a weight size up to ~1 KB above the log's statistic (the stored
        # value is what rknnrt reports: docs/vendor-rknn.md)
        assert 0 <= mem.total_weight_size - _kbytes(rep["memory"]["Weight"]) <= 1024
    else:
        assert mem.total_weight_size == _kbytes(rep["memory"]["Weight"])
    assert mem.total_internal_size == _kbytes(rep["memory"]["Internal"])
    custom = rk.rknn_custom_string()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_CUSTOM_STRING, custom, ctypes.sizeof(custom)) == 0
    assert custom.string.decode() == rep["custom_string"]
    version = rk.rknn_sdk_version()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_SDK_VERSION, version, ctypes.sizeof(version)) == 0
    assert version.api_version.decode().startswith("2.5.0")


def _check_quant(attr: rk.rknn_tensor_attr, quant: dict | None) -> None:
    if quant is None:  # float16 IO: reported as AFFINE with zp 0, scale 1 (core/io/attrs.py)
        assert (attr.zp, attr.scale) == (0, 1.0)
        return
    assert attr.qnt_type == rk.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC
    assert attr.zp == quant["zp"]
    assert attr.scale == pytest.approx(quant["scale"], rel=1e-6)


def test_native_attrs_equal_the_files_stored_values(
    stem_ctx: tuple[str, rk.rknn_context],
) -> None:
    """rknnrt's platform rules and the rules inferred from the file's own fields (width
    alignment, stored C2; board_rules.py) give the same native attributes, and the data fits
    the file's allocation."""
    stem, ctx = stem_ctx
    vendor = fileformat.parse(memoryview(model_bytes(stem)))
    sides = (
        (True, vendor.inputs, rk.RKNN_QUERY_NATIVE_INPUT_ATTR),
        (False, vendor.outputs, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR),
    )
    for is_input, indices, cmd in sides:
        for k, index in enumerate(indices):
            expected = board_rules.native_attrs(vendor, vendor.tensors[index], is_input)
            attr = _query_attr(ctx, cmd, k)
            assert attr.fmt == _FMTS[expected["fmt"]], (stem, k)
            assert list(attr.dims[: attr.n_dims]) == expected["dims"], (stem, k)
            assert (attr.w_stride, attr.size_with_stride) == (
                expected["w_stride"],
                expected["size_with_stride"],
            ), (stem, k)
            assert attr.size_with_stride <= vendor.tensors[index].size, (stem, k)


def test_odd_width_input_stride_is_the_width_alignment(make_ctx) -> None:
    """W = 15 NHWC int8 input on rk3588: w_stride 16 (field 20), size_with_stride 720."""
    ctx = make_ctx(model_bytes("oddwidth_rk3588_i8"))
    attr = _query_attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR, 0)
    assert (attr.w_stride, attr.size_with_stride, attr.fmt) == (16, 720, rk.RKNN_TENSOR_NHWC)
    ctx = make_ctx(model_bytes("oddwidth_rk3566_i8"))
    attr = _query_attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR, 0)
    assert (attr.w_stride, attr.size_with_stride) == (16, 720)  # 15 -> 16 with alignment 8


@pytest.mark.parametrize(
    ("stem", "stored_align", "w_stride", "size_with_stride"),
    [
        ("transpose_rk3588_fp16", 8, 8, 6 * 8 * 3 * 2),  # W=6: 8 float16 px = 16 B
        ("transpose_rk3576_fp16", 8, 8, 6 * 8 * 3 * 2),
        ("transpose_rk3588_i8", 16, 16, 6 * 16 * 3),  # 16 int8 px = 16 B
        ("sigmoid_rk3566_fp16", 0, 12, 10 * 12 * 4 * 2),  # W=12 is 4-px (8 B) aligned already
        ("gap_rk3566_i8", 8, 16, 12 * 16 * 1),  # W=13: 8 int8 px = 8 B
    ],
)
def test_width_alignment_is_in_bytes(stem: str, stored_align: int, w_stride: int,
                                     size_with_stride: int, make_ctx) -> None:  # fmt: skip
    """The files' field 20 holds 16 B (rk3588/rk3576) or 8 B (rk3566) as pixels of the input's
    dtype; rknnrt's platform table gives the same w_stride (it used 16/8 PIXELS for every
    dtype, which padded these float16 inputs to 16)."""
    data = model_bytes(stem)
    vendor = fileformat.parse(memoryview(data))
    assert vendor.tensors[vendor.inputs[0]].width_align == stored_align
    attr = _query_attr(make_ctx(data), rk.RKNN_QUERY_NATIVE_INPUT_ATTR, 0)
    assert (attr.w_stride, attr.size_with_stride, attr.fmt) == (
        w_stride, size_with_stride, rk.RKNN_TENSOR_NHWC)  # fmt: skip
