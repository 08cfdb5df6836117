"""model/dtypes.py: every row against the header's constants, numpy, onnx and onnxruntime."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from rknnrt.api import constants as c
from rknnrt.api import translate
from rknnrt.model import dtypes
from rknnrt.sessions import factory, policies

HEADER = Path(__file__).parents[2] / "rknnrt" / "capi" / "include" / "rknn_api.h"
# onnx.TensorProto's enumerator per rknnrt name, written out
ONNX_ENUMS = {"float32": "FLOAT", "float16": "FLOAT16", "int8": "INT8", "uint8": "UINT8",
              "int16": "INT16", "uint16": "UINT16", "int32": "INT32", "uint32": "UINT32",
              "int64": "INT64", "bool": "BOOL", "int4": "INT4", "bfloat16": "BFLOAT16",
              "uint64": "UINT64"}  # fmt: skip


def test_the_table_has_one_row_per_name_and_number():
    assert [t.name for t in dtypes.TYPES] == list(ONNX_ENUMS)
    assert len(dtypes.BY_ONNX) == len(dtypes.TYPES)
    assert len(dtypes.BY_RKNN) == len(dtypes.TYPES) - 1  # uint64: vendor files only


@pytest.mark.parametrize("t", dtypes.TYPES, ids=lambda t: t.name)
def test_rknn_numbers_are_the_headers(t):
    if t.rknn is None:
        assert t.name == "uint64" and t.rknn_name is None
    else:
        assert getattr(c, t.rknn_name) == t.rknn


def test_every_rknn_tensor_type_of_the_header_is_a_row_in_enum_order():
    text = HEADER.read_text()
    body = text[text.index("typedef enum _rknn_tensor_type {") :].split("}", 1)[0]
    names = re.findall(r"\b(RKNN_TENSOR_\w+)", body)
    assert names[-1] == "RKNN_TENSOR_TYPE_MAX"
    assert names[:-1] == [dtypes.BY_RKNN[i].rknn_name for i in range(len(names) - 1)]


@pytest.mark.parametrize("t", dtypes.TYPES, ids=lambda t: t.name)
def test_onnx_numbers_and_numpy_dtypes_agree_with_onnx(t):
    assert getattr(onnx.TensorProto, ONNX_ENUMS[t.name]) == t.onnx
    if t.numpy is not None:
        assert np.dtype(helper.tensor_dtype_to_np_dtype(t.onnx)) == t.numpy
        assert t.numpy.name == t.name and t.storage == t.numpy
        assert t.bits == t.numpy.itemsize * 8


def test_types_numpy_lacks_have_a_storage_and_no_numpy_dtype():
    assert dtypes.BY_NAME["int4"].numpy is None and dtypes.BY_NAME["int4"].storage == np.int8
    assert dtypes.BY_NAME["bfloat16"].numpy is None
    assert dtypes.BY_NAME["bfloat16"].storage == np.uint16
    assert (dtypes.BY_NAME["int4"].bits, dtypes.BY_NAME["bfloat16"].bits) == (4, 16)
    with pytest.raises(KeyError):
        dtypes.numpy_dtype("int4")
    with pytest.raises(KeyError):
        dtypes.numpy_dtype("float64")
    assert dtypes.numpy_dtype("bool") == np.bool_


def _input_type(t: dtypes.TensorType) -> str:
    """onnxruntime's name for a graph input of type t (int4 has no Identity kernel)."""
    x = helper.make_tensor_value_info("x", t.onnx, [2])
    if t.name == "int4":
        scale = numpy_helper.from_array(np.array(1.0, np.float32), "s")
        node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
        y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
        graph = helper.make_graph([node], "g", [x], [y], initializer=[scale])
    else:
        y = helper.make_tensor_value_info("y", t.onnx, [2])
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return factory.create(model, policies.HELPER).get_inputs()[0].type


@pytest.mark.parametrize("t", dtypes.TYPES, ids=lambda t: t.name)
def test_onnxruntime_type_strings_are_what_onnxruntime_reports(t):
    assert _input_type(t) == t.ort


def test_integer_ranges():
    assert dtypes.int_range("int4") == (-8, 7)
    assert dtypes.int_range("int8") == (-128, 127)
    assert dtypes.int_range("uint8") == (0, 255)
    assert dtypes.int_range("int16") == (-32768, 32767)
    assert dtypes.int_range("int32") == (-(2**31), 2**31 - 1)
    for name in ("float32", "bool", "bfloat16"):
        with pytest.raises(KeyError):
            dtypes.int_range(name)


def test_the_api_translation_comes_from_the_table():
    assert translate.TYPE_NAMES == {
        c.RKNN_TENSOR_FLOAT32: "float32", c.RKNN_TENSOR_FLOAT16: "float16",
        c.RKNN_TENSOR_INT8: "int8", c.RKNN_TENSOR_UINT8: "uint8", c.RKNN_TENSOR_INT16: "int16",
        c.RKNN_TENSOR_UINT16: "uint16", c.RKNN_TENSOR_INT32: "int32",
        c.RKNN_TENSOR_UINT32: "uint32", c.RKNN_TENSOR_INT64: "int64", c.RKNN_TENSOR_BOOL: "bool",
        c.RKNN_TENSOR_INT4: "int4", c.RKNN_TENSOR_BFLOAT16: "bfloat16",
    }  # fmt: skip
    assert translate.TYPE_CODES["bfloat16"] == c.RKNN_TENSOR_BFLOAT16


def test_named_keeps_the_callers_order():
    assert [t.rknn for t in dtypes.named("uint8", "float32")] == [
        c.RKNN_TENSOR_UINT8, c.RKNN_TENSOR_FLOAT32]  # fmt: skip
    with pytest.raises(KeyError):
        dtypes.named("float64")
