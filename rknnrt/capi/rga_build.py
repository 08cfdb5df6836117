"""Building librga.so / librga.a: rknnrt's CPU stand-in for Rockchip's RGA library, from the
project's C sources in rga/ (docs/c-library.md, "RGA"). Cached like librknnrt.so, per source
version (no Python inside: the library is plain C, with the C++ overloads of im2d.hpp when a
C++ compiler is there)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..toolchain import compiler, cxx_compiler
from .build import BuildError, cache_root

RGA_DIR = Path(__file__).parent / "rga"
RGA_INCLUDE = RGA_DIR / "include"
RGA_HEADERS = tuple(sorted(p.name for p in RGA_INCLUDE.iterdir() if p.suffix in (".h", ".hpp")))
_C_SOURCES = ("rga_buffer.c", "rga_pixels.c", "rga_ops.c", "rga_compat.c")
_CXX_SOURCE = "rga_cxx.cpp"
SHARED, STATIC = "librga.so", "librga.a"


def _fingerprint(with_cxx: bool) -> str:
    digest = hashlib.sha256(b"cxx" if with_cxx else b"c")
    for path in sorted((RGA_DIR / "src").iterdir()) + sorted(RGA_INCLUDE.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"building {what} failed:\n$ {' '.join(command)}\n{done.stderr}")


def build_rga(force: bool = False) -> tuple[Path, Path]:
    """(librga.so, librga.a) of these sources, built now if missing."""
    cc, cxx = compiler(), cxx_compiler()
    if cc is None:
        raise BuildError(
            "building librga.so needs a C compiler: e.g. sudo apt install gcc (or set CC)"
        )
    folder = cache_root() / "rga" / _fingerprint(cxx is not None)
    shared, static = folder / SHARED, folder / STATIC
    if shared.exists() and static.exists() and not force:
        return shared, static
    ar = shutil.which("ar")
    if ar is None:
        raise BuildError("building librga.a needs `ar` (binutils): e.g. sudo apt install binutils")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            flags = ["-O2", "-fPIC", "-fvisibility=hidden", "-Wall", f"-I{RGA_INCLUDE}",
                     f"-I{RGA_DIR / 'src'}"]  # fmt: skip
            objects = []
            for name in _C_SOURCES:
                obj = str(Path(tmp) / (name + ".o"))
                _run(
                    [cc, "-std=gnu99", *flags, "-c", str(RGA_DIR / "src" / name), "-o", obj], SHARED
                )
                objects.append(obj)
            if cxx is not None:  # no exceptions or RTTI: the library needs no libstdc++
                obj = str(Path(tmp) / (_CXX_SOURCE + ".o"))
                _run([cxx, "-std=c++11", "-fno-exceptions", "-fno-rtti", *flags, "-c",
                      str(RGA_DIR / "src" / _CXX_SOURCE), "-o", obj], SHARED)  # fmt: skip
                objects.append(obj)
            built = Path(tmp) / SHARED
            _run([cc, "-shared", "-o", str(built), f"-Wl,-soname,{SHARED}", "-Wl,--no-undefined",
                  *objects, "-lm", "-lpthread"], SHARED)  # fmt: skip
            archive = Path(tmp) / STATIC
            _run([ar, "rcs", str(archive), *objects], STATIC)
            os.replace(built, shared)
            os.replace(archive, static)
    except OSError as exc:
        raise BuildError(
            f"cannot write the library cache {folder}: {exc}; "
            "set RKNNRT_CACHE_DIR to a writable folder"
        ) from None
    return shared, static
