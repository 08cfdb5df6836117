"""core.log: a muted probe silences only its own thread."""

from __future__ import annotations

import threading

from rknnrt.core import log


def test_muted_silences_only_the_calling_thread(capsys) -> None:
    inside = threading.Event()
    release = threading.Event()

    def probe() -> None:
        with log.muted():
            log.error("probe failure (muted)")
            inside.set()
            release.wait(5)
            log.error("still muted")
        log.error("after the probe")

    worker = threading.Thread(target=probe)
    worker.start()
    assert inside.wait(5)
    log.error("another thread speaks")  # while the worker is muted
    release.set()
    worker.join(5)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "another thread speaks", "after the probe"
    ]
    assert all(line.startswith("E RKNN: [") for line in lines)
