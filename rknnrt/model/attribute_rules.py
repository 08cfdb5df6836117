"""Node attributes that onnxruntime accepts when it loads a graph but rejects on every run.

onnxruntime's load-time shape inference catches most invalid attributes (an out-of-range
axis, a zero stride, a bad mode string), but a convolution whose `group`, `kernel_shape` or
weight shape disagrees with its input channels loads fine and fails each rknn_run. Those are
checked here so that such a model fails at rknn_init.
"""

from __future__ import annotations

import onnx

from . import shape_guard
from .errors import ModelFormatError

_CONVS = ("Conv", "ConvTranspose")


def _known_dims(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """name -> dims (None where unknown) of every tensor the graph or ONNX inference types."""
    try:
        inferred = shape_guard.infer_shapes(model, strict_mode=False)
    except ModelFormatError:  # a negative dimension (onnx would abort on it)
        raise
    except Exception:  # inference failures are onnxruntime's to report at load
        inferred = model
    dims: dict[str, list[int | None]] = {}
    graph = inferred.graph
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    for tensor in graph.initializer:
        dims[tensor.name] = list(tensor.dims)
    return dims


def _ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    for attr in node.attribute:
        if attr.name == name:
            return list(attr.ints) if attr.ints else [attr.i]
    return None


def _check_conv(node: onnx.NodeProto, dims: dict[str, list[int | None]], where: str) -> None:
    group = (_ints(node, "group") or [1])[0]
    if group < 1:
        raise ModelFormatError(f"{where}: group {group} must be at least 1")
    x = dims.get(node.input[0]) if node.input else None
    w = dims.get(node.input[1]) if len(node.input) > 1 else None
    if not w or len(w) < 3 or any(d is None for d in w):
        return
    channels = x[1] if x and len(x) == len(w) else None
    if node.op_type == "Conv":
        per_group_in, out_channels = w[1], w[0]
        if out_channels % group:
            raise ModelFormatError(
                f"{where}: {out_channels} output channels do not divide into {group} groups"
            )
    else:  # ConvTranspose: weights are [C_in, C_out / group, k...]
        per_group_in, out_channels = (w[0] // group if w[0] % group == 0 else -1), w[1] * group
        if per_group_in < 0:
            raise ModelFormatError(
                f"{where}: {w[0]} input channels do not divide into {group} groups"
            )
    if channels is not None and channels != per_group_in * group:
        raise ModelFormatError(
            f"{where}: the input has {channels} channels, the weights {w} with group {group} "
            f"need {per_group_in * group}"
        )
    kernel = _ints(node, "kernel_shape")
    if kernel is not None and kernel != w[2:]:
        raise ModelFormatError(f"{where}: kernel_shape {kernel} differs from the weights {w}")
    if len(node.input) > 2 and node.input[2]:
        bias = dims.get(node.input[2])
        if bias is not None and bias != [out_channels]:
            raise ModelFormatError(f"{where}: bias {bias} must have {out_channels} values")


def check_attributes(model: onnx.ModelProto) -> None:
    convs = [(k, n) for k, n in enumerate(model.graph.node) if n.op_type in _CONVS]
    if not convs:
        return
    dims = _known_dims(model)
    for index, node in convs:
        if node.domain not in ("", "ai.onnx"):
            continue
        _check_conv(node, dims, f"node '{node.name or f'#{index}'}' ({node.op_type})")
