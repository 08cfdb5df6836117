"""The model file: layout, round trip and every way a file can be malformed."""

from __future__ import annotations

import json
import struct
import zlib

import onnx
import pytest

from rknnrt.model import container
from rknnrt.model.meta import MemoryPlan, ModelMeta, TensorSpec, WeightSpec


def _meta(**changes: object) -> ModelMeta:
    meta = ModelMeta(
        target_platform="rk3588",
        inputs=[TensorSpec("x", [1, 3, 4, 4], "float32", "NCHW", mean=[0, 0, 0], std=[1, 1, 1])],
        outputs=[TensorSpec("y", [1, 8], "float32", "UNDEFINED")],
        weights=[WeightSpec("w", "float32", [2, 2], 64, 16)],
        memory=MemoryPlan(weight_size=80),
    )
    for key, value in changes.items():
        setattr(meta, key, value)
    return meta


GRAPH = onnx.ModelProto(producer_name="g").SerializeToString()  # a valid, empty graph


def test_layout_is_as_documented() -> None:
    blob = container.write(b'{"a":1}', GRAPH, b"W" * 100)
    magic, version, header_size, meta_off, meta_size, meta_crc = struct.unpack_from(
        "<8sIIQII", blob
    )
    assert (magic, version, header_size) == (b"rknnrt\0\0", 2, 128)
    assert (meta_off, meta_size, meta_crc) == (128, 7, zlib.crc32(b'{"a":1}'))
    graph_off, graph_size, graph_crc, weights_off, weights_size = struct.unpack_from(
        "<QIIQQ", blob, 32
    )
    assert (graph_off, graph_size, graph_crc) == (192, len(GRAPH), zlib.crc32(GRAPH))
    assert (weights_off, weights_size) == (256, 100)
    weights_crc, header_crc = struct.unpack_from("<II", blob, 64)
    assert weights_crc == zlib.crc32(b"W" * 100)
    assert header_crc == zlib.crc32(blob[72:128], zlib.crc32(blob[:68]))
    assert len(blob) == 356 and blob[256:] == b"W" * 100 and blob[72:128] == bytes(56)
    sections = container.read(memoryview(blob))
    assert bytes(sections.metadata) == b'{"a":1}' and bytes(sections.graph) == GRAPH
    assert bytes(sections.weights) == b"W" * 100


@pytest.mark.parametrize(
    ("blob", "pattern"),
    [
        (b"", "too small"),
        (b"RKNN" + bytes(60), "vendor .rknn model"),
        (b"\x01" * 64, "invalid rknn model magic"),
        (container.MAGIC + struct.pack("<I", 7) + bytes(52), "Invalid RKNN model version 7"),
    ],
)
def test_bad_headers(blob: bytes, pattern: str) -> None:
    with pytest.raises(container.ModelFormatError, match=pattern):
        container.read(memoryview(blob))


def test_truncation_anywhere_is_detected() -> None:
    blob = container.write(b"M" * 10, b"G" * 70, b"W" * 130)
    for cut in range(len(blob)):
        with pytest.raises(container.ModelFormatError):
            container.read(memoryview(blob[:cut]))


def test_checksums_catch_corruption() -> None:
    blob = bytearray(container.write(b"M" * 10, GRAPH, b"W" * 30))
    cases = [(128 + 3, "metadata section checksum"), (192 + 1, "graph section checksum"),
             (256 + 7, "weights section checksum"), (20, "header checksum")]  # fmt: skip
    for offset, pattern in cases:
        blob[offset] ^= 0xFF
        with pytest.raises(container.ModelFormatError, match=pattern):
            container.read(memoryview(bytes(blob)))
        blob[offset] ^= 0xFF
    container.read(memoryview(bytes(blob)))


def test_meta_round_trip() -> None:
    meta = _meta(custom_string="RGB")
    again = ModelMeta.from_json(meta.to_json(), weights_size=80)
    assert again == meta


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d.pop("inputs"), "lacks 'inputs'"),
        (lambda d: d.update(inputs=[]), "at least one input"),
        (lambda d: d["inputs"][0].update(dtype="float128"), "unknown dtype"),
        (lambda d: d["inputs"][0].update(shape=[1, -3]), "non-negative integers"),
        (lambda d: d["inputs"][0].update(shape=[1] * 17), "1 to 16 dims"),
        (lambda d: d["outputs"][0].update(zp="0"), "wrong type"),
        (lambda d: d["weights"][0].update(offset=70), "outside the 80-byte weights"),
        (lambda d: d["weights"][0].update(nbytes=12), "has 12 bytes, its shape"),
        (lambda d: d["memory"].update(weight_size=64), "weight_size 64 differs from the 80"),
        (lambda d: d.update(remove_weight=1), "wrong type"),
        (lambda d: d["memory"].update(tensors=[{"name": "t"}]), "lacks 'offset'"),
    ],
)
def test_meta_validation(mutate, pattern: str) -> None:
    raw = json.loads(_meta().to_json())
    mutate(raw)
    with pytest.raises(container.ModelFormatError, match=pattern):
        ModelMeta.from_json(json.dumps(raw).encode(), weights_size=80)


def test_meta_not_json() -> None:
    with pytest.raises(container.ModelFormatError, match="not valid JSON"):
        ModelMeta.from_json(b"\xff\xfe", weights_size=0)


def test_metadata_json_is_that_of_asdict() -> None:
    """ModelMeta.to_json walks its dataclasses without dataclasses.asdict's deep copies: the
    same JSON, every field kind included."""
    import dataclasses
    import json

    from rknnrt.model.meta import MemoryPlan, ModelMeta, PlannedTensor, TensorSpec, WeightSpec

    meta = ModelMeta(
        target_platform="rk3588",
        inputs=[TensorSpec("x", [1, 3, 4, 4], "float32", "NCHW", mean=[0.5, 1.0, 0.0],
                           std=[2.0, 1.0, 4.0])],
        outputs=[TensorSpec("y", [1, 8], "int8", "UNDEFINED", "AFFINE", -3, 0.25)],
        weights=[WeightSpec("w", "float16", [8, 3], 64, 48)],
        memory=MemoryPlan(112, 256, [PlannedTensor("t", 0, 128)]),
        float_dtype="int8", custom_string="c", input_shape_sets=[[[1, 3, 4, 4]]],
        output_shape_sets=[[[1, 8]]])  # fmt: skip
    want = json.dumps(dataclasses.asdict(meta), separators=(",", ":"), sort_keys=True).encode()
    assert meta.to_json() == want
    assert ModelMeta.from_json(want, 112) == meta
