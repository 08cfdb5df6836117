"""ABI checks of rknnrt.api.structs against the LP64 table in rknn_api_facts.md §1 and §3.

The data below is copied from the facts file: struct size, and for every field (in header
order) its name, its LP64 offset and its C type as written in the header.
"""

from __future__ import annotations

import ctypes
import re

import pytest

from rknnrt.api import structs as S

# (struct name, sizeof, [(field, offset, C type), ...]) -- header field order.
STRUCTS: list[tuple[str, int, list[tuple[str, int, str]]]] = [
    # ---- rknn_api.h ----
    (
        "rknn_input_output_num",
        8,
        [("n_input", 0, "uint32_t"), ("n_output", 4, "uint32_t")],
    ),
    (
        "rknn_tensor_attr",
        376,
        [
            ("index", 0, "uint32_t"),
            ("n_dims", 4, "uint32_t"),
            ("dims", 8, "uint32_t[16]"),
            ("name", 72, "char[256]"),
            ("n_elems", 328, "uint32_t"),
            ("size", 332, "uint32_t"),
            ("fmt", 336, "enum"),
            ("type", 340, "enum"),
            ("qnt_type", 344, "enum"),
            ("fl", 348, "int8_t"),
            ("zp", 352, "int32_t"),
            ("scale", 356, "float"),
            ("w_stride", 360, "uint32_t"),
            ("size_with_stride", 364, "uint32_t"),
            ("pass_through", 368, "uint8_t"),
            ("h_stride", 372, "uint32_t"),
        ],
    ),
    (
        "rknn_input_range",
        33040,
        [
            ("index", 0, "uint32_t"),
            ("shape_number", 4, "uint32_t"),
            ("fmt", 8, "enum"),
            ("name", 12, "char[256]"),
            ("dyn_range", 268, "uint32_t[512][16]"),
            ("n_dims", 33036, "uint32_t"),
        ],
    ),
    (
        "rknn_perf_detail",
        16,
        [("perf_data", 0, "char*"), ("data_len", 8, "uint64_t")],
    ),
    ("rknn_perf_run", 8, [("run_duration", 0, "int64_t")]),
    (
        "rknn_sdk_version",
        512,
        [("api_version", 0, "char[256]"), ("drv_version", 256, "char[256]")],
    ),
    (
        "rknn_mem_size",
        64,
        [
            ("total_weight_size", 0, "uint32_t"),
            ("total_internal_size", 4, "uint32_t"),
            ("total_dma_allocated_size", 8, "uint64_t"),
            ("total_sram_size", 16, "uint32_t"),
            ("free_sram_size", 20, "uint32_t"),
            ("reserved", 24, "uint32_t[10]"),
        ],
    ),
    ("rknn_custom_string", 1024, [("string", 0, "char[1024]")]),
    (
        "rknn_tensor_mem",
        40,
        [
            ("virt_addr", 0, "void*"),
            ("phys_addr", 8, "uint64_t"),
            ("fd", 16, "int32_t"),
            ("offset", 20, "int32_t"),
            ("size", 24, "uint32_t"),
            ("flags", 28, "uint32_t"),
            ("priv_data", 32, "void*"),
        ],
    ),
    (
        "rknn_input",
        32,
        [
            ("index", 0, "uint32_t"),
            ("buf", 8, "void*"),
            ("size", 16, "uint32_t"),
            ("pass_through", 20, "uint8_t"),
            ("type", 24, "enum"),
            ("fmt", 28, "enum"),
        ],
    ),
    (
        "rknn_output",
        24,
        [
            ("want_float", 0, "uint8_t"),
            ("is_prealloc", 1, "uint8_t"),
            ("index", 4, "uint32_t"),
            ("buf", 8, "void*"),
            ("size", 16, "uint32_t"),
        ],
    ),
    (
        "rknn_init_extend",
        136,
        [
            ("ctx", 0, "uint64_t"),
            ("real_model_offset", 8, "int32_t"),
            ("real_model_size", 12, "uint32_t"),
            ("model_buffer_fd", 16, "int32_t"),
            ("model_buffer_flags", 20, "uint32_t"),
            ("reserved", 24, "uint8_t[112]"),
        ],
    ),
    (
        "rknn_run_extend",
        24,
        [
            ("frame_id", 0, "uint64_t"),
            ("non_block", 8, "int32_t"),
            ("timeout_ms", 12, "int32_t"),
            ("fence_fd", 16, "int32_t"),
        ],
    ),
    ("rknn_output_extend", 8, [("frame_id", 0, "uint64_t")]),
    # ---- rknn_matmul_api.h ----
    (
        "rknn_quant_params",
        288,
        [
            ("name", 0, "char[256]"),
            ("scale", 256, "float*"),
            ("scale_len", 264, "int32_t"),
            ("zp", 272, "int32_t*"),
            ("zp_len", 280, "int32_t"),
        ],
    ),
    (
        "rknn_matmul_tensor_attr",
        332,
        [
            ("name", 0, "char[256]"),
            ("n_dims", 256, "uint32_t"),
            ("dims", 260, "uint32_t[16]"),
            ("size", 324, "uint32_t"),
            ("type", 328, "enum"),
        ],
    ),
    (
        "rknn_matmul_io_attr",
        996,
        [
            ("A", 0, "struct rknn_matmul_tensor_attr"),
            ("B", 332, "struct rknn_matmul_tensor_attr"),
            ("C", 664, "struct rknn_matmul_tensor_attr"),
        ],
    ),
    (
        "rknn_matmul_shape",
        12,
        [("M", 0, "int32_t"), ("K", 4, "int32_t"), ("N", 8, "int32_t")],
    ),
    (
        "rknn_matmul_info",
        64,
        [
            ("M", 0, "int32_t"),
            ("K", 4, "int32_t"),
            ("N", 8, "int32_t"),
            ("type", 12, "enum"),
            ("B_layout", 16, "int16_t"),
            ("B_quant_type", 18, "int16_t"),
            ("AC_layout", 20, "int16_t"),
            ("AC_quant_type", 22, "int16_t"),
            ("iommu_domain_id", 24, "int32_t"),
            ("group_size", 28, "int16_t"),
            ("reserved", 30, "int8_t[34]"),
        ],
    ),
    # ---- rknn_custom_op.h ----
    (
        "rknn_gpu_op_context",
        24,
        [
            ("cl_context", 0, "void*"),
            ("cl_command_queue", 8, "void*"),
            ("cl_kernel", 16, "void*"),
        ],
    ),
    (
        "rknn_custom_op_context",
        48,
        [
            ("target", 0, "enum"),
            ("internal_ctx", 8, "uint64_t"),
            ("gpu_ctx", 16, "struct rknn_gpu_op_context"),
            ("priv_data", 40, "void*"),
        ],
    ),
    (
        "rknn_custom_op_tensor",
        416,
        [
            ("attr", 0, "struct rknn_tensor_attr"),
            ("mem", 376, "struct rknn_tensor_mem"),
        ],
    ),
    (
        "rknn_custom_op_attr",
        272,
        [
            ("name", 0, "char[256]"),
            ("dtype", 256, "enum"),
            ("n_elems", 260, "uint32_t"),
            ("data", 264, "void*"),
        ],
    ),
    (
        "rknn_custom_op",
        832,
        [
            ("version", 0, "uint32_t"),
            ("target", 4, "enum"),
            ("op_type", 8, "char[256]"),
            ("cl_kernel_name", 264, "char[256]"),
            ("cl_kernel_source", 520, "char*"),
            ("cl_source_size", 528, "uint64_t"),
            ("cl_build_options", 536, "char[256]"),
            ("init", 792, "callback"),
            ("prepare", 800, "callback"),
            ("compute", 808, "callback"),
            ("compute_native", 816, "callback"),
            ("destroy", 824, "destroy_callback"),
        ],
    ),
]

_SCALARS: dict[str, type] = {
    "int8_t": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "int16_t": ctypes.c_int16,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "char": ctypes.c_char,
    "enum": ctypes.c_int,
}

_IDS = [name for name, _, _ in STRUCTS]


def _expected_ctype(spec: str) -> type:
    """Map a C type from the table to the ctypes type the declaration must use."""
    if spec.startswith("struct "):
        return getattr(S, spec.removeprefix("struct "))
    if spec == "callback":
        return S.rknn_custom_op_callback
    if spec == "destroy_callback":
        return S.rknn_custom_op_destroy_callback
    if spec in ("void*",):
        return ctypes.c_void_p
    if spec == "char*":
        return ctypes.c_char_p
    if spec.endswith("*"):
        return ctypes.POINTER(_SCALARS[spec[:-1]])
    m = re.fullmatch(r"(\w+)((?:\[\d+\])+)", spec)
    if m:
        base: type = _SCALARS[m.group(1)]
        dims = [int(d) for d in re.findall(r"\[(\d+)\]", m.group(2))]
        for d in reversed(dims):  # C a[X][Y] == (base * Y) * X
            base = base * d
        return base
    return _SCALARS[spec]


def test_table_covers_every_struct_in_all() -> None:
    declared = {
        n
        for n in S.__all__
        if isinstance(getattr(S, n), type) and issubclass(getattr(S, n), ctypes.Structure)
    }
    declared.discard("rknn_matmul_info_t")  # alias
    assert declared == set(_IDS)


@pytest.mark.parametrize(("name", "size", "fields"), STRUCTS, ids=_IDS)
def test_sizeof(name: str, size: int, fields: list[tuple[str, int, str]]) -> None:
    assert ctypes.sizeof(getattr(S, name)) == size


@pytest.mark.parametrize(("name", "size", "fields"), STRUCTS, ids=_IDS)
def test_field_order(name: str, size: int, fields: list[tuple[str, int, str]]) -> None:
    cls = getattr(S, name)
    assert [f[0] for f in cls._fields_] == [f[0] for f in fields]


@pytest.mark.parametrize(("name", "size", "fields"), STRUCTS, ids=_IDS)
def test_field_offsets(name: str, size: int, fields: list[tuple[str, int, str]]) -> None:
    cls = getattr(S, name)
    got = {fname: getattr(cls, fname).offset for fname, _, _ in fields}
    assert got == {fname: off for fname, off, _ in fields}


@pytest.mark.parametrize(("name", "size", "fields"), STRUCTS, ids=_IDS)
def test_field_ctypes(name: str, size: int, fields: list[tuple[str, int, str]]) -> None:
    cls = getattr(S, name)
    declared = dict(cls._fields_)
    for fname, _, spec in fields:
        exp = _expected_ctype(spec)
        got = declared[fname]
        if issubclass(exp, ctypes.Array):
            # Compare element type and length level by level (array types are not interned).
            while issubclass(exp, ctypes.Array):
                assert issubclass(got, ctypes.Array), fname
                assert got._length_ == exp._length_, fname
                exp, got = exp._type_, got._type_
        assert got is exp, f"{name}.{fname}: {got!r} != {exp!r} ({spec})"


def test_no_pack() -> None:
    for name in _IDS:
        assert not hasattr(getattr(S, name), "_pack_"), name


def test_basic_types() -> None:
    assert S.rknn_context is ctypes.c_uint64
    assert S.rknn_matmul_ctx is S.rknn_context
    assert S.rknn_custom_op_interal_context is ctypes.c_uint64
    assert S.rknn_matmul_info_t is S.rknn_matmul_info
    for enum_t in (
        S.rknn_query_cmd,
        S.rknn_tensor_type,
        S.rknn_tensor_qnt_type,
        S.rknn_tensor_format,
        S.rknn_core_mask,
        S.rknn_tensor_mem_flags,
        S.rknn_mem_alloc_flags,
        S.rknn_mem_sync_mode,
        S.rknn_matmul_quant_type,
        S.rknn_matmul_type,
        S.rknn_matmul_layout,
        S.rknn_target_type,
    ):
        assert enum_t is ctypes.c_int
        assert ctypes.sizeof(enum_t) == 4


def test_dyn_range_layout() -> None:
    """dyn_range is [512][16]: shape s, dim d lives at 268 + (s * 16 + d) * 4."""
    r = S.rknn_input_range()
    assert len(r.dyn_range) == 512
    assert len(r.dyn_range[0]) == 16
    r.dyn_range[3][5] = 0xABCD
    raw = (ctypes.c_uint32 * (512 * 16)).from_buffer(r, S.rknn_input_range.dyn_range.offset)
    assert raw[3 * 16 + 5] == 0xABCD


def test_callback_signatures() -> None:
    cb = S.rknn_custom_op_callback
    assert cb._restype_ is ctypes.c_int
    assert cb._argtypes_ == (
        ctypes.POINTER(S.rknn_custom_op_context),
        ctypes.POINTER(S.rknn_custom_op_tensor),
        ctypes.c_uint32,
        ctypes.POINTER(S.rknn_custom_op_tensor),
        ctypes.c_uint32,
    )
    d = S.rknn_custom_op_destroy_callback
    assert d._restype_ is ctypes.c_int
    assert d._argtypes_ == (ctypes.POINTER(S.rknn_custom_op_context),)
    g = S.get_custom_op_func
    assert g._restype_ is ctypes.POINTER(S.rknn_custom_op)
    assert g._argtypes_ == ()


def test_callback_roundtrip() -> None:
    """A Python callback stored in rknn_custom_op is callable through the struct field."""
    seen: list[tuple[int, int]] = []

    def compute(ctx, inputs, n_in, outputs, n_out):
        seen.append((n_in, n_out))
        return 0

    op = S.rknn_custom_op()
    op.op_type = b"cstSoftmax"
    op.compute = S.rknn_custom_op_callback(compute)
    ctx = S.rknn_custom_op_context()
    tin = (S.rknn_custom_op_tensor * 2)()
    tout = (S.rknn_custom_op_tensor * 1)()
    assert op.compute(ctypes.byref(ctx), tin, 2, tout, 1) == 0
    assert seen == [(2, 1)]
    assert op.op_type == b"cstSoftmax"
    assert not op.init  # NULL function pointer
