"""Regenerate vendor_layers.json: the vendor toolkit's own layer tables of the calibration models.

    /work/vendor_env/bin/python tests/board/vendor_logs.py OUT_DIR   # rknn-toolkit2 2.5.0

Builds each model int8 (one random calibration input) with RKNN(verbose=True) for each SoC and
keeps, per layer of the "Network Layer Information Table" its build log prints, the op name and
the NPU cycles, plus the "Total Internal/Weight Memory Size" lines. The models are
tests/board/zoo_models.py's and onnx's light ResNet-50; run with PYTHONPATH at the repository
root (the vendor env needs onnx and numpy only, which it has).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np

MODELS = ["light_resnet50", "mobilenetv2", "resnet50_v2", "yolov5s", "yolov8n",
          "deeplabv3_mobilenetv2"]  # fmt: skip
SOCS = ["rk3588", "rk3576", "rk3566", "rk3562"]
_ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+\S+\s+(NPU|CPU|GPU)\s.*?\s(\d+)/(\d+)/(\d+)\s")


def parse(log: str) -> dict:
    rows, memory = [], {}
    for line in log.splitlines():
        body = re.sub(r"^D RKNN: \[[^\]]*\] ", "", line)
        m = _ROW.match(body)
        if m and "Network Layer" not in body:
            rows.append([m[2], m[3], int(m[5])])
        mem = re.match(r"Total (Internal|Weight) Memory Size: ([\d.]+)KB", body)
        if mem:
            memory[mem[1].lower() + "_kb"] = float(mem[2])
    return {"layers": rows, **memory}


def build(onnx_path: str, soc: str, workdir: str) -> str:
    """One verbose int8 build in a subprocess (the vendor prints its log to stdout)."""
    script = f"""
import numpy as np, onnx
from rknn.api import RKNN
m = onnx.load({onnx_path!r})
dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
np.save({workdir!r} + '/x.npy', np.random.RandomState(0).rand(*dims).astype(np.float32))
open({workdir!r} + '/ds.txt', 'w').write({workdir!r} + '/x.npy\\n')
r = RKNN(verbose=True)
r.config(target_platform={soc!r})
assert r.load_onnx({onnx_path!r}) == 0
assert r.build(do_quantization=True, dataset={workdir!r} + '/ds.txt') == 0
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout + done.stderr


def main() -> None:
    import onnx

    from tests.board.zoo_models import ZOO

    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    light = os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light")
    result: dict = {}
    for name in MODELS:
        path = os.path.join(light, "light_resnet50.onnx") if name == "light_resnet50" else (
            os.path.join(out, f"{name}.onnx"))  # fmt: skip
        if name != "light_resnet50":
            onnx.save(ZOO[name][0](), path)
        for soc in SOCS if name != "light_resnet50" else ["rk3588"]:
            result.setdefault(name, {})[soc] = parse(build(path, soc, out))
    target = os.path.join(os.path.dirname(__file__), "vendor_layers.json")
    with open(target, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    print(f"wrote {target}")


if __name__ == "__main__":
    np.random.seed(0)
    main()
