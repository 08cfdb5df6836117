"""The one table of tensor types: each type's rknnrt name, its rknn_tensor_type number
(rknn_api.h), numpy dtype, ONNX TensorProto number and onnxruntime type string.

The numbers are facts written here (model/ imports neither api/ nor onnx);
tests/unit/test_dtypes.py checks every row against api/constants.py, numpy, onnx and
onnxruntime. A caller that accepts only some types names them (a tuple of names) and reads the
rest from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorType:
    name: str  # rknnrt's name: numpy's where numpy has the type
    rknn: int | None  # rknn_tensor_type (None: not an RKNN type, only met in vendor files)
    onnx: int  # onnx.TensorProto.DataType
    bits: int  # bits per element as stored
    numpy: np.dtype | None  # None: numpy has no such type
    storage: np.dtype  # the numpy dtype holding one element once unpacked

    @property
    def ort(self) -> str:
        """onnxruntime's name of the type, as NodeArg.type reports it."""
        return f"tensor({_ORT_NAMES.get(self.name, self.name)})"

    @property
    def rknn_name(self) -> str | None:
        """The header's enumerator, e.g. RKNN_TENSOR_FLOAT32."""
        return None if self.rknn is None else f"RKNN_TENSOR_{self.name.upper()}"


def _row(name: str, rknn: int | None, onnx: int, bits: int,
         storage: str | None = None) -> TensorType:  # fmt: skip
    own = None if storage else np.dtype(name)
    return TensorType(name, rknn, onnx, bits, own, np.dtype(storage or name))


_ORT_NAMES = {"float32": "float"}
TYPES: tuple[TensorType, ...] = (
    _row("float32", 0, 1, 32),
    _row("float16", 1, 10, 16),
    _row("int8", 2, 3, 8),
    _row("uint8", 3, 2, 8),
    _row("int16", 4, 5, 16),
    _row("uint16", 5, 4, 16),
    _row("int32", 6, 6, 32),
    _row("uint32", 7, 12, 32),
    _row("int64", 8, 7, 64),
    _row("bool", 9, 9, 8),
    _row("int4", 10, 22, 4, storage="int8"),  # two per byte; widened to int8 when unpacked
    _row("bfloat16", 11, 16, 16, storage="uint16"),  # its raw bits
    _row("uint64", None, 13, 64),  # vendor files' tensor field 0 only
)

BY_NAME = {t.name: t for t in TYPES}
BY_RKNN = {t.rknn: t for t in TYPES if t.rknn is not None}
BY_ONNX = {t.onnx: t for t in TYPES}
BY_NUMPY = {t.numpy: t for t in TYPES if t.numpy is not None}


def named(*names: str) -> tuple[TensorType, ...]:
    """The rows of `names`, in that order (a caller's subset)."""
    return tuple(BY_NAME[n] for n in names)


def numpy_dtype(name: str) -> np.dtype:
    """numpy's dtype of the type `name` (KeyError for an unknown name or a type numpy lacks)."""
    dtype = BY_NAME[name].numpy
    if dtype is None:
        raise KeyError(name)
    return dtype


def int_range(name: str) -> tuple[int, int]:
    """(min, max) of an integer type; int4's from its 4 bits."""
    t = BY_NAME[name]
    if not t.name.startswith(("int", "uint")):
        raise KeyError(name)
    if t.bits < t.storage.itemsize * 8:
        half = 1 << (t.bits - 1)
        return -half, half - 1
    info = np.iinfo(t.storage)
    return int(info.min), int(info.max)
