"""Generated material for examples, tests and benchmarks: a seeded image dataset (PNG files and a
labels file) and a plain CNN classifier of adjustable cost. No download, same bytes every time."""

from __future__ import annotations

import io
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..model import files


def make_images(
    folder: str | os.PathLike,
    count: int,
    size: tuple[int, int] = (64, 64),
    classes: int = 10,
    seed: int = 0,
) -> list[str]:
    """`count` RGB PNG images (smooth blobs plus noise, seeded per image) named img_00000.png…
    and labels.txt (`<name> <class>`, seeded). Returns the image paths in order."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    h, w = size
    labels_rng = np.random.RandomState(seed)
    labels = labels_rng.randint(0, classes, count)
    paths = []
    for k in range(count):
        rng = np.random.RandomState(seed * 1_000_003 + k)
        coarse = rng.randint(0, 256, (h // 8 + 1, w // 8 + 1, 3)).astype(np.float32)
        image = np.kron(coarse, np.ones((8, 8, 1), np.float32))[:h, :w]
        image += rng.normal(0, 12, image.shape)
        name = f"img_{k:05d}.png"
        path = os.path.join(folder, name)
        encoded = io.BytesIO()
        Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(encoded, format="PNG")
        files.write_atomic(path, encoded.getvalue())
        paths.append(path)
    files.write_atomic(
        os.path.join(folder, "labels.txt"),
        "".join(f"img_{k:05d}.png {int(c)}\n" for k, c in enumerate(labels)),
    )
    return paths


def make_classifier(
    size: int = 64,
    widths: tuple[int, ...] = (16, 32, 64),
    classes: int = 10,
    seed: int = 0,
    softmax: bool = False,
) -> onnx.ModelProto:
    """Conv 3x3 (stride 2) + Relu per width, then a 3x3 conv at the last width, global average
    pooling and a classifier; He-normal weights from `seed`, logits with a std of a few units.
    Cost grows with `size` and `widths`."""
    rng = np.random.RandomState(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    x, cin = "images", 3
    for k, cout in enumerate([*widths, widths[-1]]):
        stride = 2 if k < len(widths) else 1
        w = const(f"conv{k}.w", rng.randn(cout, cin, 3, 3) * np.sqrt(2.0 / (cin * 9)))
        b = const(f"conv{k}.b", rng.randn(cout) * 0.1)
        nodes.append(
            helper.make_node(
                "Conv",
                [x, w, b],
                [f"conv{k}"],
                name=f"conv{k}",
                kernel_shape=[3, 3],
                strides=[stride, stride],
                pads=[1, 1, 1, 1],
            )
        )
        nodes.append(helper.make_node("Relu", [f"conv{k}"], [f"relu{k}"], name=f"relu{k}"))
        x, cin = f"relu{k}", cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    w = const("fc.w", rng.randn(classes, cin) * np.sqrt(3.0 / cin))
    b = const("fc.b", rng.randn(classes) * 0.1)
    nodes.append(helper.make_node("Gemm", ["flat", w, b], ["logits"], name="fc", transB=1))
    out = "logits"
    if softmax:
        nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
        out = "probs"
    graph = helper.make_graph(
        nodes,
        "rknnrt_eval_classifier",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="rknnrt"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
