"""Issue 27 item 10: a Python process that exits while a daemon thread is inside rknn_run exits
cleanly (the in-flight run is cancelled and waited for at interpreter exit) instead of aborting
in onnxruntime's teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from . import bombs

SCRIPT = """
import ctypes, sys, threading, time
import numpy as np
import rknnrt as rk

blob = open(sys.argv[1], "rb").read()
ctx = rk.rknn_context()
assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == 0
x = np.zeros((1, 64, 64, 3), np.float32)
inputs = (rk.rknn_input * 1)()
inputs[0].buf, inputs[0].size, inputs[0].fmt = x.ctypes.data, x.nbytes, rk.RKNN_TENSOR_NHWC
inputs[0].type = rk.RKNN_TENSOR_FLOAT32
assert rk.rknn_inputs_set(ctx, 1, inputs) == 0
started = threading.Event()

def loop():
    while True:
        started.set()
        rk.rknn_run(ctx, None)

threading.Thread(target=loop, daemon=True).start()
started.wait()
time.sleep(0.05)
print("exiting", flush=True)
"""


@pytest.mark.slow  # two interpreters, one killed mid-run
def test_exit_with_a_run_in_flight(three_models, tmp_path) -> None:
    model = tmp_path / "slow.rknn"
    model.write_bytes(bombs.many_tensors(three_models["float32"], count=300,
                                         elements=1 << 20, from_input=True))  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", SCRIPT, str(model)], cwd=root,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
        assert proc.stdout == "exiting\n"
