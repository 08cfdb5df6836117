"""The converter: ONNX model -> rknnrt model file (rknn-toolkit2's `RKNN` class)."""

from .rknn import RKNN

__all__ = ["RKNN"]
