"""cstSigmoid registered from C through librknnrt.so (the SDK built by `rknnrt sdk`): a C
application with C callbacks, attributes read with rknn_custom_op_get_op_attr."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cst_helpers import sigmoid
from cst_models import reference

from rknnrt.capi.build import missing_requirements

C_DIR = Path(__file__).parent / "c"
_MISSING = missing_requirements()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if _MISSING:
        pytest.skip("cannot build librknnrt.so here: " + "; ".join(_MISSING))
    from rknnrt.capi.sdk import write_sdk

    sdk = write_sdk(tmp_path_factory.mktemp("sdk"))
    binary = tmp_path_factory.mktemp("bin") / "cst_sigmoid_app"
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "no C compiler"
    command = [
        compiler,
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        str(sdk / "include"),
        str(C_DIR / "cst_sigmoid_app.c"),
        "-o",
        str(binary),
        "-L",
        str(sdk / "lib"),
        "-lrknnrt",
        "-lm",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return sdk, binary


@pytest.mark.slow
def test_c_application_registers_cst_sigmoid(app, sigmoid_onnx, sigmoid_model, tmp_path):
    sdk, binary = app
    model = tmp_path / "cst.rknn"
    model.write_bytes(sigmoid_model)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LD_LIBRARY_PATH": str(sdk / "lib"),
        "HOME": os.environ.get("HOME", "/"),
    }
    done = subprocess.run(
        [str(binary), str(model), "3"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["second"] == "register -5"  # RKNN_ERR_PARAM_INVALID, and the runs still work
    assert lines["computed"] == "3"  # destroy saw three computes
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 1 and "already registered" in errors[0]
    y = np.array(lines["y"].split(), np.float32).reshape(1, 4, 8, 8)
    x = (1.5 * np.sin(np.arange(192, dtype=np.float32))).astype(np.float32).reshape(1, 3, 8, 8)
    np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)
