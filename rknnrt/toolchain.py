"""The host's C and C++ compilers, for the libraries rknnrt builds from its own sources on first
use (capi/build.py: librknnrt.so, capi/rga_build.py: librga, sessions/kernels: the int8
kernels). Standard library only: every layer may import it."""

from __future__ import annotations

import os
import shutil
import sysconfig


def _first_on_path(choices: tuple[str | None, ...]) -> str | None:
    for choice in choices:
        if choice:
            found = shutil.which(choice.split()[0])
            if found:
                return found
    return None


def compiler() -> str | None:
    """The C compiler: $CC, else the one Python was built with, else cc/gcc/clang on PATH."""
    return _first_on_path((os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc",
                           "clang"))  # fmt: skip


def cxx_compiler() -> str | None:
    """$CXX, else g++/clang++/c++ on PATH: the C++ overloads of im2d.hpp need one (C callers
    do not)."""
    return _first_on_path((os.environ.get("CXX"), "g++", "clang++", "c++"))
