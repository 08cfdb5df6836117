"""Caffe files written by the tests: a prototxt as text and a caffemodel as protobuf wire bytes
from a writer of its own (field numbers from caffe.proto), independent of rknnrt's reader."""

from __future__ import annotations

import struct

import numpy as np

from rknnrt.toolkit.loaders import caffe

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


def weights_for(prototxt: str, seed: int = 0) -> dict[str, list[np.ndarray]]:
    """Blobs of the right shapes for every layer of a prototxt: a stand-in for a caffemodel a
    repository does not carry. Variance-keeping weights, BatchNorm statistics and scales keep
    activations near unit size over deep nets; shapes follow Caffe's rules."""
    rng = np.random.RandomState(seed)
    net = caffe.parse_prototxt(prototxt)
    shapes: dict[str, list[int]] = {}
    dims = list(net.input_dim)
    for k, name in enumerate(net.input):
        shapes[name] = list(net.input_shape[k].dim) if k < len(net.input_shape) else \
            dims[4 * k : 4 * k + 4]  # fmt: skip
    blobs: dict[str, list[np.ndarray]] = {}
    for lay in net.layer:
        if lay.type == "Input":
            for top, s in zip(lay.top, lay.input_param.shape):
                shapes[top] = list(s.dim)
            continue
        x = list(shapes[lay.bottom[0]]) if lay.bottom else []
        out = list(x)
        if lay.type in ("Convolution", "Deconvolution"):
            p = lay.convolution_param
            k = int(p.kernel_size[0]) if len(p.kernel_size) else int(p.kernel_h)
            s = int(p.stride[0]) if len(p.stride) else 1
            pad = int(p.pad[0]) if len(p.pad) else 0
            g = int(p.group)
            c = x[1]
            if lay.type == "Convolution":
                w = rng.randn(p.num_output, c // g, k, k) * np.sqrt(1.0 / (c // g * k * k))
                size = [(d + 2 * pad - k) // s + 1 for d in x[2:]]
            else:
                w = rng.randn(c, p.num_output // g, k, k) * np.sqrt(1.0 / (c * k * k))
                size = [(d - 1) * s - 2 * pad + k for d in x[2:]]
            blobs[lay.name] = [w] + ([rng.randn(p.num_output) * 0.05] if p.bias_term else [])
            out = [x[0], int(p.num_output), *size]
        elif lay.type == "InnerProduct":
            p = lay.inner_product_param
            k = int(np.prod(x[1:]))
            blobs[lay.name] = [rng.randn(p.num_output, k) * np.sqrt(2.0 / k)]
            blobs[lay.name] += [rng.randn(p.num_output) * 0.05] if p.bias_term else []
            out = [x[0], int(p.num_output)]
        elif lay.type == "BatchNorm":
            blobs[lay.name] = [rng.randn(x[1]) * 0.05, rng.rand(x[1]) + 1.5, np.ones(1)]
        elif lay.type == "Scale" and len(lay.bottom) == 1:
            blobs[lay.name] = [rng.rand(x[1]) * 0.4 + 0.6]
            blobs[lay.name] += [rng.randn(x[1]) * 0.1] if lay.scale_param.bias_term else []
        elif lay.type == "PReLU":
            blobs[lay.name] = [np.full(x[1], 0.25)]
        elif lay.type == "Pooling":
            p = lay.pooling_param
            if p.global_pooling:
                out = [x[0], x[1], 1, 1]
            else:
                k, s, pad = int(p.kernel_size), int(p.stride), int(p.pad)
                out = [x[0], x[1], *[int(np.ceil((d + 2 * pad - k) / s)) + 1 for d in x[2:]]]
        elif lay.type == "Concat":
            out[1] = sum(shapes[b][1] for b in lay.bottom)
        for top in lay.top:
            shapes[top] = out
    return {name: [np.asarray(b, np.float32) for b in bs] for name, bs in blobs.items()}
