"""tools/vendor_shipped.py: the rknn-toolkit2 repository's shipped .rknn files replayed (load,
query, run; custom ops registered from their documented behaviour). The snapshot itself is
never committed: the replay test runs where one is given (RKNNRT_TOOLKIT2_SNAPSHOT, or the
default path below); the tool's paths are also tested on committed fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tools import vendor_shipped

HERE = Path(__file__).parent
SNAPSHOT = Path(os.environ.get("RKNNRT_TOOLKIT2_SNAPSHOT", "/tmp/replay_work/rknn-toolkit2"))
DEMO = "rknpu2/examples/rknn_custom_op_demo/rknn_custom_pytorch_op_demo/model"


def test_a_plain_file_loads_queries_and_runs() -> None:
    row = vendor_shipped.replay(HERE / "fixtures_arch" / "argmax_rk3566_i8.rknn")
    assert row["init"] == 0 and row["run"] == 0 and row["custom_ops"] == []
    assert row["n_input"] == 1 and row["n_output"] == 1 and row["custom_string"]
    assert len(row["attrs"]["NATIVE_INPUT_ATTR"]) == 1


def test_a_custom_op_file_fails_before_registration(rknn_log) -> None:  # type: ignore[no-untyped-def]
    row = vendor_shipped.replay(HERE / "fixtures_custom" / "custom_rv1126b_fp16.rknn")
    assert row["init"] == 0 and row["run_unregistered"] == -1
    assert row["custom_ops"] == ["cstDualResidual", "cstChannelAffine"]
    assert row["run"] == "no op written here for ['cstChannelAffine']"
    assert len(rknn_log.take("E")) == 1


def test_dual_residual_matches_its_definition(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The tool's cstDualResidual callback on arrays described as custom op tensors (its
    attribute read is replaced: no context here)."""
    import rknnrt as rk
    from rknnrt.api.custom_op_api import custom_op_tensor

    x = np.linspace(-2, 2, 12, dtype=np.float32)
    y = np.cos(x).astype(np.float32)
    outs = [np.zeros(12, np.float32), np.zeros(12, np.float32)]
    ins_c = (rk.rknn_custom_op_tensor * 2)(custom_op_tensor(x), custom_op_tensor(y))
    outs_c = (rk.rknn_custom_op_tensor * 2)(*(custom_op_tensor(o) for o in outs))
    monkeypatch.setattr(vendor_shipped, "_alpha", lambda op_ctx: 0.5)
    assert vendor_shipped._dual_residual(None, ins_c, 2, outs_c, 2) == 0
    np.testing.assert_array_equal(outs[0], x * np.float32(0.5) - y)
    np.testing.assert_array_equal(outs[1], y * np.float32(0.5) - x)


@pytest.mark.slow
@pytest.mark.skipif(not (SNAPSHOT / DEMO).is_dir(),
                    reason=f"no rknn-toolkit2 snapshot at {SNAPSHOT} (RKNNRT_TOOLKIT2_SNAPSHOT)")
def test_every_shipped_file_loads_and_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    assert vendor_shipped.main([str(SNAPSHOT)]) == 0
    printed = capsys.readouterr().out
    assert "14 of 14 files load, 14 run" in printed
    rows = [vendor_shipped.replay(p) for p in sorted((SNAPSHOT / DEMO).rglob("*.rknn"))]
    assert len(rows) == 5
    for row in rows:  # the demo's stored outputs: float32 x alpha - y of the float32 inputs
        assert row["run_unregistered"] == -1 and row["register"] == 0 and row["run"] == 0
        for c in row["vs_stored_outputs"]:
            assert c["cosine"] >= 0.99999 and c["max_abs"] < 2.5e-3  # float16 tensors
