"""The functions of the three shipped headers, read from the headers themselves.

The C wrappers, the cffi declarations and the Python bindings are all generated from this one
list, so a function added to a header is exported, declared and bound without a second table
to keep in step. Each parameter crosses to Python as a plain integer: pointers as their
address (uintptr_t, 0 for NULL), handles as uint64_t, enums as int.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

INCLUDE_DIR = Path(__file__).with_name("include")
HEADERS = ("rknn_api.h", "rknn_matmul_api.h", "rknn_custom_op.h")

_DECLARATION = re.compile(r"^(int|void|rknn_tensor_mem\s*\*)\s*(rknn_\w+)\s*\(([^)]*)\)\s*;", re.M)
_HANDLES = {"rknn_context", "rknn_matmul_ctx"}
_ENUMS = {"rknn_query_cmd", "rknn_core_mask", "rknn_mem_sync_mode"}
_SCALARS = {"int", "int32_t", "uint32_t", "uint64_t"}


@dataclass(frozen=True)
class Param:
    c_decl: str  # as written in the header, e.g. "rknn_input inputs[]"
    name: str
    pointer: bool
    bridge_type: str  # the type the value crosses to Python as


@dataclass(frozen=True)
class Function:
    name: str
    returns: str  # "int", "void" or "pointer"
    params: tuple[Param, ...]

    @property
    def c_return(self) -> str:
        return {"int": "int", "void": "void", "pointer": "rknn_tensor_mem*"}[self.returns]

    @property
    def bridge_return(self) -> str:
        return {"int": "int", "void": "void", "pointer": "uintptr_t"}[self.returns]


def _param(text: str) -> Param:
    text = " ".join(text.split())
    match = re.match(r"^(.*?)(\w+)\s*(\[\])?$", text)
    if match is None:
        raise ValueError(f"cannot read the parameter {text!r}")
    ctype, name, array = match.group(1).strip(), match.group(2), match.group(3)
    pointer = bool(array) or ctype.endswith("*")
    if pointer:
        bridge = "uintptr_t"
    elif ctype in _HANDLES:
        bridge = "uint64_t"
    elif ctype in _ENUMS:
        bridge = "int"
    elif ctype in _SCALARS:
        bridge = ctype
    else:
        raise ValueError(f"no bridge type for {ctype!r} in {text!r}")
    return Param(text, name, pointer, bridge)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


@functools.lru_cache(maxsize=1)
def functions() -> tuple[Function, ...]:
    """Every function the headers declare, in header order."""
    found: list[Function] = []
    for header in HEADERS:
        text = _strip_comments((INCLUDE_DIR / header).read_text())
        # join continuation lines of multi-line declarations
        text = re.sub(r",\s*\n\s*", ", ", text)
        for ret, name, params in _DECLARATION.findall(text):
            returns = "pointer" if "*" in ret else ret
            args = tuple(_param(p) for p in params.split(",") if p.strip() not in ("", "void"))
            found.append(Function(name, returns, args))
    return tuple(found)
