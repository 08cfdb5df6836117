"""The first call from C pays for `import rknnrt` (docs/c-library.md): onnx and onnxruntime
(~75 ms together) are imported only once a model is loaded or converted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("onnx", "onnxruntime")


def _modules_after(code: str) -> list[str]:
    """The onnx/onnxruntime modules loaded by a fresh interpreter after running `code`."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True, timeout=120)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_rknnrt_leaves_onnx_and_onnxruntime_unloaded():
    assert _modules_after("import rknnrt as rk; import rknnrt.lite; import rknnrt.capi") == []


def test_querying_without_a_model_leaves_them_unloaded_and_loading_one_imports_them(
    default_model_bytes, tmp_path
):
    model = tmp_path / "m.rknnrt"
    model.write_bytes(default_model_bytes)
    no_model = (
        "import ctypes, rknnrt as rk\n"
        "n = rk.rknn_input_output_num()\n"
        "assert rk.rknn_query(rk.rknn_context(0), rk.RKNN_QUERY_IN_OUT_NUM, n, "
        "ctypes.sizeof(n)) == rk.RKNN_ERR_CTX_INVALID\n"
    )
    assert _modules_after(no_model) == []
    loaded = _modules_after(
        "import ctypes, rknnrt as rk\n"
        f"data = open({str(model)!r}, 'rb').read()\n"
        "ctx = rk.rknn_context()\n"
        "assert rk.rknn_init(ctx, data, len(data), 0, None) == 0\n"
        "n = rk.rknn_input_output_num()\n"
        "assert rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, n, ctypes.sizeof(n)) == 0\n"
        "assert (n.n_input, n.n_output) == (1, 1), (n.n_input, n.n_output)\n"
        "assert rk.rknn_destroy(ctx) == 0\n"
    )
    assert "onnx" in loaded and "onnxruntime" in loaded
