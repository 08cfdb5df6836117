"""The converter's error: raised where a problem is found, reported by RKNN's methods."""

from __future__ import annotations

import re


class ConversionError(Exception):
    """The model or the configuration cannot be converted; the message says what to change."""


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*(\w+)\s*:\s*")
_TYPE_MISMATCH = re.compile(
    r"Type \(tensor\((\w+)\)\) of (?:output|input) arg \(([^)]*)\) of "
    r"node \(([^)]*)\) does not match expected type \(tensor\((\w+)\)\)"
)
_MAX_DETAIL = 300


def engine_words(exc: BaseException) -> str:
    """An onnxruntime (or onnx) failure said in rknnrt's words: what it means for the
    conversion first, the engine's own detail shortened after it."""
    text = " ".join(str(exc).split())
    found = _TYPE_MISMATCH.search(text)
    if found:
        got, tensor, node, wanted = found.groups()
        where = f" (node '{node}')" if node else ""
        return (
            f"tensor '{tensor}'{where} is computed as {got} but the graph declares it "
            f"{wanted}: the converted graph is inconsistent (an rknnrt converter bug, "
            "please report it with the model)"
        )
    code = _ORT_PREFIX.match(text)
    if code:
        detail = text[code.end() :]
        if len(detail) > _MAX_DETAIL:
            detail = detail[:_MAX_DETAIL] + " ..."
        return f"onnxruntime rejected the converted graph ({code.group(1)}): {detail}"
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + " ..."
