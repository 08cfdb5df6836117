"""Vendor ops are decoded by a registry: one decoder per op type, looked up by name."""

from __future__ import annotations

import collections

import pytest

from rknnrt.model import container, errors
from rknnrt.model.vendor_rknn import decoders, fileformat, registry

from .vendor_data import FIXTURES


def _fixture_op_types() -> collections.Counter:
    count: collections.Counter = collections.Counter()
    for path in sorted(FIXTURES.glob("*.rknn")):
        m = fileformat.parse(memoryview(path.read_bytes()))
        count.update(n.op_type for n in m.nodes)
    return count


def test_every_op_of_the_fixtures_has_one_registered_decoder() -> None:
    seen = _fixture_op_types()
    missing = sorted(op for op in seen if op not in registry.DECODERS
                     and op not in registry.BOUNDARY)  # fmt: skip
    assert not missing
    for op in ("Conv", "ConvRelu", "ConvExSwish", "Concat", "Split", "AveragePool"):
        assert registry.DECODERS[op].op_type == op


def test_an_unregistered_op_is_refused_by_name() -> None:
    node = fileformat.Node(3, "ConvReluAdd", "odd:1", 2, [0], [1], 0, None)
    with pytest.raises(errors.VendorFormatError, match=r"op ConvReluAdd \('odd:1'\) is not"):
        registry.lookup(node)
    assert registry.lookup(fileformat.Node(0, "Reshape", "r", 2, [0], [1], 0, None)).op_type == (
        "Reshape"
    )


def test_a_type_registered_twice_is_an_error() -> None:
    table = decoders.OpTable()
    table.register("X")(lambda b, n: "y")
    with pytest.raises(ValueError, match="X registered twice"):
        table.register("X")(lambda b, n: "z")
    with pytest.raises(ValueError, match="two modules"):
        registry._join(table, {"X": table["X"]})


def test_shape_free_ops_come_from_the_registry() -> None:
    assert registry.shape_free("InputOperator") and registry.shape_free("ConvAddRelu")
    assert not registry.shape_free("Reshape") and not registry.shape_free("NoSuchOp")


def test_the_vendor_error_has_one_owner() -> None:
    assert container.VendorFormatError is errors.VendorFormatError
    assert issubclass(errors.VendorFormatError, errors.ModelFormatError)
