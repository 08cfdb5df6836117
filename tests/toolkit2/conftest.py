"""Fixtures of the toolkit2 tests: probes for capabilities that arrive with quant's branch."""

from __future__ import annotations

import numpy as np
import pytest

from .models import Graph


def _float_layers_work() -> bool:
    from rknnrt.toolkit import quantize
    from rknnrt.toolkit.errors import ConversionError

    g = Graph(0)
    g.node("Relu", [g.conv("x", "c", 3, 4)], "y")
    data = [[np.random.RandomState(0).rand(1, 3, 4, 4).astype(np.float32)]]
    try:
        quantize.quantize_model(g.model([("x", [1, 3, 4, 4])], ["y"]), data,
                                float_layers=("c",), progress=lambda d, t: None)
    except ConversionError:
        return False
    return True


@pytest.fixture(scope="session")
def needs_float_layers() -> None:
    if not _float_layers_work():
        pytest.skip("quantize_model(float_layers=...) is not implemented yet: it comes with "
                    "quant's branch (issue 13 item 5); this test runs once merged")
