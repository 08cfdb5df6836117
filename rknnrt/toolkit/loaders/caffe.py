"""`load_caffe(model=prototxt, blobs=caffemodel)`: rknnrt's own reader of Caffe models.

The prototxt is read with protobuf's text format and the caffemodel with its binary format,
both against the part of caffe.proto in caffe_proto.py; the net becomes an ONNX graph (opset
13) that the converter then takes as it takes load_onnx's. Shapes are followed layer by layer
because Caffe's own rules decide them (pooling rounds up by default; Flatten and Reshape are
written in terms of the input's dims). Layers in place (top == bottom) get a fresh tensor per
write; the last write of a blob keeps the blob's name, so outputs are named as in Caffe.

Layers: Input, Convolution (group, dilation), Deconvolution, Pooling (MAX/AVE, global, Caffe's
ceil rounding and average divisor), InnerProduct, ReLU (negative_slope), PReLU, Sigmoid, TanH,
BatchNorm (the stored scale factor applied), Scale (one or two bottoms), Bias-free or biased,
Eltwise (SUM with coeff, PROD, MAX), Concat, Softmax, Dropout, Split, Flatten, Reshape,
Permute, Normalize (SSD). PriorBox and DetectionOutput (and anything else) are refused by name.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from google.protobuf import message as pb_message
from google.protobuf import text_format
from onnx import TensorProto, helper

from ..errors import ConversionError
from . import caffe_layers, caffe_proto

_HOST_LAYERS = {"PriorBox", "DetectionOutput"}


def read_prototxt(path: str) -> object:
    try:
        with open(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read Caffe prototxt {path!r}: {exc}") from None
    return parse_prototxt(text, path)


def parse_prototxt(text: str, path: str = "prototxt") -> object:
    net = caffe_proto.message("NetParameter")
    try:
        text_format.Parse(text, net, allow_unknown_field=True,
                          descriptor_pool=caffe_proto.pool())  # fmt: skip
    except text_format.ParseError as exc:
        raise ConversionError(f"{path}: not a Caffe prototxt: {exc}") from None
    if net.layers and not net.layer:
        raise ConversionError(f"{path}: old-format ('layers {{ type: CONVOLUTION }}') prototxt; "
                              "upgrade it with Caffe's upgrade_net_proto_text first")  # fmt: skip
    return net


def read_caffemodel(path: str) -> dict[str, list[np.ndarray]]:
    """Layer name -> its blobs as float32 arrays."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConversionError(f"cannot read caffemodel {path!r}: {exc}") from None
    net = caffe_proto.message("NetParameter")
    try:
        net.ParseFromString(data)
    except pb_message.DecodeError as exc:
        raise ConversionError(f"{path}: not a caffemodel (binary NetParameter): {exc}") from None
    blobs = {}
    for layer in list(net.layer) + list(net.layers):
        if layer.blobs:
            blobs[layer.name] = [_blob(b, f"{path}: layer {layer.name!r}") for b in layer.blobs]
    return blobs


def _blob(blob, where: str) -> np.ndarray:
    values = np.asarray(blob.data if len(blob.data) else blob.double_data, np.float32)
    if blob.HasField("shape"):
        shape = [int(d) for d in blob.shape.dim]
    else:  # the legacy 4-D fields
        shape = [blob.num, blob.channels, blob.height, blob.width]
    if int(np.prod(shape)) != values.size:
        shape = [values.size]
    return values.reshape(shape)


def load(prototxt: str | os.PathLike, caffemodel: str | os.PathLike | None,
         shape_sets: list | None = None) -> onnx.ModelProto:  # fmt: skip
    """The net as ONNX. With `shape_sets` (config's dynamic_input) the input dims that differ
    between the sets become symbolic: a prototxt's input shape is only Caffe's default, the net
    takes any size its layers allow."""
    prototxt = os.fspath(prototxt)
    net = read_prototxt(prototxt)
    if caffemodel is None:
        raise ConversionError("load_caffe needs blobs= (the .caffemodel holding the weights)")
    blobs = read_caffemodel(os.fspath(caffemodel))
    layers = [lay for lay in net.layer if _included(lay)]
    g = caffe_layers.Net()
    inputs: list[tuple[str, list[int]]] = []
    dims = list(net.input_dim)
    for k, name in enumerate(net.input):
        shape = (
            list(net.input_shape[k].dim) if k < len(net.input_shape) else dims[4 * k : 4 * k + 4]
        )
        inputs.append((name, [int(d) for d in shape]))
    last_write = {top: k for k, lay in enumerate(layers) for top in lay.top}
    current: dict[str, str] = {}  # blob -> the tensor holding its latest value
    for name, shape in inputs:
        current[name], g.shapes[name] = name, shape
        g.names.add(name)
    consumed: set[str] = set()
    for k, lay in enumerate(layers):
        if lay.type == "Input":
            for top, shape in zip(lay.top, lay.input_param.shape):
                inputs.append((top, [int(d) for d in shape.dim]))
                current[top], g.shapes[top] = top, inputs[-1][1]
                g.names.add(top)
            continue
        where = f"{prototxt}: layer {lay.name!r} ({lay.type})"
        if lay.type in _HOST_LAYERS:
            raise ConversionError(
                f"{where} is not supported: it runs on the host in the "
                "vendor's flow too; remove it (and the layers after it) from "
                "the prototxt and decode the outputs in your program"
            )
        try:
            bottoms = [current[b] for b in lay.bottom]
        except KeyError as exc:
            raise ConversionError(f"{where}: bottom {exc.args[0]!r} is not produced by an "
                                  "earlier layer or a net input") from None  # fmt: skip
        consumed.update(bottoms)
        outs = []
        for top in lay.top:
            outs.append(g.unique(top if last_write[top] == k else f"{top}:{lay.name}"))
        try:
            caffe_layers.convert(g, lay, bottoms, outs, blobs.get(lay.name, []))
        except (ValueError, IndexError, KeyError) as exc:
            raise ConversionError(f"{where}: {exc}") from None
        for top, out in zip(lay.top, outs):
            current[top] = out
    if not inputs:
        raise ConversionError(f"{prototxt}: the net declares no input (input/input_shape or an "
                              "Input layer)")  # fmt: skip
    produced = [o for n in g.nodes for o in n.output]
    outputs = [t for t in produced if t not in consumed and t in current.values()]
    graph = helper.make_graph(
        g.nodes, net.name or os.path.splitext(os.path.basename(prototxt))[0],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, g.shapes[o]) for o in outputs],
        g.inits,
    )  # fmt: skip
    _relax(graph, shape_sets)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _included(layer) -> bool:
    """Deploy-time layers: those not restricted to the TRAIN phase."""
    if layer.include:
        return any(rule.phase == 1 or not rule.HasField("phase") for rule in layer.include)
    return not any(rule.phase == 1 for rule in layer.exclude)


def _relax(graph: onnx.GraphProto, shape_sets: list | None) -> None:
    """Input dims that differ between dynamic_input's sets -> symbolic (outputs too: their
    sizes then follow)."""
    if not shape_sets:
        return
    varying = False
    for index, vi in enumerate(graph.input):
        dims = vi.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            try:
                values = {int(s[index][axis]) for s in shape_sets}
            except (IndexError, TypeError, ValueError):
                return  # the build reports a malformed dynamic_input in its own words
            if len(values) > 1:
                dim.Clear()
                dim.dim_param = f"{vi.name}_d{axis}"
                varying = True
    if varying:
        for out in graph.output:
            out.type.tensor_type.ClearField("shape")
