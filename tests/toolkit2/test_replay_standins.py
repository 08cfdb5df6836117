"""The upstream replays' stand-in models and environment (replay_standins.py, replay_env/):
the interfaces the zoo's scripts read, and readings the demos' post-processing can work on.
The replays themselves need the upstream snapshots (python -m tests.toolkit2.replay_upstream)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime as ort
import pytest

from tests.toolkit2 import replay_standins as rs

ENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_env")


def _run(model, feeds: dict) -> dict:  # noqa: ANN001
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _dims(value_info) -> list:  # noqa: ANN001
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _ctc_greedy(probs: np.ndarray) -> list[int]:
    best = probs.argmax(-1)
    return [int(k) for i, k in enumerate(best) if k != 0 and (i == 0 or k != best[i - 1])]


def test_ppocr_rec_interface_is_paddle2onnx_shaped() -> None:
    """Fixed input (convert.py sets no dynamic_input), symbolic output dimensions and a
    sequence reshape whose target comes from a Shape node, as Paddle2ONNX writes the model."""
    model = rs.ppocr_rec()
    assert [(i.name, _dims(i)) for i in model.graph.input] == [("x", [1, 3, 48, 320])]
    assert [(o.name, _dims(o)) for o in model.graph.output] == [
        ("softmax_11.tmp_0", ["p2o.DynamicDimension.2", "p2o.DynamicDimension.3", 6625])]
    assert "Shape" in {n.op_type for n in model.graph.node}
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 48, 320)).astype(np.float32)
    (probs,) = _run(model, {"x": x}).values()
    assert probs.shape == (1, 40, 6625)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)


def test_ppocr_rec_reads_one_character_per_ink_run() -> None:
    """Three dark strokes on a light ground: three characters, blanks between, confidently."""
    x = np.full((1, 3, 48, 320), 0.9, np.float32)
    for left in (40, 140, 240):
        x[:, :, 8:40, left:left + 16] = 0.1
    (probs,) = _run(rs.ppocr_rec(), {"x": x}).values()
    chars = _ctc_greedy(probs[0])
    assert len(chars) >= 3 and set(chars) <= set(rs.REC_CHARS)
    assert probs[0].max(-1).mean() > 0.5  # PPOCR-System drops readings scored below 0.5
    blank = np.full_like(x, 0.9)
    assert _ctc_greedy(_run(rs.ppocr_rec(), {"x": blank})["softmax_11.tmp_0"][0]) == []


def test_ppocr_det_marks_dark_pixels_after_imagenet_normalisation() -> None:
    """The model sees (pixel - mean) / std with PPOCR-Det convert.py's ImageNet values."""
    pixels = np.full((1, 3, 64, 64), 230.0, np.float32)
    pixels[:, :, 20:28, 10:40] = 0.0  # a black word on a light page: sigmoid(12 * 0.45)
    mean = np.array(rs.IMAGENET_MEAN, np.float32).reshape(1, 3, 1, 1)
    std = np.array(rs.IMAGENET_STD, np.float32).reshape(1, 3, 1, 1)
    (prob,) = _run(rs.ppocr_det(64), {"x": (pixels - mean) / std}).values()
    assert prob.shape == (1, 1, 64, 64)
    assert prob[0, 0, 24, 20] > 0.99 and prob[0, 0, 50, 50] < 0.01


def test_yolov8_seg_outputs_as_the_demo_indexes_them() -> None:
    """Per stride: box 64, classes 80 (0..1), score sum 1 (0..1), mask coefficients 32;
    the mask prototypes last (the demo takes input_data[-1] and 4 tensors per branch)."""
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, 640, 640)).astype(np.float32)
    outs = list(_run(rs.yolov8_seg_heads(), {"images": x}).values())
    want = [(1, c, s, s) for s in (80, 40, 20) for c in (64, 80, 1, 32)] + [(1, 32, 160, 160)]
    assert [o.shape for o in outs] == want
    for cls, total in zip(outs[1:12:4], outs[2:12:4]):
        assert 0 <= cls.min() and cls.max() <= 1 and 0 <= total.min() and total.max() <= 1


def test_headless_sitecustomize_makes_gui_calls_harmless(tmp_path) -> None:  # noqa: ANN001
    """With OpenCV present, imshow / waitKey (which fail without a display) do nothing."""
    (tmp_path / "cv2.py").write_text(textwrap.dedent("""
        def imshow(*a):
            raise RuntimeError("no display")
        def waitKey(*a):
            raise RuntimeError("no display")
        def resize(img, size):
            return "real"
    """))
    code = "import cv2; print(cv2.imshow('w', 0), cv2.waitKey(0), cv2.resize(0, 0))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ENV, "headless"),
                                                       str(tmp_path)]))  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.split() == ["None", "-1", "real"]


def test_pillow_cv2_reads_resizes_and_writes(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("PIL", reason="the Pillow cv2 stand-in needs Pillow (test extra)")
    sys.path.insert(0, os.path.join(ENV, "no_cv2"))
    try:
        import cv2  # the stand-in: OpenCV is not installed in the test environment

        if not cv2.__file__.startswith(ENV):
            pytest.skip("OpenCV itself is installed here: the stand-in is not used")
        img = np.zeros((4, 6, 3), np.uint8)
        img[..., 2] = 200  # red in BGR order
        assert cv2.imwrite(str(tmp_path / "a.png"), img)
        back = cv2.imread(str(tmp_path / "a.png"))
        np.testing.assert_array_equal(back, img)
        assert cv2.resize(back, (12, 8)).shape == (8, 12, 3)
        assert cv2.imread(str(tmp_path / "missing.png")) is None
    finally:
        sys.path.remove(os.path.join(ENV, "no_cv2"))
        sys.modules.pop("cv2", None)


def test_torchvision_nms_stand_in_keeps_the_best_of_each_overlap() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (the pytorch extra)")
    sys.path.insert(0, os.path.join(ENV, "always"))
    try:
        from torchvision import ops  # the stand-in (replay_env/always comes first)

        boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30],
                              [0, 0, 10, 9]], dtype=torch.float32)  # fmt: skip
        scores = torch.tensor([0.6, 0.9, 0.5, 0.8])
        # 1 beats 0 (IoU 0.68) and 3 (IoU 0.59 > 0.5); 2 overlaps nothing
        assert ops.nms(boxes, scores, 0.5).tolist() == [1, 2]
        assert ops.nms(boxes, scores, 0.7).tolist() == [1, 3, 2]
    finally:
        sys.path.remove(os.path.join(ENV, "always"))
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            sys.modules.pop(name)
