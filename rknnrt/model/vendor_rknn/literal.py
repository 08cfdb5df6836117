"""Guarded parsing of the vendor's Python-literal "generator" dict (never evaluated).

`ast.literal_eval` accepts only literals, but its parser recurses: the text is first limited in
size and in bracket depth (scanned outside string literals) so that no input can exhaust memory
or the stack.
"""

from __future__ import annotations

import ast

from ..errors import VendorFormatError

MAX_CHARS = 1 << 20
MAX_DEPTH = 16


def _depth(text: str) -> int:
    """The deepest bracket nesting of `text`, outside quoted strings."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def _literal(text: str, what: str) -> object:
    if len(text) > MAX_CHARS or _depth(text) > MAX_DEPTH:
        raise VendorFormatError(f"vendor .rknn model: the {what} is too large or too deeply nested")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise VendorFormatError(f"vendor .rknn model: the {what} is not a Python literal") from None


def parse_dict(text: str) -> dict:
    value = _literal(text, "generator dict")
    if not isinstance(value, dict):
        raise VendorFormatError("vendor .rknn model: the generator dict is not a dict")
    return value
