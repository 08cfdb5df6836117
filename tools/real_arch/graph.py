"""A small graph writer for the real-architecture set: one method per layer kind, NCHW shapes
tracked per tensor, weights drawn from one seeded generator (He-normal convolutions, small
biases, BatchNorms folded as the exporters of torchvision/ultralytics/timm fold them)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Net:
    """Appends nodes to one graph; `shape[name]` is each tensor's static shape."""

    def __init__(self, name: str, input_shape: list[int], seed: int = 0, opset: int = 14,
                 input_name: str = "images") -> None:  # fmt: skip
        self.name, self.opset, self.input_name = name, opset, input_name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.shape: dict[str, list[int]] = {input_name: list(input_shape)}
        self.outputs: list[str] = []
        self._count = 0

    # -- plumbing -------------------------------------------------------------------------
    def fresh(self, kind: str) -> str:
        self._count += 1
        return f"/{kind}_{self._count}"

    def const(self, value: np.ndarray, kind: str = "c") -> str:
        name = self.fresh(kind)
        value = np.asarray(value)
        self.inits.append(numpy_helper.from_array(value, name))
        self.shape[name] = list(value.shape)
        return name

    def op(self, op: str, inputs: list[str], shape: list[int], **attrs) -> str:
        out = self.fresh(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{out}_node", **attrs))
        self.shape[out] = list(shape)
        return out

    def ops(self, op: str, inputs: list[str], shapes: list[list[int]], **attrs) -> list[str]:
        outs = [self.fresh(op) for _ in shapes]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{outs[0]}_node", **attrs))
        for out, shape in zip(outs, shapes):
            self.shape[out] = list(shape)
        return outs

    def output(self, name: str) -> None:
        self.outputs.append(name)

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(self.input_name, TensorProto.FLOAT,
                                           self.shape[self.input_name])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, self.shape[o])
             for o in self.outputs],
            self.inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        return model

    # -- layers ---------------------------------------------------------------------------
    def conv(self, x: str, cout: int, k: int = 1, s: int | tuple[int, int] = 1, groups: int = 1,
             d: int = 1, act: str | None = None, p: int | None = None) -> str:  # fmt: skip
        n, cin, h, w = self.shape[x]
        p = d * (k - 1) // 2 if p is None else p
        sh, sw = (s, s) if isinstance(s, int) else s
        fan_in = cin // groups * k * k
        wt = self.rng.normal(0, (2 / fan_in) ** 0.5, (cout, cin // groups, k, k))
        bias = self.rng.normal(0, 0.05, cout)
        oh = (h + 2 * p - d * (k - 1) - 1) // sh + 1
        ow = (w + 2 * p - d * (k - 1) - 1) // sw + 1
        y = self.op("Conv", [x, self.const(wt.astype(np.float32), "w"),
                             self.const(bias.astype(np.float32), "b")],
                    [n, cout, oh, ow], kernel_shape=[k, k], strides=[sh, sw], pads=[p] * 4,
                    group=groups, dilations=[d, d])  # fmt: skip
        return self.act(y, act)

    def act(self, x: str, act: str | None) -> str:
        shape = self.shape[x]
        if act is None:
            return x
        if act == "relu":
            return self.op("Relu", [x], shape)
        if act == "relu6":
            return self.op("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))],
                           shape)  # fmt: skip
        if act == "silu":
            return self.op("Mul", [x, self.op("Sigmoid", [x], shape)], shape)
        if act == "sigmoid":
            return self.op("Sigmoid", [x], shape)
        if act == "hardswish":
            return self.op("HardSwish", [x], shape)
        if act == "hardsigmoid":
            return self.op("HardSigmoid", [x], shape, alpha=1 / 6)
        if act == "gelu":  # the exporters' erf form: x * 0.5 * (1 + erf(x / sqrt(2)))
            e = self.op("Erf", [self.op("Div", [x, self.const(np.float32(2**0.5))], shape)],
                        shape)  # fmt: skip
            one = self.op("Add", [e, self.const(np.float32(1))], shape)
            return self.op("Mul", [self.op("Mul", [x, one], shape),
                                   self.const(np.float32(0.5))], shape)  # fmt: skip
        if act == "gelu_half_first":  # x * 0.5 first, then times 1 + erf(x * (1 / sqrt 2))
            # (the Python formula's order, the scaling as a Mul: onnxslim, tf2onnx)
            half = self.op("Mul", [x, self.const(np.float32(0.5))], shape)
            e = self.op("Erf", [self.op("Mul", [x, self.const(np.float32(0.5**0.5))], shape)],
                        shape)  # fmt: skip
            one = self.op("Add", [e, self.const(np.float32(1))], shape)
            return self.op("Mul", [half, one], shape)
        if act == "gelu_tanh":  # torch's approximate="tanh" below opset 20, HF's gelu_new:
            # x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
            cube = self.op("Pow", [x, self.const(np.float32(3))], shape)
            inner = self.op("Add", [x, self.op("Mul", [cube, self.const(np.float32(0.044715))],
                                               shape)], shape)  # fmt: skip
            t = self.op("Tanh", [self.op("Mul", [inner, self.const(np.float32((2 / np.pi) ** 0.5))],
                                         shape)], shape)  # fmt: skip
            half = self.op("Mul", [x, self.const(np.float32(0.5))], shape)
            return self.op("Mul", [half, self.op("Add", [t, self.const(np.float32(1))], shape)],
                           shape)  # fmt: skip
        raise ValueError(act)

    def binary(self, op: str, a: str, b: str) -> str:
        sa, sb = self.shape[a], self.shape[b]
        rank = max(len(sa), len(sb))
        sa, sb = [1] * (rank - len(sa)) + sa, [1] * (rank - len(sb)) + sb
        return self.op(op, [a, b], [max(u, v) for u, v in zip(sa, sb)])

    def add(self, a: str, b: str) -> str:
        return self.binary("Add", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.binary("Mul", a, b)

    def concat(self, xs: list[str], axis: int = 1) -> str:
        shape = list(self.shape[xs[0]])
        shape[axis] = sum(self.shape[x][axis] for x in xs)
        return self.op("Concat", xs, shape, axis=axis)

    def split(self, x: str, parts: list[int], axis: int = 1) -> list[str]:
        shapes = []
        for c in parts:
            shape = list(self.shape[x])
            shape[axis] = c
            shapes.append(shape)
        return self.ops("Split", [x, self.const(np.array(parts, np.int64))], shapes, axis=axis)

    def pool(self, x: str, kind: str, k: int, s: int, p: int = 0) -> str:
        n, c, h, w = self.shape[x]
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return self.op(kind, [x], [n, c, oh, ow], kernel_shape=[k, k], strides=[s, s],
                       pads=[p] * 4)  # fmt: skip

    def gap(self, x: str) -> str:
        n, c = self.shape[x][:2]
        return self.op("GlobalAveragePool", [x], [n, c, 1, 1])

    def resize(self, x: str, size: list[int], mode: str = "nearest") -> str:
        n, c = self.shape[x][:2]
        sizes = self.const(np.array([n, c, *size], np.int64))
        attrs = {"mode": mode}
        if mode == "linear":
            attrs["coordinate_transformation_mode"] = "half_pixel"
        return self.op("Resize", [x, "", "", sizes], [n, c, *size], **attrs)

    def reshape(self, x: str, shape: list[int]) -> str:
        return self.op("Reshape", [x, self.const(np.array(shape, np.int64))], shape)

    def transpose(self, x: str, perm: list[int]) -> str:
        return self.op("Transpose", [x], [self.shape[x][p] for p in perm], perm=perm)

    def softmax(self, x: str, axis: int = -1) -> str:
        return self.op("Softmax", [x], self.shape[x], axis=axis)

    def matmul(self, a: str, b: str) -> str:
        sa, sb = self.shape[a], self.shape[b]
        return self.op("MatMul", [a, b], [*sa[:-1], sb[-1]])

    def linear(self, x: str, cout: int, act: str | None = None) -> str:
        """A token-wise fully connected layer (MatMul + Add), as transformer exports have."""
        cin = self.shape[x][-1]
        w = self.rng.normal(0, (1 / cin) ** 0.5, (cin, cout)).astype(np.float32)
        y = self.matmul(x, self.const(w, "fc"))
        b = self.const(self.rng.normal(0, 0.02, cout).astype(np.float32), "fcb")
        return self.act(self.add(y, b), act)

    def gemm(self, x: str, classes: int) -> str:
        n, c = self.shape[x][:2]
        flat = self.op("Flatten", [x], [n, c], axis=1)
        w = self.rng.normal(0, (1 / c) ** 0.5, (classes, c)).astype(np.float32)
        return self.op("Gemm", [flat, self.const(w, "fc"),
                                self.const(np.zeros(classes, np.float32), "fcb")],
                       [n, classes], transB=1)  # fmt: skip

    def layer_norm(self, x: str, split: bool) -> str:
        """LayerNorm over the last axis: one LayerNormalization op (opset 17), or the pieces
        older exporters and onnxslim leave (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
        Mul, Add)."""
        shape = self.shape[x]
        dim = shape[-1]
        gamma = self.const(self.rng.uniform(0.8, 1.2, dim).astype(np.float32), "ln_g")
        beta = self.const(self.rng.normal(0, 0.05, dim).astype(np.float32), "ln_b")
        if not split:
            return self.op("LayerNormalization", [x, gamma, beta], shape, axis=-1,
                           epsilon=1e-6)  # fmt: skip
        mean_shape = [*shape[:-1], 1]

        def mean(t: str) -> str:  # (opset 18: the axes are an input)
            if self.opset >= 18:
                return self.op("ReduceMean", [t, self.const(np.array([-1], np.int64), "axes")],
                               mean_shape, keepdims=1)  # fmt: skip
            return self.op("ReduceMean", [t], mean_shape, axes=[-1], keepdims=1)

        centred = self.binary("Sub", x, mean(x))
        var = mean(self.op("Pow", [centred, self.const(np.float32(2))], shape))
        eps = self.const(np.float32(1e-6))
        std = self.op("Sqrt", [self.add(var, eps)], mean_shape)
        return self.add(self.mul(self.binary("Div", centred, std), gamma), beta)
