"""The onnx package's light models with weights re-drawn from a seed (as shipped, every weight
is 0.02): He-normal Conv/Gemm weights, small random biases, BatchNorm statistics measured on
uniform[0,1) inputs layer by layer, and the final logits scaled to a standard deviation of ~3
(/work/shared/spec/README.md). The folded model is saved as ONNX for both converters.

usage: PYTHONPATH=. python -m tools.vendor_diff.light light_squeezenet OUT.onnx [--seed 0]
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from rknnrt.toolkit.passes import fold_constants, remove_identity

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _run(model: onnx.ModelProto, names: list[str], x: np.ndarray) -> list[np.ndarray]:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(probe.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    runs = [session.run(names, {model.graph.input[0].name: x[k : k + 1]}) for k in range(len(x))]
    return [np.concatenate(values) for values in zip(*runs)]


def redraw(name: str, seed: int = 0) -> onnx.ModelProto:
    model = remove_identity.run(fold_constants.run(onnx.load(os.path.join(LIGHT, f"{name}.onnx"))))
    inits = {t.name: t for t in model.graph.initializer}
    inputs = {t.name for t in model.graph.initializer}
    keep = [vi for vi in model.graph.input if vi.name not in inputs]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    rng = np.random.RandomState(seed)

    def put(tensor_name: str, array: np.ndarray) -> None:
        inits[tensor_name].CopyFrom(numpy_helper.from_array(array.astype(np.float32), tensor_name))

    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm") and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])
            fan_in = int(np.prod(w.shape[1:])) if node.op_type == "Conv" else w.shape[-1]
            put(node.input[1], rng.randn(*w.shape) * np.sqrt(2.0 / fan_in))
            if len(node.input) > 2 and node.input[2] in inits:
                b = numpy_helper.to_array(inits[node.input[2]])
                put(node.input[2], rng.randn(*b.shape) * 0.01)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.RandomState(seed + 1).rand(4, *shape[1:]).astype(np.float32)
    for node in model.graph.node:  # in order: each BN sees the already-normalised layers
        if node.op_type != "BatchNormalization":
            continue
        (value,) = _run(model, [node.input[0]], x)
        axes = (0,) + tuple(range(2, value.ndim))
        c = value.shape[1]
        put(node.input[1], 1.0 + 0.1 * rng.randn(c))
        put(node.input[2], 0.1 * rng.randn(c))
        put(node.input[3], value.mean(axis=axes))
        put(node.input[4], value.var(axis=axes) + 1e-3)
    last = next(n for n in reversed(model.graph.node) if n.op_type in ("Conv", "Gemm"))
    (logits,) = _run(model, [last.output[0]], x)
    factor = 3.0 / max(float(logits.std()), 1e-6)
    for k in (1, 2):
        if len(last.input) > k and last.input[k] in inits:
            put(last.input[k], numpy_helper.to_array(inits[last.input[k]]) * factor)
    return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    onnx.save(redraw(args.name, args.seed), args.out)


if __name__ == "__main__":
    main()
