"""Malformed vendor files: one RKNN_ERR_MODEL_INVALID line, never a crash; literal parsing and
weight unpacking on their own."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.model import container
from rknnrt.model.vendor_rknn import fileformat, literal, rebuild, weights
from rknnrt.model.vendor_rknn.flatbuf import VendorFormatError

from .vendor_data import FIXTURES, STEMS, model_bytes


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    kind = rng.integers(5)
    if kind == 0:  # truncate
        return bytes(buf[: int(rng.integers(0, len(buf)))])
    if kind == 1:  # flip bytes anywhere
        for at in rng.integers(0, len(buf), int(rng.integers(1, 16))):
            buf[at] ^= int(rng.integers(1, 256))
    elif kind == 2:  # an offset-sized hostile value inside the FlatBuffer
        at = int(rng.integers(64, len(buf) - 4))
        struct.pack_into("<I", buf, at, int(rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 1 << 20,
                                                         int(rng.integers(1 << 32))])))  # fmt: skip
    elif kind == 3:  # header fields
        field = int(rng.choice([8, 16]))
        struct.pack_into("<Q", buf, field, int(rng.integers(0, 1 << 63)))
    else:  # a run of random bytes
        at = int(rng.integers(64, len(buf) - 64))
        buf[at : at + 64] = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
    return bytes(buf)


def _fuzz(cases: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    originals = [model_bytes(s) for s in STEMS]
    ok = refused = 0
    for _ in range(cases):
        data = _mutate(originals[int(rng.integers(len(originals)))], rng)
        try:
            container.read(memoryview(data))
            ok += 1
        except container.ModelFormatError as exc:
            assert "\n" not in str(exc)
            refused += 1
    return ok, refused


def test_fuzzed_vendor_files_are_read_or_refused() -> None:
    ok, refused = _fuzz(300, seed=14)
    assert refused > 100 and ok + refused == 300


@pytest.mark.slow
def test_fuzzed_vendor_files_are_read_or_refused_many() -> None:
    ok, refused = _fuzz(4000, seed=1414)
    assert ok + refused == 4000


def test_fuzzed_files_through_rknn_init_give_model_invalid(capi, rknn_log) -> None:
    rng = np.random.default_rng(7)
    data = model_bytes("residual_rk3588_i8")
    for _ in range(25):
        bad = _mutate(data, rng)
        ctx = rk.rknn_context()
        rc = capi(rk.rknn_init, ctx, bad, len(bad), 0, None)
        errors = rknn_log.take("E")
        if rc == rk.RKNN_SUCC:
            assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
        else:
            assert rc == rk.RKNN_ERR_MODEL_INVALID and len(errors) == 1, errors


_MINI = b"RKNN\0\0\0\0" + struct.pack("<QQ", 0x1004, 8) + bytes(48)


@pytest.mark.parametrize("bad", [b"RKNN", b"RKNN" + bytes(60), _MINI])
def test_short_or_foreign_vendor_headers(bad: bytes) -> None:
    with pytest.raises(VendorFormatError):
        container.read(memoryview(bad))


def test_mini_format_is_named() -> None:
    bad = b"RKNN\0\0\0\0" + struct.pack("<QQ", 0x1004, 8) + bytes(48)
    with pytest.raises(VendorFormatError, match="mini"):
        container.read(memoryview(bad))


def test_generator_literal_is_parsed_never_evaluated() -> None:
    assert literal.parse_dict("{'a': [1, 2.5, 'x'], 'b': {'c': None}}") == {
        "a": [1, 2.5, "x"], "b": {"c": None}}  # fmt: skip
    for hostile in ("__import__('os').system('true')", "{'a': (lambda: 1)()}",
                    "[" * 200 + "]" * 200, "{'a': " + "1" * (2 << 20) + "}", "[1, 2]"):  # fmt: skip
        with pytest.raises(VendorFormatError):
            literal.parse_dict(hostile)
    assert literal.parse_dict("{'s': '[[[[[[[[[[[[[[[[[[[[[['}") == {"s": "[" * 22}


def _pack(w: np.ndarray, oc2: int, ic2: int) -> tuple[bytes, list[int]]:
    """Pack [oc, ic, kh, kw] into one [OC1, IC1, KH, KW, OC2, IC2] tile, zero-padded."""
    oc, ic, kh, kw = w.shape
    oc1, ic1 = -(-oc // oc2), -(-ic // ic2)
    full = np.zeros((oc1 * oc2, ic1 * ic2, kh, kw), w.dtype)
    full[:oc, :ic] = w
    tile = full.reshape(oc1, oc2, ic1, ic2, kh, kw).transpose(0, 2, 4, 5, 1, 3)
    return tile.tobytes(), [oc1, ic1, kh, kw, oc2, ic2]


def test_unpack_inverts_the_npu_packing() -> None:
    w = np.arange(5 * 7 * 3 * 2, dtype=np.int8).reshape(5, 7, 3, 2)
    raw, native = _pack(w, 16, 16)
    np.testing.assert_array_equal(weights.unpack(raw, "int8", native, 5, 7, 3, 2, "w"), w)


def test_unpack_walks_output_and_input_tiles() -> None:
    """rk3566 float16 tiles a [13, 20] Gemm as (8 x 16), (8 x 4), (5 x 16), (5 x 4)."""
    w = np.random.default_rng(0).standard_normal((13, 20, 1, 1)).astype(np.float16)
    parts, native = [], []
    for o0, o1 in ((0, 8), (8, 13)):
        for i0, i1 in ((0, 16), (16, 20)):
            raw, tile = _pack(w[o0:o1, i0:i1], o1 - o0, i1 - i0)
            parts.append(raw)
            native += tile
    got = weights.unpack(b"".join(parts), "float16", native, 13, 20, 1, 1, "g")
    np.testing.assert_array_equal(got, w)


def test_unpack_refuses_what_does_not_fit() -> None:
    raw, native = _pack(np.ones((4, 4, 1, 1), np.int8), 16, 16)
    with pytest.raises(VendorFormatError, match="packing"):
        weights.unpack(raw, "int8", native[:5], 4, 4, 1, 1, "w")
    with pytest.raises(VendorFormatError):
        weights.unpack(raw, "int8", native, 40, 40, 1, 1, "w")


def test_unverified_npu_format_is_refused_by_name() -> None:
    """A file of an NPU generation whose packing no fixture verified (here rk3588's file with
    its format string patched to an unknown `RKNPU z9`) fails instead of running guessed
    weights."""
    data = bytearray(model_bytes("convpool_rk3588_i8"))
    at = data.index(b"RKNPU v2")
    data[at : at + 8] = b"RKNPU z9"
    with pytest.raises(VendorFormatError, match="int8 weight packing .*RKNPU z9.*not verified"):
        container.read(memoryview(bytes(data)))


def test_dynamic_shape_build_with_shape_dependent_ops_is_refused_by_name(
    capi, rknn_log, monkeypatch
) -> None:
    """A dynamic-shape file runs its first graph at every set's shapes, so a graph holding an
    op whose rebuilt form depends on the shapes (Reshape, Transpose, ...) is refused; the
    fixture has none, so Conv is declared shape-dependent here."""
    monkeypatch.setattr(rebuild, "shape_free", lambda op: op not in ("Conv", "ConvRelu"))
    data = (FIXTURES / "dynamic_wide_rk3588_fp16.rknn").read_bytes()
    ctx = rk.rknn_context()
    assert capi(rk.rknn_init, ctx, data, len(data), 0, None) == rk.RKNN_ERR_MODEL_INVALID
    (line,) = rknn_log.take("E")
    assert "dynamic_shape" in line and "not supported" in line
    # the build's two shape sets (config dynamic_input), one graph each, in stored order
    assert "2 input shape sets: [1,8,16,16] | [1,8,10,11]" in line
    assert "['Conv', 'ConvRelu']" in line


def test_shape_sets_of_static_and_dynamic_files() -> None:
    static = fileformat.parse(memoryview((FIXTURES / "twoinput_rk3588_i8.rknn").read_bytes()))
    assert static.input_shape_sets == [[[1, 3, 8, 8], [1, 16]]]
    dynamic = fileformat.parse(
        memoryview((FIXTURES / "dynamic_wide_rk3588_fp16.rknn").read_bytes())
    )
    assert dynamic.shape_mode == "dynamic_shape"
    assert dynamic.input_shape_sets == [[[1, 8, 16, 16]], [[1, 8, 10, 11]]]
    assert dynamic.output_shape_sets == [[[1, 6, 16, 16]], [[1, 6, 10, 11]]]
