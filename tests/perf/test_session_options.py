"""core/executor.session_options: onnxruntime's workers stop spinning when a run ends."""

from __future__ import annotations

from rknnrt.core import executor


def test_workers_stop_spinning_at_the_end_of_a_run() -> None:
    options = executor.session_options()
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
