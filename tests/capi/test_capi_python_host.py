"""librknnrt.so loaded into a Python process whose interpreter has already looked up an
attribute of a capsule object (torch's import does). On Python 3.11 that gives
PyCapsule_Type a version tag, which cffi's start-up uses as a spin lock: without the fix in
preinit.c the first call aborts (`_cffi_carefully_make_gil: Assertion ...`) or spins forever."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_HOST = textwrap.dedent("""
    import ctypes, sys
    {prepare}
    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    lib.rknn_query.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
    num = (ctypes.c_uint32 * 2)()
    print("query", lib.rknn_query(0, 0, ctypes.addressof(num), 8))  # context 0: -7
""")


def _host(sdk: Path, prepare: str) -> subprocess.CompletedProcess[str]:
    script = _HOST.format(prepare=prepare)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    library = str(sdk / "lib" / "librknnrt.so")
    return subprocess.run([sys.executable, "-c", script, library], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip


def _assert_first_call_answered(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "query -7" in done.stdout, done.stdout + done.stderr
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 1 and "rknn_query" in errors[0], done.stderr


def test_host_that_looked_up_a_capsule_attribute(sdk):
    # the condition torch creates, without torch: a capsule attribute lookup before loading
    done = _host(sdk, 'import datetime; getattr(datetime.datetime_CAPI, "anything", None)')
    _assert_first_call_answered(done)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_host_that_imported_torch(sdk):
    _assert_first_call_answered(_host(sdk, "import torch"))
