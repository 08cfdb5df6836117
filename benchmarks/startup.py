"""A fresh process's start-up: what a C program's first rknn_init, a CLI call or a test's child
process pays before its first inference, against a bare interpreter in the same run.

Each case runs in its own `python -c` child, alternately, and the child's CPU time (user +
system, from os.times of the children) is recorded, so that machine noise hits every case
alike. The ml_dtypes module (onnx imports it) is timed alone because its 0.7.0 release spends
about 1.2 s of CPU at import on this project's machines, five times 0.6.0 (see pyproject.toml).

    python benchmarks/startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_INIT = """
import ctypes, sys
import rknnrt as rk
blob = open(sys.argv[1], "rb").read()
ctx = rk.rknn_context()
assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == 0
"""

CASES = {
    "python": "pass",
    "import numpy": "import numpy",
    "import ml_dtypes": "import ml_dtypes",
    "import onnx": "import onnx",
    "first rknn_init": _INIT,
}


def child_cpu_seconds(code: str, *args: str) -> float:
    before = os.times()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RKNNRT_KEEP_PRIORITY": "1"}
    subprocess.run([sys.executable, "-c", code, *args], check=True, env=env)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def default_model_file(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from rknnrt.toolkit import RKNN
    from rknnrt.toolkit.samples import default_model

    onnx_path = folder / "default.onnx"
    onnx_path.write_bytes(default_model().SerializeToString())
    rknn = RKNN(verbose=False)
    rknn.config(mean_values=[[0, 0, 0]], std_values=[[1, 1, 1]])
    assert rknn.load_onnx(model=str(onnx_path)) == 0
    assert rknn.build(do_quantization=False) == 0
    path = folder / "default.rknn"
    assert rknn.export_rknn(str(path)) == 0
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = str(default_model_file(Path(tmp)))
        times: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.repeat):
            for name, code in CASES.items():
                times[name].append(child_cpu_seconds(code, model))
    base = statistics.median(times["python"])
    print(f"ml_dtypes {importlib.metadata.version('ml_dtypes')}, "
          f"onnx {importlib.metadata.version('onnx')}, {args.repeat} runs each")  # fmt: skip
    print(f"{'case':<18} {'CPU s (median)':>15} {'x bare python':>14}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<18} {median:>15.3f} {median / base:>14.1f}")


if __name__ == "__main__":
    main()
