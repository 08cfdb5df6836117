"""tools/vendor_diff/real_size.py's rknnrt side (the vendor side needs the vendor's toolkit): a
vendor file against its simulator's outputs through the C-shaped API, on committed fixtures."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tools.vendor_diff import real_size

HEADS = Path(__file__).parent / "fixtures_heads"


def _fixture(stem: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(HEADS / f"{stem}.npz", allow_pickle=False) as data:
        return data["in0"][0], data["out0"][0]


def test_an_int8_file_is_measured_in_steps_of_its_queried_output_scale() -> None:
    x, sim = _fixture("v8head_rk3576_i8")
    row = real_size.replay(HEADS / "v8head_rk3576_i8.rknn", x, [sim], reference=sim)
    assert row.init == 0 and row.error == ""
    assert row.cos > 0.9999 and 0.99 <= row.within_one < 1.0 and row.max_steps == 2.0
    assert abs(row.sim_cos_float - 1) < 1e-12 and row.cos_float == row.cos  # (reference: sim)
    moved = sim.copy()
    moved.reshape(-1)[:10] += 3 * 0.26525  # three steps of its output's scale (reported.json)
    worse = real_size.replay(HEADS / "v8head_rk3576_i8.rknn", x, [moved])
    assert worse.max_steps >= 3 and worse.within_one < row.within_one


def test_a_float16_file_has_a_cosine_and_no_steps() -> None:
    x, sim = _fixture("widestem_rk3576_fp16")
    row = real_size.replay(HEADS / "widestem_rk3576_fp16.rknn", x, [sim])
    assert row.init == 0 and row.cos > 0.99999
    assert math.isnan(row.within_one) and math.isnan(row.cos_float)


def test_a_file_rknn_init_refuses_is_a_row_with_its_status_and_e_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken_rk3576_i8.rknn"
    broken.write_bytes((HEADS / "oc1_rk3576_i8.rknn").read_bytes()[:4096])
    row = real_size.replay(broken, np.zeros((1, 3, 8, 8), np.float32), [np.zeros(1)])
    assert row.init != 0 and row.error.startswith("E RKNN:")
    assert real_size._line(row).startswith(f"| broken_rk3576_i8 | refused ({row.init}) | E RKNN:")
