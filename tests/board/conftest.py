"""Fixtures of the board-estimate tests: the vendor's recorded layer tables, and the calibration
models converted once per session (kept in a temporary folder: converting the big models takes
seconds each)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np
import onnx
import pytest

from rknnrt.toolkit import RKNN

from .zoo_models import ZOO

HERE = os.path.dirname(__file__)
LIGHT_RESNET50 = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                              "light", "light_resnet50.onnx")  # fmt: skip


@pytest.fixture(scope="session")
def vendor() -> dict:
    """tests/board/vendor_layers.json: model -> SoC -> {layers: [[op, target, npu cycles]],
    internal_kb, weight_kb}, from rknn-toolkit2 2.5.0 verbose builds (vendor_logs.py)."""
    with open(os.path.join(HERE, "vendor_layers.json"), encoding="utf-8") as f:
        return json.load(f)


def int8_bytes(model: onnx.ModelProto, target: str = "rk3588") -> bytes:
    rknn = RKNN()
    assert rknn.config(target_platform=target) == 0
    assert rknn.load_onnx(model) == 0, rknn.last_error
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    sample = np.random.default_rng(0).random(dims, dtype=np.float32)
    assert rknn.build(do_quantization=True, dataset=[[sample]]) == 0, rknn.last_error
    return rknn.model_bytes()


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], bytes]:
    """`converted(name)`: the zoo model (or "light_resnet50") as an rknnrt int8 model for
    rk3588, converted once per session and cached on disk."""
    folder = tmp_path_factory.mktemp("board-models")

    def get(name: str) -> bytes:
        path = folder / f"{name}.rknnrt"
        if not path.exists():
            model = onnx.load(LIGHT_RESNET50) if name == "light_resnet50" else ZOO[name][0]()
            path.write_bytes(int8_bytes(model))
        return path.read_bytes()

    return get
