"""Building librknnrt.so: a cffi embedding library whose functions are the Python C-shaped API.

Generated from the shipped headers (signatures.py): for every function a C wrapper with the
header's exact signature (the header is #included, so the compiler checks each one) that starts
the interpreter if needed (preinit.c) and calls an `extern "Python"` function with integers.
bridge.py binds those to `rknnrt.<function>`. The library is built once per Python, environment,
package location and source version, in a cache folder (RKNNRT_CACHE_DIR, else
$XDG_CACHE_HOME/rknnrt or ~/.cache/rknnrt), never inside the source tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .. import __version__
from ..core import switches
from ..toolchain import compiler
from . import signatures
from .signatures import INCLUDE_DIR, Function

MODULE = "_rknnrt_capi"
LIBRARY = "librknnrt.so"
_HERE = Path(__file__).parent
_SOURCES = ("preinit.c", "build.py", "bridge.py", "signatures.py", "callbacks.py")


class BuildError(RuntimeError):
    """The library cannot be built here; the message says what to install or change."""


def _package_parent() -> Path:
    """The folder `import rknnrt` found the package in (a source tree or site-packages)."""
    return _HERE.parent.parent.resolve()


def _python_executable() -> str:
    """The interpreter of this environment: its venv, stdlib and site-packages."""
    exe = Path(sys.executable)
    if exe.is_file() and exe.parent.parent == Path(sys.prefix):
        return str(exe)
    candidate = Path(sys.prefix) / "bin" / f"python{sys.version_info[0]}"
    return str(candidate if candidate.exists() else exe)


def _libpython() -> tuple[str, str] | None:
    """(folder, link name) of the shared libpython, or None when this Python has none."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    name = sysconfig.get_config_var("LDLIBRARY") or ""
    for folder in (sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LIBPL")):
        if folder and name.endswith(".so") and (Path(folder) / name).exists():
            return folder, name[3:-3]  # libpython3.11.so -> python3.11
    return None


def missing_requirements() -> list[str]:
    """What this machine lacks to build the library, each with the way to get it."""
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    problems = []
    if sys.implementation.name != "cpython":
        problems.append(f"CPython is needed (this is {sys.implementation.name})")
    try:
        import cffi  # noqa: F401
    except ImportError:
        problems.append("the cffi package: pip install 'rknnrt[capi]' (or pip install cffi)")
    if compiler() is None:
        problems.append("a C compiler: e.g. sudo apt install gcc (or set CC)")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        problems.append(
            f"the Python {minor} headers (Python.h): e.g. sudo apt install python{minor}-dev"
        )
    if _libpython() is None:
        problems.append(
            f"a shared libpython{minor}.so: this Python was built without --enable-shared or "
            f"lacks its development link (Debian: sudo apt install libpython{minor}-dev; "
            "pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install; uv and conda Pythons "
            "have one)"
        )
    return problems


def cache_root() -> Path:
    return switches.cache_root()


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for part in (sys.version, sys.prefix, _python_executable(), str(_package_parent()),
                 __version__):  # fmt: skip
        digest.update(part.encode() + b"\0")
    for name in _SOURCES:
        digest.update((_HERE / name).read_bytes())
    for header in signatures.HEADERS:
        digest.update((INCLUDE_DIR / header).read_bytes())
    return digest.hexdigest()[:16]


def library_path() -> Path:
    """Where this environment's library is (or will be) cached."""
    tag = f"py{sys.version_info[0]}.{sys.version_info[1]}-rknnrt{__version__}-{_fingerprint()}"
    return cache_root() / "capi" / tag / LIBRARY


def _c_string(text: str) -> str:
    escaped = "".join(
        ch
        if 32 <= ord(ch) < 127 and ch not in '"\\?'
        else "".join(f"\\{b:03o}" for b in ch.encode())
        for ch in text
    )
    return f'"{escaped}"'


def _wrapper(fn: Function) -> tuple[str, str]:
    """(cdef declaration, C source) of one function."""
    bridge = f"_py_{fn.name}"
    types = ", ".join(p.bridge_type for p in fn.params) or "void"
    declaration = f"{fn.bridge_return} {bridge}({types});"
    args = ", ".join(f"(uintptr_t){p.name}" if p.pointer else p.name for p in fn.params)
    params = ", ".join(p.c_decl for p in fn.params) or "void"
    ready = f'rknnrt_ready("{fn.name}") != 0'
    if fn.returns == "int":
        body = f"if ({ready}) return RKNN_ERR_FAIL;\n    return {bridge}({args});"
    elif fn.returns == "pointer":
        body = f"if ({ready}) return NULL;\n    return (rknn_tensor_mem*){bridge}({args});"
    else:
        body = f"if ({ready}) return;\n    {bridge}({args});"
    if fn.name == "rknn_custom_op_get_op_attr":  # a lookup that finds nothing leaves n_elems 0
        body = "if (op_attr != NULL) { op_attr->n_elems = 0; op_attr->data = NULL; }\n    " + body
    source = (
        f"static {declaration}\n"
        f"RKNNRT_EXPORT {fn.c_return} {fn.name}({params})\n{{\n    {body}\n}}\n"
    )
    return f'extern "Python" {declaration}', source


def _init_code() -> str:
    """Python run once when the embedded module starts: find rknnrt, bind the functions."""
    parent = str(_package_parent())
    return f"""\
import sys
from {MODULE} import ffi, lib
_PACKAGE_PARENT = {parent!r}
if lib.rknnrt_capi_in_python_host():
    # a Python host: its own sys.path wins; add the build's package only if it lacks rknnrt
    try:
        import rknnrt
    except ImportError:
        sys.path.append(_PACKAGE_PARENT)
elif _PACKAGE_PARENT not in sys.path:
    # our own interpreter: the rknnrt this library was built from, first
    sys.path.insert(0, _PACKAGE_PARENT)
from rknnrt.capi import bridge
bridge.bind(ffi, lib)
"""


def generate(target_c: Path) -> None:
    """Write the C source of the library (cffi module + wrappers) to `target_c`."""
    import cffi

    ffi = cffi.FFI()
    ffi.embedding_api("")
    declarations, sources = zip(*(_wrapper(fn) for fn in signatures.functions()))
    ffi.cdef("int rknnrt_capi_in_python_host(void);\n" + "\n".join(declarations))
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    preamble = "\n".join([
        f"#define RKNNRT_PYTHON_EXECUTABLE {_c_string(_python_executable())}",
        f"#define RKNNRT_PY_MINOR {_c_string(minor)}",
        '#define RKNNRT_EXPORT __attribute__((visibility("default")))',
        '#include "rknn_api.h"',
        '#include "rknn_matmul_api.h"',
        '#include "rknn_custom_op.h"',
        (_HERE / "preinit.c").read_text(),
        *sources,
    ])  # fmt: skip
    ffi.set_source(MODULE, preamble)
    ffi.embedding_init_code(_init_code())
    with contextlib.redirect_stdout(io.StringIO()):  # cffi announces the file it writes
        ffi.emit_c_code(str(target_c))


def _compile(source: Path, output: Path) -> None:
    cc = compiler()
    lib = _libpython()
    assert cc is not None and lib is not None
    libdir, libname = lib
    # Export the header's functions only; cffi calls its module init directly, by address.
    exports = source.with_suffix(".map")
    exports.write_text("{ global: rknn_*; local: *; };\n")  # atomic: the build's own folder
    command = [
        cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-pthread",
        f"-I{INCLUDE_DIR}", f"-I{sysconfig.get_paths()['include']}",
        str(source), "-o", str(output),
        f"-Wl,-soname,{LIBRARY}", f"-Wl,--version-script={exports}",
        f"-L{libdir}", f"-l{libname}", f"-Wl,-rpath,{libdir}", "-ldl",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"compiling {LIBRARY} failed:\n$ {' '.join(command)}\n{done.stderr}")


def build_library(force: bool = False) -> Path:
    """The cached librknnrt.so of this environment, built now if missing."""
    problems = missing_requirements()
    if problems:
        raise BuildError("building librknnrt.so needs:\n" + "\n".join(f"  - {p}" for p in problems))
    target = library_path()
    if target.exists() and not force:
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
            source = Path(tmp) / f"{MODULE}.c"
            generate(source)
            built = Path(tmp) / LIBRARY
            _compile(source, built)
            os.replace(built, target)  # atomic: concurrent builders each install a whole file
    except OSError as exc:
        raise BuildError(
            f"cannot write the library cache {target.parent}: {exc}; "
            "set RKNNRT_CACHE_DIR to a writable folder"
        ) from None
    return target
