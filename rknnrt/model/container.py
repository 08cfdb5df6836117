"""The rknnrt model file: a fixed header, a JSON metadata section, a graph and a weights section.

Layout (little-endian; every section starts on a 64-byte boundary; see docs/model-format.md):

    offset size  field
    0      8     magic b"rknnrt\\0\\0" (distinct from the vendor's b"RKNN")
    8      4     u32 format version (FORMAT_VERSION)
    12     4     u32 header size (64)
    16     8     u64 metadata offset      24  4  u32 metadata size      28  4  u32 metadata CRC-32
    32     8     u64 graph offset         40  4  u32 graph size         44  4  u32 graph CRC-32
    48     8     u64 weights offset       56  8  u64 weights size

The weights are not checksummed so that a model can run from the caller's buffer in place
without reading every byte at init. Nothing here is ever executed or unpickled.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

MAGIC = b"rknnrt\0\0"
VENDOR_MAGIC = b"RKNN"
FORMAT_VERSION = 1
VENDOR_FORMAT_VERSION = 6  # Sections.version of a vendor .rknn file
HEADER_SIZE = 64
ALIGN = 64
_HEADER = struct.Struct("<8sIIQIIQIIQQ")
assert _HEADER.size == HEADER_SIZE


class ModelFormatError(ValueError):
    """The bytes are not a readable rknnrt model; the message says what is wrong."""


class VendorModelError(ModelFormatError):
    """The bytes are a vendor .rknn file that rknnrt cannot read (rknnrt.model.vendor_rknn)."""


@dataclass(frozen=True)
class Sections:
    """Views into one model buffer; no section is copied."""

    version: int
    metadata: memoryview
    graph: memoryview
    weights: memoryview


def _pad(n: int) -> int:
    return -n % ALIGN


def write(metadata: bytes, graph: bytes, weights: bytes) -> bytes:
    """Assemble a model file from its three sections."""
    meta_off = HEADER_SIZE
    graph_off = meta_off + len(metadata) + _pad(meta_off + len(metadata))
    weights_off = graph_off + len(graph) + _pad(graph_off + len(graph))
    header = _HEADER.pack(
        MAGIC, FORMAT_VERSION, HEADER_SIZE,
        meta_off, len(metadata), zlib.crc32(metadata),
        graph_off, len(graph), zlib.crc32(graph),
        weights_off, len(weights),
    )  # fmt: skip
    out = bytearray(header)
    for off, data in ((meta_off, metadata), (graph_off, graph), (weights_off, weights)):
        out += bytes(off - len(out))
        out += data
    return bytes(out)


def read(buf: memoryview) -> Sections:
    """Validate the header and return views of the sections; ModelFormatError if malformed."""
    buf = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    if len(buf) >= 4 and bytes(buf[:4]) == VENDOR_MAGIC:
        from . import vendor_rknn  # imported here: it builds on this module and meta

        metadata, graph, weights = vendor_rknn.to_sections(buf)
        return Sections(VENDOR_FORMAT_VERSION, memoryview(metadata), memoryview(graph),
                        memoryview(weights))  # fmt: skip
    if len(buf) < HEADER_SIZE:
        raise ModelFormatError(f"model is too small: {len(buf)} bytes < {HEADER_SIZE}-byte header")
    (magic, version, header_size, meta_off, meta_size, meta_crc, graph_off, graph_size,
     graph_crc, weights_off, weights_size) = _HEADER.unpack_from(buf, 0)  # fmt: skip
    if magic != MAGIC:
        raise ModelFormatError("invalid rknn model magic: not an rknnrt model file")
    if version != FORMAT_VERSION:
        raise ModelFormatError(
            f"Invalid RKNN model version {version}: this runtime reads version {FORMAT_VERSION}"
        )
    if header_size != HEADER_SIZE:
        raise ModelFormatError(f"invalid header size {header_size}")
    views = []
    for what, off, size in (
        ("metadata", meta_off, meta_size),
        ("graph", graph_off, graph_size),
        ("weights", weights_off, weights_size),
    ):
        if off % ALIGN or off < HEADER_SIZE or off + size > len(buf):
            raise ModelFormatError(
                f"{what} section [{off}, {off + size}) lies outside the {len(buf)}-byte model "
                "(truncated or corrupted file)"
            )
        views.append(buf[off : off + size])
    for what, view, crc in (("metadata", views[0], meta_crc), ("graph", views[1], graph_crc)):
        if zlib.crc32(view) != crc:
            raise ModelFormatError(f"{what} section checksum mismatch (corrupted file)")
    return Sections(version, views[0], views[1], views[2])
