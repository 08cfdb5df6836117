"""rknnrt's compiled onnxruntime kernels: a custom-op library in C (domain `DOMAIN`), built with
the C compiler on first use and cached like librknnrt.so. dwconv.c: the depthwise ops and
the library's registration; dw_arith.c/.h: their arithmetic paths (dw_paths.h), dw_job.c: a
convolution's job over them; f16ops.c, f16round.c/.h: the float16 rounding ops and their
arithmetic; affine.c/.h: the
per-channel affine uint8 map; bytemap.c/.h: the byte-table requantisation; chanmul.c/.h: the
per-channel requantised multiply; inputcast.c/.h: an input's float32 conversions with their NaN
check, called directly (`direct_calls`), and the float32 quantising op; winmean.c/.h: a vendor
AveragePool's window mean in its own order; blocked.c/.h: a float16 program's global mean and
gate multiply in onnxruntime's blocked layout (core/program/fp16_blocked_ops.py); qconv.c/.h:
the dense int8 convs (VNNI), qconv_rows.c/qconv_job.h: their window rows, qconv_avx.c: their
AVX-VNNI path; epilogue.h/.c: the convs'
activation epilogue; cpu.h: the CPU features the paths need, cpu_facts.c: those the Python
side asks for; ort_abi.h: the part of onnxruntime's C API used.

The library holds int8 depthwise convolutions with per-channel weight zero points in NHWC
(core/program/int8_depthwise.py emits them; dwconv.c says what they compute) and the one-pass
float16 rounding of a Cast pair (core/program/fp16_round.py; f16ops.c). It is built
once per source, onnxruntime version and machine architecture, in `<cache>/kernels/<key>/`
(the caller passes the cache folder: the runtime's is switches.cache_root(), never inside the
source tree), written to a temporary file and renamed into place, so concurrent builders each
install a whole file. Generic flags only (-O2; the AVX-512 and AVX2 paths are compiled per
function and chosen at run time by cpuid), so one cached file suits every CPU of the
architecture.

`library(cache)` builds or finds it (KernelsUnavailable says why not: no compiler, a failed
compile, an unwritable cache); `loaded()` is the library this process built or found, which
factory.py registers (SessionOptions.register_custom_ops_library) for a graph that has a node
of `DOMAIN`, and only then.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from ...toolchain import compiler

DOMAIN = "rknnrt.kernels"
_HERE = Path(__file__).parent
SOURCES = (_HERE / "dwconv.c", _HERE / "dw_arith.c", _HERE / "dw_job.c", _HERE / "f16round.c",
           _HERE / "f16ops.c",
           _HERE / "affine.c", _HERE / "qconv.c", _HERE / "qconv_rows.c", _HERE / "qconv_avx.c",
           _HERE / "epilogue.c", _HERE / "cpu_facts.c",
           _HERE / "bytemap.c", _HERE / "chanmul.c", _HERE / "inputcast.c", _HERE / "winmean.c",
           _HERE / "blocked.c")
HEADERS = (_HERE / "dw_arith.h", _HERE / "dw_paths.h", _HERE / "f16round.h", _HERE / "affine.h",
           _HERE / "qconv.h", _HERE / "api_kernel.h", _HERE / "epilogue.h", _HERE / "cpu.h",
           _HERE / "ort_abi.h", _HERE / "bytemap.h", _HERE / "qconv_job.h",
           _HERE / "chanmul.h", _HERE / "inputcast.h", _HERE / "winmean.h",
           _HERE / "blocked.h")
LIBRARY = "librknnrt_kernels.so"
FLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off", "-std=gnu99")

_lock = threading.Lock()
_loaded: Path | None = None


class KernelsUnavailable(RuntimeError):
    """The library cannot be built or found here; the message says why."""


_fingerprints: dict[tuple, str] = {}  # the sources' (path, mtime, size), ... -> fingerprint


def fingerprint() -> str:
    """The cache key: the C sources, the flags, onnxruntime's version, the architecture.
    Hashed once per process and state of the sources (each program open asks for it; reading
    and hashing them was ~0.7 ms a time)."""
    import onnxruntime as ort

    state = (*((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in (*SOURCES, *HEADERS)),
             *FLAGS, ort.__version__, platform.machine())  # fmt: skip
    if state not in _fingerprints:
        _fingerprints[state] = _hash_sources()
    return _fingerprints[state]


def _hash_sources() -> str:
    import onnxruntime as ort

    digest = hashlib.sha256()
    for path in (*SOURCES, *HEADERS):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for part in (*FLAGS, ort.__version__, platform.machine()):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


def library_path(cache: Path) -> Path:
    return Path(cache) / "kernels" / fingerprint() / LIBRARY


def library(cache: Path) -> Path:
    """The cached library under `cache`, built now if missing; raises KernelsUnavailable."""
    global _loaded
    target = library_path(cache)
    with _lock:
        if not target.exists():
            _build(target)
        _loaded = target
    return target


def loaded() -> Path | None:
    """The library `library` last returned in this process, or None."""
    return _loaded


_direct: dict[Path, Any] = {}


def direct_calls(cache: Path) -> Any:
    """The library under `cache` (built now if missing) opened with ctypes for the functions
    the runtime calls itself, not through onnxruntime (inputcast.c's input conversions), their
    argument types declared; raises KernelsUnavailable."""
    import ctypes

    path = library(cache)
    with _lock:
        if path not in _direct:
            lib = ctypes.CDLL(str(path))
            pointer, size = ctypes.c_void_p, ctypes.c_int64
            lib.rknnrt_quantize_f32.argtypes = [pointer, size, ctypes.c_float, ctypes.c_int32,
                                                ctypes.c_int, pointer]  # fmt: skip
            lib.rknnrt_half_f32.argtypes = [pointer, size, pointer]
            lib.rknnrt_quantize_f32.restype = lib.rknnrt_half_f32.restype = ctypes.c_int
            _direct[path] = lib
        return _direct[path]


def _build(target: Path) -> None:
    cc = compiler()
    if cc is None:
        raise KernelsUnavailable("no C compiler (install gcc or set CC)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
            built = Path(tmp) / LIBRARY
            command = [cc, *FLAGS, *map(str, SOURCES), "-o", str(built), "-lm"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["no message"])[0]
                raise KernelsUnavailable(f"compiling {LIBRARY} failed: {first}")
            os.replace(built, target)  # atomic: a reader sees no file or a whole one
    except OSError as exc:
        raise KernelsUnavailable(f"cannot write the kernel cache {target.parent}: {exc}") from None


def uses_kernels(proto: Any) -> bool:
    """Whether a ModelProto has a node of this library's domain."""
    return any(node.domain == DOMAIN for node in proto.graph.node)
