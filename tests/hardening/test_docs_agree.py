"""Issue 27 item 13: the docs say what the code does for a second thread's call on a busy
context (it waits, bounded by RKNNRT_CALL_WAIT_MS), and name every switch that bounds a run."""

from __future__ import annotations

from pathlib import Path

from rknnrt.core import switches

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_fidelity_and_device_agree_on_a_busy_context() -> None:
    fidelity = (DOCS / "fidelity.md").read_text()
    row = next(line for line in fidelity.splitlines() if "two threads in one context" in line)
    assert "waits" in row and "RKNNRT_CALL_WAIT_MS" in row and "RKNN_ERR_FAIL" not in row
    assert "waits" in (DOCS / "device.md").read_text()


def test_guarantees_page_names_the_bounding_switches() -> None:
    text = (DOCS / "guarantees.md").read_text()
    for switch in (switches.MEMORY_BUDGET_MB, switches.RUN_TIMEOUT_MS, switches.CALL_WAIT_MS):
        assert switch.name in text and switch.default in text
