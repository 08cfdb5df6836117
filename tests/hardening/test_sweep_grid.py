"""Issue 27 item 7: a sweep grid is counted before it is expanded; a grid over the limit, a
YAML alias bomb or a deeply nested grid is a GridError (one E line from the CLI), never memory
exhaustion or a RecursionError."""

from __future__ import annotations

import json
import os

import pytest

from rknnrt.evaluation.sweep import MAX_CONFIGS, MAX_GRID_BYTES, GridError, load_grid


def test_a_small_grid_expands_in_order(tmp_path) -> None:
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"algorithm": ["normal", "mmse"], "target": "rk3588"}))
    assert load_grid(path) == [{"algorithm": "normal", "target": "rk3588"},
                               {"algorithm": "mmse", "target": "rk3588"}]  # fmt: skip


def test_a_huge_product_is_refused_before_expansion(tmp_path) -> None:
    grid = {f"k{i}": list(range(10)) for i in range(12)}  # 10^12 configurations, ~300 bytes
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(grid))
    assert os.path.getsize(path) < 500
    with pytest.raises(GridError, match=f"more than {MAX_CONFIGS}"):
        load_grid(path)


def test_deep_nesting_is_a_grid_error(tmp_path) -> None:
    path = tmp_path / "grid.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(GridError, match="nested"):
        load_grid(path)
    path.write_text('{"a": ' + "[" * 20 + "1" + "]" * 20 + "}")  # deeper than a grid needs
    with pytest.raises(GridError, match="nested"):
        load_grid(path)


def test_yaml_alias_bomb_is_a_grid_error(tmp_path) -> None:
    pytest.importorskip("yaml", reason="YAML grids need PyYAML (the cluster extra)")
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 10) + "]")
    lines.append("algorithm: [*a8]")
    path = tmp_path / "grid.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert os.path.getsize(path) < 600
    with pytest.raises(GridError, match="items"):
        load_grid(path)
    path.write_text("a: " + "[" * 1_100 + "]" * 1_100 + "\n")  # past the recursion limit (1000)
    with pytest.raises(GridError, match="nested"):
        load_grid(path)


def test_a_grid_fifo_or_huge_file_is_refused(tmp_path) -> None:
    fifo = tmp_path / "grid.json"
    os.mkfifo(fifo)
    with pytest.raises(GridError, match="FIFO"):
        load_grid(fifo)
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_GRID_BYTES + 1))
    with pytest.raises(GridError, match="larger"):
        load_grid(big)
