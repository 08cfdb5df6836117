"""Reading an ONNX model: choose its inputs and outputs, fix input shapes, check operators."""

from __future__ import annotations

import os
from collections.abc import Iterator

import onnx
from onnx import helper

from ..model import files, shape_guard
from ..model.errors import ModelFormatError
from .errors import ConversionError
from .op_support import SUPPORTED_OPS


def _all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a graph: initializers, sparse ones, node attributes and subgraphs."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sparse in [*([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []),
                           *attr.sparse_tensors]:  # fmt: skip
                yield from (sparse.values, sparse.indices)
            if attr.HasField("g"):
                yield from _all_tensors(attr.g)
            for sub in attr.graphs:
                yield from _all_tensors(sub)


def _uses_external_data(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data) > 0


def _read_inside(folder: str, tensor: onnx.TensorProto) -> bytes:
    """The bytes of one external tensor, from a file inside `folder` (symlinks resolved and
    required to stay inside it too)."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    root = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(root, location))
    if not location or os.path.isabs(location) or os.path.commonpath([root, target]) != root:
        raise ConversionError(
            f"tensor '{tensor.name}': external data {location!r} lies outside the model's "
            f"folder {folder!r}"
        )
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else -1
        with files.open_regular(target) as f:  # not a FIFO or device: never blocks or ends
            size = os.fstat(f.fileno()).st_size
            end = offset + max(length, 0)
            if offset < 0 or length < -1 or end > size:
                raise ConversionError(
                    f"tensor '{tensor.name}': external data [{offset}, +{length}) lies outside "
                    f"{location!r} ({size} bytes)"
                )
            f.seek(offset)
            return f.read(length if length >= 0 else size - offset)
    except (OSError, ValueError) as exc:
        raise ConversionError(
            f"tensor '{tensor.name}': cannot read external data {location!r}: {exc}"
        ) from None


def load(model: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """The model with all data inline. External data is read only for a model given by path,
    and only from files inside that model's folder; bytes and ModelProtos have no folder, so
    an external reference there is an error (never resolved against the working directory)."""
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        folder = None
    else:
        try:
            if isinstance(model, bytes):
                proto, folder = onnx.load_model_from_string(model), None
            else:
                path = os.fspath(model)
                proto = onnx.load_model_from_string(files.read_bytes(path))
                folder = os.path.dirname(os.path.abspath(path))
        except Exception as exc:  # onnx raises protobuf, OS and validation errors
            raise ConversionError(f"cannot read ONNX model {model!r}: {exc}") from None
    for tensor in _all_tensors(proto.graph):
        if not _uses_external_data(tensor):
            continue
        if folder is None:
            raise ConversionError(
                f"tensor '{tensor.name}' refers to external data, which a model given as bytes "
                "or a ModelProto cannot resolve: load it by path"
            )
        tensor.raw_data = _read_inside(folder, tensor)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return proto


def real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (old IR versions list weights as inputs too)."""
    constants = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in constants]


def set_inputs(
    model: onnx.ModelProto,
    names: list[str] | None,
    sizes: list[list[int]] | None,
    allow_dynamic: bool = False,
) -> None:
    """Apply load_onnx(inputs=, input_size_list=): fixed shapes for the model's inputs."""
    inputs = {i.name: i for i in real_inputs(model)}
    if names is None:
        names = list(inputs)
    if sizes is not None and len(sizes) != len(names):
        raise ConversionError(
            f"input_size_list has {len(sizes)} shapes for {len(names)} inputs {names}"
        )
    for k, name in enumerate(names):
        if name not in inputs:
            raise ConversionError(f"input '{name}' is not an input of the model: {list(inputs)}")
        tensor_type = inputs[name].type.tensor_type
        if sizes is not None:
            shape = [int(d) for d in sizes[k]]
            if any(d <= 0 for d in shape):
                raise ConversionError(f"input '{name}': input_size_list shape {shape} is invalid")
            tensor_type.shape.Clear()
            for d in shape:
                tensor_type.shape.dim.add().dim_value = d
        dims = tensor_type.shape.dim
        if allow_dynamic and tensor_type.HasField("shape"):
            continue  # config(dynamic_input=...) gives the shapes
        if not tensor_type.HasField("shape") or any(d.dim_value <= 0 for d in dims):
            raise ConversionError(
                f"input '{name}' has a dynamic or unknown shape "
                f"{[d.dim_param or d.dim_value for d in dims]}; give its size with "
                "load_onnx(inputs=[...], input_size_list=[[...]]), or the shapes it runs at "
                "with config(dynamic_input=[[[...]], ...])"
            )
    unused = [n for n in inputs if n not in names]
    if unused:
        raise ConversionError(f"inputs {unused} are not fed; list every model input in inputs=")


def set_outputs(model: onnx.ModelProto, names: list[str] | None) -> None:
    """Apply load_onnx(outputs=): cut the graph at these tensors and drop what they don't need."""
    if not names:
        return
    produced = {o for n in model.graph.node for o in n.output}
    for name in names:
        if name not in produced:
            raise ConversionError(f"output '{name}' is not produced by any node")
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    needed = set(names)
    keep = []
    for node in reversed(model.graph.node):
        if needed.intersection(node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    del model.graph.node[:]
    model.graph.node.extend(reversed(keep))


def check_ops(model: onnx.ModelProto) -> None:
    for index, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in SUPPORTED_OPS:
            where = f"{node.domain}::" if node.domain not in ("", "ai.onnx") else ""
            raise ConversionError(
                f"unsupported operator {where}{node.op_type} at node "
                f"'{node.name or f'#{index}'}' (outputs {list(node.output)})"
            )


def complete_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every graph output its inferred type (models may declare outputs untyped)."""
    try:  # a hostile graph can abort onnx's own inference: shape_guard refuses it first
        inferred = shape_guard.infer_shapes(model, strict_mode=False)
    except ModelFormatError as exc:
        raise ConversionError(f"shape inference failed: {exc}") from None
    except Exception as exc:  # onnx reports inference failures with several types
        raise ConversionError(f"shape inference failed: {exc}") from None
    for out in inferred.graph.output:
        t = out.type.tensor_type
        if not out.HasField("type") or not t.elem_type or not t.HasField("shape"):
            raise ConversionError(f"the type or shape of output '{out.name}' cannot be inferred")
    # inference of an untyped output also lists it in value_info: that copy would pin the
    # output's float type after quantisation changes it
    io = {v.name for v in (*inferred.graph.input, *inferred.graph.output)}
    keep = [v for v in inferred.graph.value_info if v.name not in io]
    del inferred.graph.value_info[:]
    inferred.graph.value_info.extend(keep)
    return inferred


MAX_SHAPE_SETS = 512  # RKNN_MAX_DYNAMIC_SHAPE_NUM


def apply_shape_sets(model: onnx.ModelProto, sets: list[list[list[int]]]) -> list[list[list[int]]]:
    """Check config(dynamic_input=...) against the model's inputs and make every input dim
    that differs between sets symbolic; returns the sets as lists of ints."""
    inputs = list(model.graph.input)
    if not isinstance(sets, (list, tuple)) or not 0 < len(sets) <= MAX_SHAPE_SETS:
        raise ConversionError(f"dynamic_input must hold 1 to {MAX_SHAPE_SETS} shape sets")
    clean: list[list[list[int]]] = []
    for k, shape_set in enumerate(sets):
        if not isinstance(shape_set, (list, tuple)) or len(shape_set) != len(inputs):
            raise ConversionError(
                f"dynamic_input[{k}] must give one shape for each of the {len(inputs)} inputs "
                f"{[i.name for i in inputs]}"
            )
        shapes = []
        for vi, shape in zip(inputs, shape_set):
            dims = vi.type.tensor_type.shape.dim
            if not all(isinstance(d, int) and d > 0 for d in shape) or len(shape) != len(dims):
                raise ConversionError(
                    f"dynamic_input[{k}]: shape {list(shape)} for input '{vi.name}' must have "
                    f"{len(dims)} positive dims (the ONNX model's layout, e.g. NCHW)"
                )
            for axis, (want, dim) in enumerate(zip(shape, dims)):
                if dim.dim_value > 0 and dim.dim_value != want:
                    raise ConversionError(
                        f"dynamic_input[{k}]: input '{vi.name}' dim {axis} is fixed at "
                        f"{dim.dim_value} in the model, not {want}"
                    )
            shapes.append([int(d) for d in shape])
        if shapes in clean:
            raise ConversionError(f"dynamic_input[{k}] repeats an earlier shape set")
        clean.append(shapes)
    for index, vi in enumerate(inputs):
        for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
            values = {shapes[index][axis] for shapes in clean}
            if len(values) == 1:
                dim.Clear()
                dim.dim_value = values.pop()
            else:
                dim.Clear()
                dim.dim_param = f"{vi.name}_d{axis}"
    return clean


def set_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """build(rknn_batch_size=N): every input's batch dim (1 in the model) becomes N."""
    if not isinstance(batch, int) or batch < 1:
        raise ConversionError(f"rknn_batch_size {batch!r} must be a positive integer")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for vi in out.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if not dims or dims[0].dim_value != 1:
            raise ConversionError(
                f"rknn_batch_size needs inputs with batch 1; '{vi.name}' has "
                f"{[d.dim_value or d.dim_param for d in dims]}"
            )
        dims[0].dim_value = batch
    for vi in out.graph.output:
        vi.type.tensor_type.ClearField("shape")
    del out.graph.value_info[:]  # inferred for batch 1: infer again
    return complete_outputs(out)
