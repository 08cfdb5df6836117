"""`load_caffe`: no maintained converter from Caffe to ONNX exists and rknnrt has no reader of
its own yet; it fails with a line saying what to do instead."""

from __future__ import annotations

import os

from ..errors import ConversionError


def refuse(kind: str, *paths: str | os.PathLike | None) -> None:
    for path in paths:
        if path is not None and not os.path.isfile(os.fspath(path)):
            raise ConversionError(f"cannot read {kind} file {os.fspath(path)!r}: no such file")
    raise ConversionError(
        f"{kind} models are not supported by rknnrt yet: convert the model to ONNX first "
        "(e.g. with the framework's own exporter) and call load_onnx"
    )
