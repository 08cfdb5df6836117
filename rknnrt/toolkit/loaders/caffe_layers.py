"""Caffe layers as ONNX nodes, with Caffe's shape rules (used by caffe.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from onnx import helper, numpy_helper


@dataclass
class Net:
    """The ONNX graph being built: nodes, weights and the shape of every tensor."""

    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)
    names: set = field(default_factory=set)  # tensors
    node_names: set = field(default_factory=set)

    def unique(self, name: str, taken: set | None = None) -> str:
        taken = self.names if taken is None else taken
        base, k = name, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        name = self.unique(name)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, name: str, shape: list[int],
             **attrs) -> str:  # fmt: skip
        self.nodes.append(
            helper.make_node(op, inputs, [out], name=self.unique(name, self.node_names), **attrs)
        )
        self.shapes[out] = [int(d) for d in shape]
        return out

    def temp(self, name: str) -> str:
        return self.unique(name)


def _pair(param, single: str, h: str, w: str, default: int | None) -> tuple[int, int]:
    if param.HasField(h) or param.HasField(w):
        return int(getattr(param, h)), int(getattr(param, w))
    values = list(getattr(param, single))
    if values:
        return int(values[0]), int(values[-1])
    if default is None:
        raise ValueError(f"{single} (or {h}/{w}) is required")
    return default, default


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a {rank}-D input")
    return axis % rank


def _weights(blobs: list, count: int, what: str) -> list[np.ndarray]:
    if len(blobs) < count:
        raise ValueError(f"the caffemodel has {len(blobs)} blob(s) for it, {what} needs {count}")
    return [np.asarray(b, np.float32) for b in blobs]


def _conv(g: Net, lay, x: str, out: str, blobs: list, transposed: bool) -> None:
    p = lay.convolution_param
    kh, kw = _pair(p, "kernel_size", "kernel_h", "kernel_w", None)
    sh, sw = _pair(p, "stride", "stride_h", "stride_w", 1)
    ph, pw = _pair(p, "pad", "pad_h", "pad_w", 0)
    dil = list(p.dilation) or [1]
    dh, dw = int(dil[0]), int(dil[-1])
    group = int(p.group)
    n, c, h, w = g.shapes[x]
    if c % group or p.num_output % group:
        raise ValueError(f"group {group} does not divide {c} input / {p.num_output} output "
                         "channels")  # fmt: skip
    weights = _weights(blobs, 2 if p.bias_term else 1, "the layer")
    # Conv: [out, in / group, kh, kw]; ConvTranspose: [in, out / group, kh, kw] (Caffe's too)
    dims = (c, p.num_output // group) if transposed else (p.num_output, c // group)
    weight = weights[0].reshape(*dims, kh, kw)
    inputs = [x, g.const(f"{lay.name}.weight", weight)]
    if p.bias_term:
        inputs.append(g.const(f"{lay.name}.bias", weights[1].reshape(-1)))
    if transposed:
        oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + 1
        ow = (w - 1) * sw - 2 * pw + dw * (kw - 1) + 1
        op = "ConvTranspose"
    else:
        oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
        ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
        op = "Conv"
    g.node(op, inputs, out, lay.name, [n, p.num_output, oh, ow], kernel_shape=[kh, kw],
           strides=[sh, sw], pads=[ph, pw, ph, pw], dilations=[dh, dw], group=group)  # fmt: skip


def _pool(g: Net, lay, x: str, out: str) -> None:
    p = lay.pooling_param
    n, c, h, w = g.shapes[x]
    if p.pool not in (0, 1):
        raise ValueError("only MAX and AVE pooling are supported (not STOCHASTIC)")
    if p.global_pooling:
        op = "GlobalMaxPool" if p.pool == 0 else "GlobalAveragePool"
        g.node(op, [x], out, lay.name, [n, c, 1, 1])
        return
    kh, kw = _pair(p, "", "kernel_h", "kernel_w", None) if p.HasField("kernel_h") else \
        (int(p.kernel_size),) * 2  # fmt: skip
    if not p.HasField("kernel_size") and not p.HasField("kernel_h"):
        raise ValueError("kernel_size (or kernel_h/kernel_w) is required")
    sh, sw = (int(p.stride_h), int(p.stride_w)) if p.HasField("stride_h") else (int(p.stride),) * 2
    ph, pw = (int(p.pad_h), int(p.pad_w)) if p.HasField("pad_h") else (int(p.pad),) * 2
    rounding = math.floor if p.round_mode == 1 else math.ceil
    sizes = []
    for size, k, s, pad in ((h, kh, sh, ph), (w, kw, sw, pw)):
        o = int(rounding((size + 2 * pad - k) / s)) + 1
        if pad and (o - 1) * s >= size + pad:  # Caffe: the last window starts inside the image
            o -= 1
        sizes.append(o)
    # end padding that gives Caffe's size under ONNX's floor rounding
    ends = [max(0, (o - 1) * s + k - size - pad)
            for o, size, k, s, pad in zip(sizes, (h, w), (kh, kw), (sh, sw), (ph, pw))]  # fmt: skip
    attrs = {"kernel_shape": [kh, kw], "strides": [sh, sw]}
    if p.pool == 0:
        g.node("MaxPool", [x], out, lay.name, [n, c, *sizes], pads=[ph, pw, *ends], **attrs)
        return
    # Caffe divides by the window clipped to the padded input (padding counts, the rounding
    # overhang does not): zero-pad explicitly, then pool without counting the overhang
    src = x
    if ph or pw:
        pads = g.const(f"{lay.name}.pads", np.array([0, 0, ph, pw, 0, 0, ph, pw], np.int64))
        src = g.node("Pad", [x, pads], g.temp(f"{lay.name}.padded"), f"{lay.name}.pad",
                     [n, c, h + 2 * ph, w + 2 * pw])  # fmt: skip
    over = [max(0, e - pad) for e, pad in zip(ends, (ph, pw))]
    g.node("AveragePool", [src], out, lay.name, [n, c, *sizes], pads=[0, 0, *over],
           count_include_pad=0, **attrs)  # fmt: skip


def _channel_const(g: Net, name: str, values: np.ndarray, rank: int, axis: int,
                   num_axes: int) -> str:  # fmt: skip
    """A per-axis parameter shaped to broadcast against a rank-`rank` tensor from `axis`."""
    return g.const(name, values.reshape(values.shape + (1,) * (rank - axis - num_axes)))


def _flatten_shape(shape: list[int], axis: int, end: int) -> list[int]:
    return shape[:axis] + [int(np.prod(shape[axis : end + 1]))] + shape[end + 1 :]


def _reshape(g: Net, lay, x: str, out: str) -> None:
    p = lay.reshape_param
    shape = g.shapes[x]
    start = _axis(p.axis, len(shape) + 1) if p.axis >= 0 else len(shape) + 1 + p.axis
    end = len(shape) if p.num_axes == -1 else start + p.num_axes
    spec = [int(d) for d in p.shape.dim]
    middle = [shape[start + i] if d == 0 else d for i, d in enumerate(spec)]
    new = shape[:start] + middle + shape[end:]
    if middle.count(-1) > 1:
        raise ValueError("at most one -1 in reshape_param.shape")
    if -1 in new:
        known = int(np.prod([d for d in new if d != -1]))
        new[new.index(-1)] = int(np.prod(shape)) // known
    if int(np.prod(new)) != int(np.prod(shape)):
        raise ValueError(f"cannot reshape {shape} to {new}")
    # over the whole shape, ONNX reads 0 (copy) and -1 (infer) as Caffe does: the node then
    # fits other input sizes too (dynamic_input)
    whole = p.axis == 0 and p.num_axes == -1
    target = np.array(spec if whole else new, np.int64)
    g.node("Reshape", [x, g.const(f"{lay.name}.shape", target)], out, lay.name, new)


def convert(g: Net, lay, bottoms: list[str], outs: list[str], blobs: list) -> None:
    """Append the nodes of one Caffe layer; `outs` are the names of its tops."""
    kind = lay.type
    x = bottoms[0] if bottoms else None
    shape = g.shapes[x] if x else []
    out = outs[0] if outs else None
    if kind in ("Convolution", "Deconvolution"):
        _conv(g, lay, x, out, blobs, kind == "Deconvolution")
    elif kind == "Pooling":
        _pool(g, lay, x, out)
    elif kind == "InnerProduct":
        p = lay.inner_product_param
        axis = _axis(p.axis, len(shape))
        weights = _weights(blobs, 2 if p.bias_term else 1, "InnerProduct")
        k = int(np.prod(shape[axis:]))
        src = x
        if axis != 1 or len(shape) != 2:
            if axis != 1:
                raise ValueError("InnerProduct is supported with axis 1")
            src = g.node("Flatten", [x], g.temp(f"{lay.name}.flat"), f"{lay.name}.flatten",
                         [shape[0], k], axis=1)  # fmt: skip
        w = weights[0].reshape((k, p.num_output) if p.transpose else (p.num_output, k))
        inputs = [src, g.const(f"{lay.name}.weight", w)]
        if p.bias_term:
            inputs.append(g.const(f"{lay.name}.bias", weights[1].reshape(-1)))
        g.node("Gemm", inputs, out, lay.name, [shape[0], p.num_output],
               transB=0 if p.transpose else 1)  # fmt: skip
    elif kind == "ReLU":
        slope = lay.relu_param.negative_slope
        if slope:
            g.node("LeakyRelu", [x], out, lay.name, shape, alpha=float(slope))
        else:
            g.node("Relu", [x], out, lay.name, shape)
    elif kind in ("Sigmoid", "TanH"):
        g.node("Sigmoid" if kind == "Sigmoid" else "Tanh", [x], out, lay.name, shape)
    elif kind == "PReLU":
        (slope,) = _weights(blobs, 1, "PReLU")[:1]
        slope = slope.reshape(-1)
        if slope.size == 1:
            name = g.const(f"{lay.name}.slope", slope.reshape([1] * (len(shape) - 1)))
        else:
            name = _channel_const(g, f"{lay.name}.slope", slope, len(shape), 1, 1)
        g.node("PRelu", [x, name], out, lay.name, shape)
    elif kind == "BatchNorm":
        mean, var, factor = (_weights(blobs, 3, "BatchNorm") + [np.ones(1)])[:3]
        f = 0.0 if float(factor.reshape(-1)[0]) == 0 else 1.0 / float(factor.reshape(-1)[0])
        c = shape[1]
        params = [g.const(f"{lay.name}.{n}", v.astype(np.float32)) for n, v in (
            ("scale", np.ones(c)), ("bias", np.zeros(c)),
            ("mean", mean.reshape(-1) * f), ("var", var.reshape(-1) * f))]  # fmt: skip
        g.node("BatchNormalization", [x, *params], out, lay.name, shape,
               epsilon=float(lay.batch_norm_param.eps))  # fmt: skip
    elif kind in ("Scale", "Bias"):
        p = lay.scale_param
        axis = _axis(p.axis, len(shape))
        num_axes = len(shape) - axis if p.num_axes == -1 else p.num_axes
        if len(bottoms) == 2:
            other = g.shapes[bottoms[1]]
            trail = len(shape) - axis - len(other)
            scale = bottoms[1]
            if trail > 0:
                axes = g.const(f"{lay.name}.axes", np.arange(len(other), len(other) + trail))
                scale = g.node("Unsqueeze", [bottoms[1], axes], g.temp(f"{lay.name}.b"),
                               f"{lay.name}.unsqueeze", other + [1] * trail)  # fmt: skip
            g.node("Mul", [x, scale], out, lay.name, shape)
            return
        weights = _weights(blobs, 2 if p.bias_term else 1, "Scale")
        if kind == "Bias":
            bias = _channel_const(g, f"{lay.name}.bias", weights[0], len(shape), axis, num_axes)
            g.node("Add", [x, bias], out, lay.name, shape)
            return
        scale = _channel_const(g, f"{lay.name}.scale", weights[0], len(shape), axis, num_axes)
        if not p.bias_term:
            g.node("Mul", [x, scale], out, lay.name, shape)
            return
        mid = g.node("Mul", [x, scale], g.temp(f"{lay.name}.mul"), lay.name, shape)
        bias = _channel_const(g, f"{lay.name}.bias", weights[1], len(shape), axis, num_axes)
        g.node("Add", [mid, bias], out, f"{lay.name}.bias", shape)
    elif kind == "Eltwise":
        p = lay.eltwise_param
        op = {0: "Mul", 1: "Sum", 2: "Max"}[p.operation]
        terms = list(bottoms)
        if p.operation == 1 and len(p.coeff):
            if len(p.coeff) != len(bottoms):
                raise ValueError(f"{len(p.coeff)} coeff for {len(bottoms)} bottoms")
            terms = [b if c == 1 else g.node(
                "Mul", [b, g.const(f"{lay.name}.coeff{i}", np.array(c, np.float32))],
                g.temp(f"{lay.name}.term{i}"), f"{lay.name}.coeff{i}", shape)
                for i, (b, c) in enumerate(zip(bottoms, p.coeff))]  # fmt: skip
        if op == "Mul":
            current = terms[0]
            for i, t in enumerate(terms[1:], 1):
                last = i == len(terms) - 1
                current = g.node("Mul", [current, t], out if last else g.temp(f"{lay.name}.{i}"),
                                 lay.name, shape)  # fmt: skip
        else:
            g.node(op, terms, out, lay.name, shape)
    elif kind == "Concat":
        p = lay.concat_param
        axis = _axis(p.axis if p.HasField("axis") or not p.HasField("concat_dim")
                     else p.concat_dim, len(shape))  # fmt: skip
        new = list(shape)
        new[axis] = sum(g.shapes[b][axis] for b in bottoms)
        g.node("Concat", bottoms, out, lay.name, new, axis=axis)
    elif kind == "Softmax":
        g.node("Softmax", [x], out, lay.name, shape,
               axis=_axis(lay.softmax_param.axis, len(shape)))  # fmt: skip
    elif kind in ("Dropout", "Split"):
        for o in outs:
            g.node("Identity", [x], o, f"{lay.name}" if o == out else f"{lay.name}.{o}", shape)
    elif kind == "Flatten":
        p = lay.flatten_param
        axis, end = _axis(p.axis, len(shape)), _axis(p.end_axis, len(shape))
        new = _flatten_shape(shape, axis, end)
        if axis == 1 and end == len(shape) - 1:  # ONNX's Flatten: fits any input size
            g.node("Flatten", [x], out, lay.name, new, axis=1)
        else:
            g.node("Reshape", [x, g.const(f"{lay.name}.shape", np.array(new, np.int64))], out,
                   lay.name, new)  # fmt: skip
    elif kind == "Reshape":
        _reshape(g, lay, x, out)
    elif kind == "Permute":
        order = [int(o) for o in lay.permute_param.order]
        if sorted(order) != list(range(len(order))) and len(set(order)) != len(order):
            raise ValueError(f"permute_param.order {order} repeats an axis")
        perm = order + [a for a in range(len(shape)) if a not in order]
        if sorted(perm) != list(range(len(shape))):
            raise ValueError(f"permute_param.order {order} does not fit a {len(shape)}-D input")
        g.node("Transpose", [x], out, lay.name, [shape[a] for a in perm], perm=perm)
    elif kind == "Normalize":
        _normalize(g, lay, x, out, blobs)
    else:
        raise ValueError("this layer type is not supported by rknnrt's Caffe reader (supported: "
                         "Input, Convolution, Deconvolution, Pooling, InnerProduct, ReLU, PReLU, "
                         "Sigmoid, TanH, BatchNorm, Scale, Bias, Eltwise, Concat, Softmax, "
                         "Dropout, Split, Flatten, Reshape, Permute, Normalize)")  # fmt: skip


def _normalize(g: Net, lay, x: str, out: str, blobs: list) -> None:
    """SSD's L2 normalisation: x / sqrt(sum(x^2) + eps) over C (or C, H, W), times a scale."""
    p = lay.norm_param
    shape = g.shapes[x]
    axes = list(range(1, len(shape))) if p.across_spatial else [1]
    reduced = [1 if a in axes else d for a, d in enumerate(shape)]
    name = lay.name
    sq = g.node("ReduceSumSquare", [x], g.temp(f"{name}.sumsq"), f"{name}.sumsq", reduced,
                axes=axes, keepdims=1)  # fmt: skip
    eps = g.const(f"{name}.eps", np.array(p.eps, np.float32))
    norm = g.node(
        "Sqrt",
        [g.node("Add", [sq, eps], g.temp(f"{name}.eps_add"), f"{name}.eps_add", reduced)],
        g.temp(f"{name}.norm"),
        f"{name}.norm",
        reduced,
    )
    scale = np.ones(1, np.float32) if not blobs else np.asarray(blobs[0], np.float32).reshape(-1)
    scaled = g.node("Div", [x, norm], g.temp(f"{name}.div"), f"{name}.div", shape)
    if scale.size == 1:
        factor = g.const(f"{name}.scale", scale.reshape([]))
    else:
        factor = _channel_const(g, f"{name}.scale", scale, len(shape), 1, 1)
    g.node("Mul", [scaled, factor], out, name, shape)
