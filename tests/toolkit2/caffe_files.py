"""Caffe files written by the tests: a prototxt as text and a caffemodel as protobuf wire bytes
from a writer of its own (field numbers from caffe.proto), independent of rknnrt's reader."""

from __future__ import annotations

import struct

import numpy as np

# caffe.proto: NetParameter.layer = 100; LayerParameter.name = 1, .blobs = 7;
# BlobProto.shape = 7, .data = 5 (packed float); BlobShape.dim = 1 (packed int64)
NET_LAYER, LAYER_NAME, LAYER_BLOBS, BLOB_SHAPE, BLOB_DATA, SHAPE_DIM = 100, 1, 7, 7, 5, 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def blob(array: np.ndarray) -> bytes:
    dims = b"".join(_varint(int(d)) for d in array.shape)
    data = struct.pack(f"<{array.size}f", *np.asarray(array, np.float32).ravel())
    return _field(BLOB_SHAPE, _field(SHAPE_DIM, dims)) + _field(BLOB_DATA, data)


def caffemodel(layers: dict[str, list[np.ndarray]]) -> bytes:
    """A NetParameter holding only each layer's name and blobs, as Caffe writes them."""
    out = b""
    for name, blobs in layers.items():
        body = _field(LAYER_NAME, name.encode()) + b"".join(_field(LAYER_BLOBS, blob(b))
                                                            for b in blobs)  # fmt: skip
        out += _field(NET_LAYER, body)
    return out


def layer(name: str, kind: str, bottoms: list[str], tops: list[str], params: str = "") -> str:
    lines = [f'layer {{\n  name: "{name}"\n  type: "{kind}"']
    lines += [f'  bottom: "{b}"' for b in bottoms] + [f'  top: "{t}"' for t in tops]
    if params:
        lines.append("  " + params)
    return "\n".join(lines) + "\n}\n"
