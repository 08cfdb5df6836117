"""TensorFlow stand-ins for the model files the vendor's TF/TFLite examples download, with the
same node names and shapes (run where the `tensorflow` extra is installed; replay_upstream)."""

from __future__ import annotations

import numpy as np


def _graph(build) -> bytes:
    """A frozen GraphDef (weights as constants) made by `build(tf)` in a TF1-style graph."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        build(tf.compat.v1, np.random.RandomState(0))
    return graph.as_graph_def().SerializeToString()


def _conv(v1, rng, x, cin: int, cout: int, stride: int, name: str):
    w = v1.constant((rng.randn(3, 3, cin, cout) * np.sqrt(1.0 / (9 * cin))).astype(np.float32))
    y = v1.nn.conv2d(x, w, [1, stride, stride, 1], "SAME", name=name)
    return v1.nn.relu6(y + v1.constant((rng.randn(cout) * 0.1).astype(np.float32)))


def mobilenet_v1_pb() -> bytes:
    """mobilenet_v1_1.0_224_frozen.pb's interface: 'input' [1,224,224,3] ->
    'MobilenetV1/Logits/SpatialSqueeze' [1,1001]."""

    def build(v1, rng):
        x = v1.placeholder(v1.float32, [1, 224, 224, 3], name="input")
        for k, (cin, cout) in enumerate(((3, 8), (8, 16), (16, 32), (32, 32))):
            x = _conv(v1, rng, x, cin, cout, 4 if k < 2 else 2, f"MobilenetV1/Conv2d_{k}")
        x = v1.reduce_mean(x, axis=[1, 2], keepdims=True)
        w = v1.constant((rng.randn(1, 1, 32, 1001) * 0.3).astype(np.float32))
        logits = v1.nn.conv2d(x, w, [1, 1, 1, 1], "VALID")
        v1.squeeze(logits, [1, 2], name="MobilenetV1/Logits/SpatialSqueeze")

    return _graph(build)


def ssd_mobilenet_v2_pb() -> bytes:
    """ssd_mobilenet_v2.pb's interface: 'FeatureExtractor/MobilenetV2/MobilenetV2/input'
    [1,300,300,3] -> 'concat' boxes [1,1917,1,4] and 'concat_1' scores [1,1917,91]."""

    def build(v1, rng):
        x = v1.placeholder(v1.float32, [1, 300, 300, 3],
                           name="FeatureExtractor/MobilenetV2/MobilenetV2/input")  # fmt: skip
        for k, (cin, cout) in enumerate(((3, 8), (8, 16), (16, 16))):
            x = _conv(v1, rng, x, cin, cout, 4, f"FeatureExtractor/conv{k}")
        f = v1.reshape(v1.reduce_mean(x, axis=[1, 2]), [1, 16])
        boxes = v1.matmul(f, v1.constant((rng.randn(16, 1917 * 4) * 0.3).astype(np.float32)))
        v1.reshape(boxes, [1, 1917, 1, 4], name="concat")
        scores = v1.matmul(f, v1.constant((rng.randn(16, 1917 * 91) * 0.3).astype(np.float32)))
        v1.reshape(scores, [1, 1917, 91], name="concat_1")

    return _graph(build)


def mobilenet_v1_tflite() -> bytes:
    """mobilenet_v1_1.0_224.tflite's interface: one [1,224,224,3] input -> [1,1001]."""
    import tensorflow as tf

    rng = np.random.RandomState(0)
    weights = [(rng.randn(3, 3, cin, cout) * np.sqrt(1.0 / (9 * cin))).astype(np.float32)
               for cin, cout in ((3, 8), (8, 16), (16, 32))]  # fmt: skip
    head = (rng.randn(32, 1001) * 0.3).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32, name="input")])
    def net(x):
        for w in weights:
            x = tf.nn.relu6(tf.nn.conv2d(x, w, 4 if w.shape[2] < 16 else 2, "SAME"))
        return tf.nn.softmax(tf.matmul(tf.reduce_mean(x, axis=[1, 2]), head))

    return tf.lite.TFLiteConverter.from_concrete_functions([net.get_concrete_function()],
                                                           net).convert()  # fmt: skip
