"""The rknnrt model file: a fixed header, a JSON metadata section, a graph and a weights section.

Layout of format version 2 (little-endian; see docs/model-format.md):

    offset size  field
    0      8     magic b"rknnrt\\0\\0" (distinct from the vendor's b"RKNN")
    8      4     u32 format version (FORMAT_VERSION)
    12     4     u32 header size (128; version 1 files have a 64-byte header ending at 64)
    16     8     u64 metadata offset      24  4  u32 metadata size      28  4  u32 metadata CRC-32
    32     8     u64 graph offset         40  4  u32 graph size         44  4  u32 graph CRC-32
    48     8     u64 weights offset       56  8  u64 weights size
    64     4     u32 weights CRC-32       68  4  u32 header CRC-32 (bytes 0-67 and 72-127)
    72     56    reserved, zero

Every section starts on a 64-byte boundary after the header, lies inside the file and overlaps
no other. Every section is checksummed: the weights' CRC-32 is verified at init, also for
MODEL_BUFFER_ZERO_COPY (one read pass; zlib's CRC-32 is the fastest digest in the standard
library, benchmarks/model_digest.py). Version 1 files carry no weights CRC; their metadata's
SHA-256 of the weights is verified instead. Nothing here is ever executed or unpickled.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass, field

from . import custom_ops, graph_rules, vendor_rknn
from .errors import ModelFormatError, VendorFormatError
from .meta import load_json

__all__ = ["ModelFormatError", "VendorFormatError", "Sections", "read", "write"]

MAGIC = b"rknnrt\0\0"
VENDOR_MAGIC = b"RKNN"
FORMAT_VERSION = 2
VENDOR_FORMAT_VERSION = 6  # Sections.version of a vendor .rknn file
HEADER_SIZE = 128
V1_HEADER_SIZE = 64
ALIGN = 64
MAX_METADATA = 64 << 20  # bytes of JSON; a real model's metadata is kilobytes
_SECTIONS = struct.Struct("<8sIIQIIQIIQQ")  # the first 64 bytes, shared by versions 1 and 2
_V2_TAIL = struct.Struct("<II56s")  # weights CRC-32, header CRC-32, reserved
assert _SECTIONS.size == V1_HEADER_SIZE and _SECTIONS.size + _V2_TAIL.size == HEADER_SIZE


@dataclass(frozen=True)
class Sections:
    """Views into one model buffer; no section is copied."""

    version: int
    metadata: memoryview
    graph: memoryview
    weights: memoryview
    # name -> (offset, length) of every graph constant stored in the weights section
    external: dict[str, tuple[int, int]] = field(default_factory=dict)


def _pad(n: int) -> int:
    return -n % ALIGN


def _header_crc(header: bytes | memoryview) -> int:
    return zlib.crc32(header[72:HEADER_SIZE], zlib.crc32(header[:68]))


def write(metadata: bytes, graph: bytes, weights: bytes) -> bytes:
    """Assemble a model file (format version 2) from its three sections."""
    meta_off = HEADER_SIZE
    graph_off = meta_off + len(metadata) + _pad(meta_off + len(metadata))
    weights_off = graph_off + len(graph) + _pad(graph_off + len(graph))
    header = bytearray(_SECTIONS.pack(
        MAGIC, FORMAT_VERSION, HEADER_SIZE,
        meta_off, len(metadata), zlib.crc32(metadata),
        graph_off, len(graph), zlib.crc32(graph),
        weights_off, len(weights),
    ) + _V2_TAIL.pack(zlib.crc32(weights), 0, bytes(56)))  # fmt: skip
    struct.pack_into("<I", header, 68, _header_crc(header))
    out = header
    for off, data in ((meta_off, metadata), (graph_off, graph), (weights_off, weights)):
        out += bytes(off - len(out))
        out += data
    return bytes(out)


def _check_layout(spans: list[tuple[str, int, int]], header_size: int, total: int) -> None:
    """Sections aligned, after the header, inside the file and disjoint."""
    for what, off, size in spans:
        if off % ALIGN:
            raise ModelFormatError(f"{what} section offset {off} is not a multiple of {ALIGN}")
        if off < header_size or off + size > total:
            raise ModelFormatError(
                f"{what} section [{off}, {off + size}) lies outside the {total}-byte model "
                "(truncated or corrupted file)"
            )
    used = sorted((off, off + size, what) for what, off, size in spans if size)
    for (_, end, first), (start, _, second) in zip(used, used[1:]):
        if start < end:
            raise ModelFormatError(f"the {first} and {second} sections overlap (corrupted file)")


def _check_v1_weights(metadata: memoryview, weights: memoryview) -> None:
    """Version 1: the weights are checked against the metadata's SHA-256 (slower than v2)."""
    raw = load_json(metadata)
    digest = raw.get("weights_sha256") if isinstance(raw, dict) else None
    if len(weights) and digest != hashlib.sha256(weights).hexdigest():
        raise ModelFormatError("weights section checksum mismatch (corrupted file)")


def read(buf: memoryview) -> Sections:
    """Validate the header and return views of the sections; ModelFormatError if malformed."""
    buf = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    if len(buf) >= 4 and bytes(buf[:4]) == VENDOR_MAGIC:
        metadata, graph, weights = vendor_rknn.to_sections(buf)
        # the rebuilt graph passes the same rules as an rknnrt file's
        external = graph_rules.check_graph(graph)
        return Sections(VENDOR_FORMAT_VERSION, memoryview(metadata), memoryview(graph),
                        memoryview(weights), external)  # fmt: skip
    if len(buf) < V1_HEADER_SIZE:
        raise ModelFormatError(
            f"model is too small: {len(buf)} bytes < {V1_HEADER_SIZE}-byte header"
        )
    (magic, version, header_size, meta_off, meta_size, meta_crc, graph_off, graph_size,
     graph_crc, weights_off, weights_size) = _SECTIONS.unpack_from(buf, 0)  # fmt: skip
    if magic != MAGIC:
        raise ModelFormatError("invalid rknn model magic: not an rknnrt model file")
    if version not in (1, FORMAT_VERSION):
        raise ModelFormatError(
            f"Invalid RKNN model version {version}: this runtime reads versions 1 and "
            f"{FORMAT_VERSION}"
        )
    want_header = HEADER_SIZE if version == FORMAT_VERSION else V1_HEADER_SIZE
    if header_size != want_header:
        raise ModelFormatError(f"invalid header size {header_size} for format version {version}")
    if len(buf) < header_size:
        raise ModelFormatError(f"model is truncated: {len(buf)} bytes < {header_size}-byte header")
    weights_crc = 0
    if version == FORMAT_VERSION:
        weights_crc, header_crc, reserved = _V2_TAIL.unpack_from(buf, V1_HEADER_SIZE)
        if header_crc != _header_crc(buf[:HEADER_SIZE]):
            raise ModelFormatError("header checksum mismatch (corrupted file)")
        if any(reserved):
            raise ModelFormatError("reserved header bytes are not zero")
    if meta_size > MAX_METADATA:
        raise ModelFormatError(f"metadata section of {meta_size} bytes exceeds {MAX_METADATA}")
    spans = [("metadata", meta_off, meta_size), ("graph", graph_off, graph_size),
             ("weights", weights_off, weights_size)]  # fmt: skip
    _check_layout(spans, header_size, len(buf))
    metadata, graph, weights = (buf[off : off + size] for _, off, size in spans)
    for what, view, crc in (("metadata", metadata, meta_crc), ("graph", graph, graph_crc)):
        if zlib.crc32(view) != crc:
            raise ModelFormatError(f"{what} section checksum mismatch (corrupted file)")
    if version == FORMAT_VERSION:
        if zlib.crc32(weights) != weights_crc:
            raise ModelFormatError("weights section checksum mismatch (corrupted file)")
    else:
        _check_v1_weights(metadata, weights)
    external = graph_rules.check_graph(graph)
    return Sections(version, metadata, graph, weights, external)


def custom_op_types(model_file: bytes) -> list[str]:
    """The custom op types of an rknnrt model file, sorted ([] for none or an unreadable file:
    whoever loads the file reports that)."""
    import onnx  # not at `import rknnrt`

    try:
        graph = bytes(read(memoryview(model_file)).graph)
    except Exception:  # noqa: BLE001 - any unreadable file: the loader's error, not ours
        return []
    if custom_ops.CUSTOM_DOMAIN.encode() not in graph:
        return []
    return sorted({n.op_type for n in onnx.load_model_from_string(graph).graph.node
                   if custom_ops.is_custom(n)})  # fmt: skip
