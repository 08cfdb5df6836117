"""load_tensorflow / load_tflite for real, through tf2onnx: the `tensorflow` extra is installed
into a virtual environment (once, cached) when this interpreter lacks it; tf_case.py makes the
models there and compares rknnrt's outputs with TensorFlow's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _extra() -> list[str]:
    """The requirements of pyproject.toml's `tensorflow` extra."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    found = re.search(r"^tensorflow = \[(.*?)\]", text, re.M)
    assert found, "pyproject.toml has no tensorflow extra"
    return re.findall(r'"([^"]+)"', found.group(1))


@pytest.fixture(scope="module")
def tf_python() -> str:
    if importlib.util.find_spec("tensorflow") and importlib.util.find_spec("tf2onnx"):
        return sys.executable
    venv = os.environ.get("RKNNRT_TF_VENV") or os.path.expanduser("~/.cache/rknnrt/tf-venv")
    python = os.path.join(venv, "bin", "python")
    probe = [python, "-c", "import tensorflow, tf2onnx"]
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    done = subprocess.run([python, "-m", "pip", "install", "-q", *_extra()],
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"the tensorflow extra cannot be installed here: {done.stderr[-300:]}")
    return python


@pytest.mark.slow
def test_frozen_pb_and_tflite_match_tensorflow(tf_python, tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([tf_python, "-m", "tests.toolkit2.tf_case", str(tmp_path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in ("pb", "tflite"):
        fp16, int8 = report[f"{kind}_fp16"], report[f"{kind}_int8"]
        assert "error" not in fp16 and "error" not in int8, (fp16, int8)
        assert fp16["shape"] == [1, 5] and fp16["cosine"] > 0.99999 and fp16["max_abs"] < 2e-3
        assert int8["cosine"] > 0.999
    assert report["tflite_nchw_flag"]["cosine"] > 0.99999
