"""tools/replay/standins.py: the stand-in models have the interfaces the vendor demos read
(tools/replay_demos.py replays the demos themselves; it needs the snapshots, so it is not here)."""

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "replay"))
import standins  # noqa: E402

EXPECTED = {  # name -> (input name, NCHW input, {output: shape}) as the demos read them
    "mobilenet_v1": ("input", (1, 3, 224, 224), {"output": (1, 1001)}),
    "resnet50": ("input", (1, 3, 224, 224), {"output": (1, 1000)}),
    "yolov5": ("images", (1, 3, 640, 640),
               {"output0": (1, 255, 80, 80), "output1": (1, 255, 40, 40),
                "output2": (1, 255, 20, 20)}),
    "retinaface": ("input0", (1, 3, 320, 320),
                   {"output0": (1, 4200, 4), "572": (1, 4200, 2), "571": (1, 4200, 10)}),
    "ppocr_det": ("x", (1, 3, 480, 480), {"sigmoid_0.tmp_0": (1, 1, 480, 480)}),
    "ppocr_rec": ("x", (1, 3, 48, 320), {"softmax_5.tmp_0": (1, 40, 6625)}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_standin_interface(name: str) -> None:
    in_name, shape, outs = EXPECTED[name]
    model = standins.MAKERS[name]()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {in_name: x})))
    assert {k: v.shape for k, v in got.items()} == outs
    if name == "retinaface":  # conf is a softmax over face / background
        np.testing.assert_allclose(got["572"].sum(-1), 1.0, rtol=1e-5)


def test_ppocr_det_standin_marks_dark_pixels() -> None:
    """The DB stand-in's map is high on dark (text) pixels and low on a light background."""
    sess = ort.InferenceSession(standins.ppocr_det(32).SerializeToString(),
                                providers=["CPUExecutionProvider"])  # fmt: skip
    x = np.ones((1, 3, 32, 32), np.float32)
    x[:, :, 10:14, 4:20] = 0.0  # a dark word on white
    (prob,) = sess.run(None, {"x": x})
    assert prob[0, 0, 12, 10] > 0.99 and prob[0, 0, 28, 28] < 0.01


def test_yolov8_and_custom_op_standins() -> None:
    y8 = standins.yolov8()
    assert [o.name for o in y8.graph.output] == [
        f"{k}{i}" for i in range(3) for k in ("box", "score", "sum")
    ]
    yolox = standins.yolox_custom_sigmoid()
    assert sum(n.op_type == "cstSigmoid" for n in yolox.graph.node) == 6
    assert [d.dim_value for d in yolox.graph.output[2].type.tensor_type.shape.dim] == [
        1,
        85,
        20,
        20,
    ]
