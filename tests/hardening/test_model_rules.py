"""Issue 11 items 1 and 3-6: crafted model files that rknn_init must refuse with
RKNN_ERR_MODEL_INVALID and one `E RKNN:` line (each passed init, printed to stdout or failed
later before the rules in rknnrt/model/)."""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
import sys
import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rknnrt as rk
from rknnrt.model import container

from .conftest import init_status, rebuild, run_once

INVALID = rk.RKNN_ERR_MODEL_INVALID


def _one_error(rknn_log, pattern: str) -> None:
    errors = rknn_log.take("E")
    assert len(errors) == 1, errors
    assert re.search(pattern, errors[0]), errors[0]


# -- 1. external data -----------------------------------------------------------------------


def _point_first_weight_at(location: str):
    def edit(model: onnx.ModelProto) -> None:
        tensor = next(t for t in model.graph.initializer if t.external_data)
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
            elif entry.key == "offset":
                entry.value = "0"

    return edit


@pytest.mark.parametrize("location", ["secret.txt", ".env", "sub/x", "/etc/hostname"])
def test_external_data_reference_is_refused(default_model_bytes, tmp_path, monkeypatch,
                                            rknn_log, location) -> None:  # fmt: skip
    (tmp_path / "sub").mkdir()
    for name in ("secret.txt", ".env", "sub/x"):
        (tmp_path / name).write_bytes(b"SECRET!!" * 4096)
    monkeypatch.chdir(tmp_path)
    blob = rebuild(default_model_bytes, graph=_point_first_weight_at(location))
    rknn_log.clear()
    assert init_status(blob) == INVALID
    _one_error(rknn_log, r"external data|keeps all data inside")
    path = tmp_path / "model.rknn"
    path.write_bytes(blob)
    assert init_status(str(path)) == INVALID


def test_external_data_in_a_constant_node_is_refused(default_model_bytes, tmp_path,
                                                     monkeypatch, rknn_log) -> None:  # fmt: skip
    (tmp_path / "secret.txt").write_bytes(np.arange(10, dtype=np.float32).tobytes())
    monkeypatch.chdir(tmp_path)

    def edit(model: onnx.ModelProto) -> None:
        value = helper.make_tensor("leak", TensorProto.FLOAT, [10], [0.0] * 10)
        value.ClearField("float_data")
        value.data_location = TensorProto.EXTERNAL
        for key, val in (("location", "secret.txt"), ("offset", "0"), ("length", "40")):
            entry = value.external_data.add()
            entry.key, entry.value = key, val
        model.graph.node.insert(0, helper.make_node("Constant", [], ["leak"], value=value))

    rknn_log.clear()
    assert init_status(rebuild(default_model_bytes, graph=edit)) == INVALID
    _one_error(rknn_log, r"external data")


def test_weights_reference_must_be_a_metadata_weight(default_model_bytes, rknn_log) -> None:
    def rename(model: onnx.ModelProto) -> None:  # '@weights', but no weight spec of that name
        tensor = next(t for t in model.graph.initializer if t.external_data)
        old = tensor.name
        tensor.name = "stranger"
        for node in model.graph.node:
            node.input[:] = ["stranger" if i == old else i for i in node.input]

    rknn_log.clear()
    assert init_status(rebuild(default_model_bytes, graph=rename)) == INVALID
    _one_error(rknn_log, r"not a weight of the metadata")


# -- 3. nothing on stdout -------------------------------------------------------------------

_STDOUT_CHILD = """
import ctypes, sys
import rknnrt as rk
blob = open(sys.argv[1], "rb").read()
ctx = rk.rknn_context()
rc = rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None)
sys.stderr.write(f"STATUS {rc}\\n")
"""


def test_invalid_utf8_in_the_graph_prints_nothing(default_model_bytes, tmp_path) -> None:
    def edit(model: onnx.ModelProto) -> None:
        model.graph.node[0].name = "NAMEMARK"

    blob = rebuild(default_model_bytes, graph=edit)
    sections = container.read(memoryview(blob))
    graph = bytes(sections.graph).replace(b"NAMEMARK", b"NAM\xff\xfeARK")
    blob = container.write(bytes(sections.metadata), graph, bytes(sections.weights))
    path = tmp_path / "utf8.rknn"
    path.write_bytes(blob)
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "RKNNRT_KEEP_PRIORITY": "1"}
    done = subprocess.run([sys.executable, "-c", _STDOUT_CHILD, str(path)], capture_output=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.stdout == b"", done.stdout[:500]
    assert f"STATUS {INVALID}".encode() in done.stderr, done.stderr[-2000:]
    assert b"not valid UTF-8" in done.stderr


# -- 4. weights digest and section layout ---------------------------------------------------


def _header(blob: bytes) -> list[int]:
    return list(struct.unpack_from("<8sIIQIIQIIQQII", blob))


def _with_header(blob: bytes, **fields: int) -> bytes:
    """`blob` with header fields changed and the header CRC written again."""
    names = ["magic", "version", "header_size", "meta_off", "meta_size", "meta_crc",
             "graph_off", "graph_size", "graph_crc", "weights_off", "weights_size",
             "weights_crc", "header_crc"]  # fmt: skip
    values = _header(blob)
    for key, value in fields.items():
        values[names.index(key)] = value
    head = bytearray(struct.pack("<8sIIQIIQIIQQII", *values) + blob[72:128])
    struct.pack_into("<I", head, 68, zlib.crc32(head[72:128], zlib.crc32(head[:68])))
    return bytes(head) + blob[128:]


def test_flipped_weight_bit_is_refused(default_model_bytes, rknn_log) -> None:
    values = _header(default_model_bytes)
    weights_off = values[9]
    for where in (0, values[10] // 2, values[10] - 1):
        blob = bytearray(default_model_bytes)
        blob[weights_off + where] ^= 0x10
        rknn_log.clear()
        assert init_status(bytes(blob)) == INVALID
        _one_error(rknn_log, r"weights section checksum mismatch")


def test_zero_copy_checks_the_weights_too(default_model_bytes, rknn_log) -> None:
    blob = bytearray(default_model_bytes)
    blob[_header(default_model_bytes)[9] + 5] ^= 0x01
    buf = np.frombuffer(bytes(blob), np.uint8)
    ext = rk.rknn_init_extend()
    rknn_log.clear()
    flag = rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY
    assert init_status(buf, flag, ext) == INVALID
    _one_error(rknn_log, r"weights section checksum")


def test_overlapping_and_misaligned_sections_are_refused(default_model_bytes, rknn_log) -> None:
    values = _header(default_model_bytes)
    graph_off, weights_off = values[6], values[9]
    cases = {
        "graph over metadata": _with_header(default_model_bytes, graph_off=128),
        "weights over graph": _with_header(default_model_bytes, weights_off=graph_off),
        "misaligned weights": _with_header(default_model_bytes, weights_off=weights_off - 8),
        "metadata in header": _with_header(default_model_bytes, meta_off=64),
    }
    for what, blob in cases.items():
        rknn_log.clear()
        assert init_status(blob) == INVALID, what
        _one_error(rknn_log, r"overlap|not a multiple of 64|outside")


def test_header_edit_is_refused(default_model_bytes, rknn_log) -> None:
    blob = bytearray(default_model_bytes)
    blob[56] ^= 0x01  # weights size, header CRC not updated
    rknn_log.clear()
    assert init_status(bytes(blob)) == INVALID
    _one_error(rknn_log, r"header checksum")


def _as_version_1(blob: bytes, sha256: str | None = None) -> bytes:
    """The same model in the version 1 layout (64-byte header, SHA-256 in the metadata)."""
    sections = container.read(memoryview(blob))
    meta = bytes(sections.metadata)
    if sha256 is not None:
        meta = re.sub(rb'"weights_sha256":"[0-9a-f]*"', f'"weights_sha256":"{sha256}"'.encode(),
                      meta)  # fmt: skip
    graph, weights = bytes(sections.graph), bytes(sections.weights)
    pad = lambda n: -n % 64  # noqa: E731
    meta_off = 64
    graph_off = meta_off + len(meta) + pad(meta_off + len(meta))
    weights_off = graph_off + len(graph) + pad(graph_off + len(graph))
    out = bytearray(struct.pack("<8sIIQIIQIIQQ", container.MAGIC, 1, 64, meta_off, len(meta),
                                zlib.crc32(meta), graph_off, len(graph), zlib.crc32(graph),
                                weights_off, len(weights)))  # fmt: skip
    for off, data in ((meta_off, meta), (graph_off, graph), (weights_off, weights)):
        out += bytes(off - len(out)) + data
    return bytes(out)


def test_version_1_files_are_checked_with_their_sha256(default_model_bytes, rknn_log) -> None:
    x = np.random.RandomState(3).rand(1, 64, 64, 3).astype(np.float32) * 255
    old = _as_version_1(default_model_bytes)
    np.testing.assert_array_equal(run_once(old, x), run_once(default_model_bytes, x))
    rknn_log.clear()
    assert init_status(_as_version_1(default_model_bytes, sha256="0" * 64)) == INVALID
    _one_error(rknn_log, r"weights section checksum mismatch")


# -- 5. metadata ranges ---------------------------------------------------------------------


def _set(path: str, value):
    def edit(raw: dict) -> None:
        keys = path.split(".")
        node = raw
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        node[int(last) if isinstance(node, list) else last] = value

    return edit


METADATA_CASES = {
    "std of 0": (_set("inputs.0.std", [58.0, 0.0, 57.0]), r"std"),
    "mean of the wrong length": (_set("inputs.0.mean", [1.0, 2.0]), r"mean has 2 values"),
    "negative dim": (_set("inputs.0.shape", [1, -3, 64, 64]), r"non-negative|non-positive"),
    "zero dim": (_set("outputs.0.shape", [1, 0]), r"non-positive"),
    "huge shape": (_set("inputs.0.shape", [1, 3, 1 << 20, 1 << 20]), r"exceeds"),
    "int8: zero point outside int8": (_set("inputs.0.zp", 300), r"zero point 300"),
    "int8: zero scale": (_set("inputs.0.scale", 0), r"scale 0"),
    "huge weight offset": (_set("weights.0.offset", 1 << 62), r"outside|offset"),
    "negative weight offset": (_set("weights.0.offset", -64), r"invalid dtype, offset"),
    "misaligned weight": (_set("weights.0.offset", 4), r"not aligned"),
    "huge internal size": (_set("memory.internal_size", 1 << 40), r"internal size"),
    "planned tensor outside": (_set("memory.tensors.0.offset", 1 << 33), r"internal memory"),
    "huge batch": (_set("rknn_batch_size", 1 << 40), r"rknn_batch_size"),
}


@pytest.mark.parametrize("case", list(METADATA_CASES))
def test_metadata_out_of_range_is_refused(default_model_bytes, three_models, rknn_log,
                                          case) -> None:  # fmt: skip
    edit, pattern = METADATA_CASES[case]
    base = three_models["int8"] if case.startswith("int8:") else default_model_bytes
    assert init_status(base) == rk.RKNN_SUCC
    blob = rebuild(base, meta=edit)
    rknn_log.clear()
    assert init_status(blob) == INVALID
    _one_error(rknn_log, pattern)


@pytest.mark.parametrize(
    ("raw", "pattern"),
    [
        (b"[" * 100000 + b"]" * 100000, r"nested too deeply"),
        (b'{"a":' + b"9" * 5000 + b"}", r"too large"),
        (b'{"a":NaN}', r"NaN"),
        (b'{"a":1e999}', r"out of range"),
    ],
    ids=["deep nesting", "enormous integer", "NaN", "infinite number"],
)
def test_hostile_json_is_refused(default_model_bytes, rknn_log, raw, pattern) -> None:
    rknn_log.clear()
    assert init_status(rebuild(default_model_bytes, raw_meta=raw)) == INVALID
    _one_error(rknn_log, pattern)


# -- 6. node attributes ---------------------------------------------------------------------


def _conv_attribute(name: str, value):
    def edit(model: onnx.ModelProto) -> None:
        conv = next(n for n in model.graph.node if n.op_type == "Conv")
        for attr in list(conv.attribute):
            if attr.name == name:
                conv.attribute.remove(attr)
        conv.attribute.append(helper.make_attribute(name, value))

    return edit


@pytest.mark.parametrize(
    ("name", "value", "pattern"),
    [
        ("group", 2, r"groups|channels"),
        ("group", 0, r"group 0"),
        ("kernel_shape", [5, 5], r"kernel_shape"),
    ],  # fmt: skip
)
def test_invalid_conv_attributes_fail_at_init(default_model_bytes, rknn_log, name, value,
                                              pattern) -> None:  # fmt: skip
    blob = rebuild(default_model_bytes, graph=_conv_attribute(name, value))
    rknn_log.clear()
    assert init_status(blob) == INVALID
    _one_error(rknn_log, pattern)


def test_valid_model_still_runs(default_model_bytes, reference) -> None:
    x = np.random.RandomState(0).rand(1, 64, 64, 3).astype(np.float32) * 255
    np.testing.assert_allclose(run_once(default_model_bytes, x), reference(x).ravel(),
                               rtol=1e-4, atol=1e-6)  # fmt: skip
    assert ctypes  # the helpers use ctypes
