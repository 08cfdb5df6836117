"""The one compiler lookup of capi/build.py, capi/rga_build.py and sessions/kernels."""

from __future__ import annotations

import stat

from rknnrt import toolchain
from rknnrt.capi import build, rga_build
from rknnrt.sessions import kernels


def _executable(path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_cc_and_cxx_come_first_with_their_flags(tmp_path, monkeypatch) -> None:
    cc, cxx = _executable(tmp_path / "mycc"), _executable(tmp_path / "mycxx")
    monkeypatch.setenv("CC", f"{cc} -O1")  # a compiler with flags, as make users set it
    monkeypatch.setenv("CXX", cxx)
    assert toolchain.compiler() == cc and toolchain.cxx_compiler() == cxx
    # the three builders use this lookup, not copies of it
    assert build.compiler is kernels.compiler is rga_build.compiler is toolchain.compiler


def test_nothing_on_the_path_is_none(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(toolchain.sysconfig, "get_config_var", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert toolchain.compiler() is None and toolchain.cxx_compiler() is None
    gcc = _executable(tmp_path / "gcc")
    assert toolchain.compiler() == gcc and toolchain.cxx_compiler() is None
