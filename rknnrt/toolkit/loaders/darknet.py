"""`load_darknet`: a reader of Darknet `.cfg` + `.weights` for the layers YOLOv3-style networks
use (the vendor's darknet example): convolutional (with batch_normalize), shortcut, route,
upsample, maxpool and yolo. No maintained Darknet-to-ONNX converter exists, so rknnrt reads the
format itself; any other section is refused with a line naming it.

Darknet facts the reader follows: the weights file starts with int32 major, minor, revision and
a 'seen' count (int64 when major*10+minor >= 2, else int32); then, per convolutional layer in
order, biases (and with batch_normalize: scales, rolling mean, rolling variance), then the
weights [filters, channels, size, size]. Batch normalisation is (x - mean) / (sqrt(var) +
1e-6) * scale + bias, folded into the convolution here. A maxpool of size k pads k - 1 (half
before, the rest after); 'pad=1' on a convolution means size // 2.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...model import files
from ..errors import ConversionError

_ACTIVATIONS = ("leaky", "linear", "relu", "logistic")


def parse_cfg(text: str, source: str) -> list[tuple[str, dict[str, str]]]:
    sections: list[tuple[str, dict[str, str]]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1].strip(), {}))
        elif "=" in line and sections:
            key, value = line.split("=", 1)
            sections[-1][1][key.strip()] = value.strip()
        else:
            raise ConversionError(f"{source} line {number}: expected '[section]' or "
                                  f"'key=value', got {line!r}")  # fmt: skip
    if not sections or sections[0][0] not in ("net", "network"):
        raise ConversionError(f"{source}: the first section must be [net]")
    return sections


class _Weights:
    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source = data, source
        if len(data) < 16:
            raise ConversionError(f"{source}: too short for a Darknet weights file")
        major, minor, _ = np.frombuffer(data[:12], np.int32)
        self.offset = 20 if major * 10 + minor >= 2 and major < 1000 and minor < 1000 else 16

    def take(self, count: int) -> np.ndarray:
        end = self.offset + 4 * count
        if end > len(self.data):
            raise ConversionError(f"{self.source}: the weights end early (the cfg needs more)")
        values = np.frombuffer(self.data[self.offset : end], np.float32)
        self.offset = end
        return values


def load(cfg_path: str | os.PathLike, weights_path: str | os.PathLike) -> onnx.ModelProto:
    cfg_path, weights_path = os.fspath(cfg_path), os.fspath(weights_path)
    try:
        sections = parse_cfg(files.read_text(cfg_path), cfg_path)
        weights = _Weights(files.read_bytes(weights_path), weights_path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read Darknet files: {exc}") from None
    net = sections[0][1]
    try:
        height, width = int(net.get("height", 416)), int(net.get("width", 416))
        channels = int(net.get("channels", 3))
    except ValueError:
        raise ConversionError(f"{cfg_path}: [net] width/height/channels must be integers") \
            from None  # fmt: skip
    builder = _Builder(weights)
    current, shape_c = "input", channels
    outputs_c: list[tuple[str, int]] = []  # per layer: (tensor, channels)
    graph_outputs: list[str] = []
    for index, (kind, options) in enumerate(sections[1:]):
        try:
            current, shape_c = builder.layer(index, kind, options, current, shape_c, outputs_c)
        except (KeyError, ValueError, IndexError) as exc:
            raise ConversionError(f"{cfg_path}: [{kind}] layer {index}: {exc}") from None
        if kind == "yolo":
            graph_outputs.append(current)
        outputs_c.append((current, shape_c))
    if not graph_outputs:
        graph_outputs.append(current)
    if weights.offset != len(weights.data):
        raise ConversionError(f"{weights_path}: {len(weights.data) - weights.offset} bytes "
                              "left over: the weights do not match the cfg")  # fmt: skip
    graph = helper.make_graph(
        builder.nodes, os.path.splitext(os.path.basename(cfg_path))[0],
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, channels, height, width])],
        [helper.make_empty_tensor_value_info(o) for o in graph_outputs], builder.inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


class _Builder:
    def __init__(self, weights: _Weights) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def layer(self, index: int, kind: str, o: dict, x: str, c: int,
              previous: list[tuple[str, int]]) -> tuple[str, int]:  # fmt: skip
        name = f"{kind}_{index}"
        if kind == "convolutional":
            return self.conv(name, o, x, c)
        if kind == "shortcut":
            other, _ = previous[_index(int(o["from"]), index)]
            self.nodes.append(helper.make_node("Add", [x, other], [name], name=name))
            return self.activate(name, o.get("activation", "linear")), c
        if kind == "route":
            if "groups" in o:
                raise ValueError("route with groups is not supported")
            sources = [previous[_index(int(v), index)] for v in o["layers"].split(",")]
            if len(sources) == 1:
                return sources[0]
            self.nodes.append(helper.make_node("Concat", [s for s, _ in sources], [name],
                                               name=name, axis=1))  # fmt: skip
            return name, sum(ch for _, ch in sources)
        if kind == "upsample":
            stride = float(o.get("stride", 2))
            scales = self.const(f"{name}.scales", np.array([1, 1, stride, stride], np.float32))
            roi = self.const(f"{name}.roi", np.zeros(0, np.float32))
            self.nodes.append(helper.make_node("Resize", [x, roi, scales], [name], name=name,
                                               mode="nearest"))  # fmt: skip
            return name, c
        if kind == "maxpool":
            size = int(o.get("size", 2))
            stride = int(o.get("stride", size))
            pad = int(o.get("padding", size - 1))
            pads = [pad // 2, pad // 2, pad - pad // 2, pad - pad // 2]
            self.nodes.append(helper.make_node("MaxPool", [x], [name], name=name,
                                               kernel_shape=[size, size], strides=[stride] * 2,
                                               pads=pads))  # fmt: skip
            return name, c
        if kind == "yolo":
            return x, c  # the yolo layer decodes on the host: its input is a model output
        raise ValueError(f"Darknet layer [{kind}] is not supported (supported: convolutional, "
                         "shortcut, route, upsample, maxpool, yolo)")

    def conv(self, name: str, o: dict, x: str, c: int) -> tuple[str, int]:
        filters, size = int(o["filters"]), int(o.get("size", 1))
        stride = int(o.get("stride", 1))
        pad = size // 2 if int(o.get("pad", 0)) else int(o.get("padding", 0))
        if int(o.get("groups", 1)) != 1:
            raise ValueError("grouped convolutions are not supported")
        bias = self.weights.take(filters).astype(np.float64)
        if int(o.get("batch_normalize", 0)):
            scales = self.weights.take(filters).astype(np.float64)
            mean = self.weights.take(filters).astype(np.float64)
            var = self.weights.take(filters).astype(np.float64)
            factor = scales / (np.sqrt(var) + 1e-6)
        else:
            factor, mean = np.ones(filters), np.zeros(filters)
        w = self.weights.take(filters * c * size * size).astype(np.float64)
        w = w.reshape(filters, c, size, size) * factor.reshape(-1, 1, 1, 1)
        b = bias - mean * factor
        wn = self.const(f"{name}.weight", w.astype(np.float32))
        bn = self.const(f"{name}.bias", b.astype(np.float32))
        self.nodes.append(helper.make_node("Conv", [x, wn, bn], [name], name=name,
                                           kernel_shape=[size, size], strides=[stride] * 2,
                                           pads=[pad] * 4))  # fmt: skip
        return self.activate(name, o.get("activation", "logistic")), filters

    def activate(self, x: str, activation: str) -> str:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation '{activation}' is not supported ({_ACTIVATIONS})")
        if activation == "linear":
            return x
        out = f"{x}.{activation}"
        op, attrs = {"leaky": ("LeakyRelu", {"alpha": 0.1}), "relu": ("Relu", {}),
                     "logistic": ("Sigmoid", {})}[activation]  # fmt: skip
        self.nodes.append(helper.make_node(op, [x], [out], name=out, **attrs))
        return out


def _index(value: int, current: int) -> int:
    """A cfg layer reference (negative: relative to the current layer) as an absolute index."""
    absolute = current + value if value < 0 else value
    if not 0 <= absolute < current:
        raise IndexError(f"layer reference {value} is out of range")
    return absolute
