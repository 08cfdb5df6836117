"""Run in an interpreter with the `tensorflow` extra (test_tensorflow.py starts it): makes a
small TensorFlow model (a SavedModel, the frozen .pb of its function and the .tflite converted
from the SavedModel), converts each with RKNN (float16 and int8), and prints one JSON line of
the comparisons with TensorFlow's own outputs.

    python -m tests.toolkit2.tf_case FOLDER
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def _models(folder: str):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    rng = np.random.RandomState(0)

    class Net(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = tf.Variable(rng.randn(3, 3, 3, 8).astype(np.float32) * 0.3)
            self.b1 = tf.Variable(rng.randn(8).astype(np.float32) * 0.1)
            self.w2 = tf.Variable(rng.randn(8, 5).astype(np.float32) * 0.3)

        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 3], tf.float32, name="image")])
        def __call__(self, x):
            y = tf.nn.relu(tf.nn.conv2d(x, self.w1, 1, "SAME") + self.b1)
            y = tf.nn.max_pool2d(y, 2, 2, "VALID")
            y = tf.reduce_mean(y, axis=[1, 2])
            return tf.identity(tf.matmul(y, self.w2), name="logits")

    net = Net()
    saved = os.path.join(folder, "saved")
    tf.saved_model.save(net, saved)
    frozen = convert_variables_to_constants_v2(net.__call__.get_concrete_function())
    graph_def = frozen.graph.as_graph_def()
    pb = os.path.join(folder, "net.pb")
    with open(pb, "wb") as f:
        f.write(graph_def.SerializeToString())
    inputs = [t.name.split(":")[0] for t in frozen.inputs]
    outputs = [t.name.split(":")[0] for t in frozen.outputs]
    lite = tf.lite.TFLiteConverter.from_saved_model(saved).convert()
    tflite = os.path.join(folder, "net.tflite")
    with open(tflite, "wb") as f:
        f.write(lite)
    return net, pb, inputs, outputs, tflite


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main(folder: str) -> None:
    from rknnrt.toolkit import RKNN

    net, pb, inputs, outputs, tflite = _models(folder)
    rng = np.random.RandomState(1)
    image = rng.rand(1, 16, 16, 3).astype(np.float32)  # NHWC, as TensorFlow takes it
    expected = net(image).numpy()
    data = [rng.rand(1, 16, 16, 3).astype(np.float32) for _ in range(4)]
    report = {"inputs": inputs, "outputs": outputs}
    loads = {
        "pb": lambda r: r.load_tensorflow(pb, inputs, [[1, 16, 16, 3]], outputs),
        "tflite": lambda r: r.load_tflite(tflite),
    }
    for kind, load in loads.items():
        for quantise in (False, True):
            rknn = RKNN()
            rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1])
            nchw = [d.transpose(0, 3, 1, 2) for d in data] if quantise else None
            steps = [load(rknn), rknn.build(do_quantization=quantise, dataset=nchw),
                     rknn.init_runtime()]  # fmt: skip
            key = f"{kind}_{'int8' if quantise else 'fp16'}"
            if any(steps):
                report[key] = {"error": rknn.last_error}
                continue
            (out,) = rknn.inference([image])  # NHWC, data_format's default
            report[key] = {"cosine": _cos(out, expected), "shape": list(out.shape),
                           "max_abs": float(np.abs(out - expected).max())}  # fmt: skip
            rknn.release()
    # input_is_nchw=True: the model's 4-D input is taken as it is (here NHWC data, so it is
    # given with data_format='nchw', which passes it unchanged)
    rknn = RKNN()
    rknn.config(mean_values=[0] * 16, std_values=[1] * 16)
    steps = [rknn.load_tflite(tflite, input_is_nchw=True), rknn.build(do_quantization=False),
             rknn.init_runtime()]  # fmt: skip
    if any(steps):
        report["tflite_nchw_flag"] = {"error": rknn.last_error}
    else:
        (out,) = rknn.inference([image], data_format="nchw")
        report["tflite_nchw_flag"] = {"cosine": _cos(out, expected)}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
