"""The blocked float16 program (core/program/fp16_layout.py) against the plain one on the
real-architecture set at reduced sizes: the same bytes. Before the layout kept residual Adds
out of their Convs and pools/linear resizes on their plain inputs, each of these differed
(MobileNetV3-small by up to 1.2e-4, RegNetX by up to 1.0)."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN
from tools.real_arch import catalog

NETWORKS = ["mobilenetv3_small", "mobilenetv2", "efficientnet_b0", "resnet18", "regnetx_400mf",
            "deeplabv3_mobilenetv2"]  # fmt: skip


def _outputs(path: str, inputs: list[np.ndarray]) -> list[bytes]:
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [b"".join(o.tobytes() for o in runtime.inference([x], data_format="nchw"))
                for x in inputs]  # fmt: skip
    finally:
        runtime.release()


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_blocked_and_plain_fp16_programs_give_the_same_bytes(name, tmp_path, monkeypatch) -> None:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(catalog.build(name, test=True))
    assert rknn.build(do_quantization=False) == 0
    path = str(tmp_path / f"{name}.rknn")
    assert rknn.export_rknn(path) == 0
    shape = catalog.input_shape(name, True)
    inputs = [np.random.RandomState(seed).rand(*shape).astype(np.float32) for seed in (0, 1)]
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    blocked = _outputs(path, inputs)
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    plain = _outputs(path, inputs)
    assert blocked == plain
    assert blocked[0] != blocked[1]
