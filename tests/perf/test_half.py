"""core/half.py: float32 -> float16 input conversion through onnxruntime, bit-identical to
numpy's, and used when a float16 model's input is set from float32 data."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from rknnrt.core import half
from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import shufflenet_like


def _awkward_values(rng: np.random.RandomState) -> np.ndarray:
    """Normal, tiny (float16 subnormal), huge (overflow), halfway (ties) values, zeros, inf."""
    huge = rng.uniform(6e4, 7e4, 2000) * rng.choice([-1, 1], 2000)
    parts = [rng.randn(20000) * 10.0 ** rng.randint(-9, 6, 20000),
             rng.uniform(-1e-4, 1e-4, 5000), huge,
             np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, 2.0**-24, 2.0**-25,
                       3 * 2.0**-26, -(2.0**-25)])]  # fmt: skip
    halves = rng.randn(5000).astype(np.float16).astype(np.float32)
    ulp = np.abs(np.spacing(halves.astype(np.float16))).astype(np.float32)
    parts.append(halves + ulp / 2)  # exactly between two float16 values: ties to even
    return np.concatenate(parts).astype(np.float32)


@np.errstate(over="ignore")  # numpy warns about values beyond float16
def test_conversion_is_numpys_bit_for_bit() -> None:
    values = _awkward_values(np.random.RandomState(0))
    out = np.empty(values.shape, np.float16)
    half.to_float16(values, out)
    assert out.view(np.uint16).tobytes() == values.astype(np.float16).view(np.uint16).tobytes()
    block = values[: 3 * 64 * 64].reshape(1, 3, 64, 64)
    strided = block.transpose(0, 1, 3, 2)  # a non-contiguous view
    out = np.empty(strided.shape, np.float16)
    half.to_float16(strided, out)
    assert np.array_equal(out.view(np.uint16), strided.astype(np.float16).view(np.uint16))


def test_nan_payloads_keep_numpys_conversion() -> None:
    values = np.random.RandomState(1).randn(10000).astype(np.float32)
    values.view(np.uint32)[::97] = 0x7F800001  # signalling NaNs with a payload
    out = np.empty(values.shape, np.float16)
    half.to_float16(values, out)
    assert out.view(np.uint16).tobytes() == values.astype(np.float16).view(np.uint16).tobytes()
    assert out.view(np.uint16)[0] == 0x7C01  # numpy's bits, not the canonical 0x7E00


def test_float16_model_input_uses_it_and_gives_the_numpy_converted_result(tmp_path,
                                                                          monkeypatch) -> None:
    size = 40  # 1x3x40x40 = 4800 elements: above MIN_ELEMENTS
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(shufflenet_like(size=size))
    assert rknn.build(do_quantization=False) == 0
    path = str(tmp_path / "fp16.rknn")
    assert rknn.export_rknn(path) == 0
    program: onnx.ModelProto = rknn._built.program
    made: list[int] = []
    original = half._cast_session
    monkeypatch.setattr(half, "_cast_session", lambda: made.append(1) or original())
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    session = ort.InferenceSession(program.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.RandomState(4)
    try:
        for _ in range(3):
            x = (rng.randn(1, 3, size, size) * 3).astype(np.float32)
            (got,) = runtime.inference([x], data_format="nchw")
            (want,) = session.run(None, {"x": x.astype(np.float16)})
            assert np.ptp(want) > 0 and np.array_equal(got, want.astype(np.float32))
    finally:
        runtime.release()
    assert len(made) == 3
