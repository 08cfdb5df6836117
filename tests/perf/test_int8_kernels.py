"""sessions/int8_kernels.py: onnxruntime's fast u8s8 kernels are used only where a probe shows
them exact, and the probe would catch a kernel that clamps 16-bit pair sums."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.lite import RKNNLite
from rknnrt.sessions import factory, int8_kernels, policies
from rknnrt.toolkit import RKNN


def _centre_sums(case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output channel at a full window: the exact sum of products minus the zero-point
    term, the same with every pair of products clamped to int16 (a PMADDUBSW kernel; with
    equal activations and equal weights per channel any pairing gives this), and the weight
    zero points."""
    _, x_shape, w_shape, group, per_channel = case
    w = int8_kernels.probe_weights(w_shape).reshape(w_shape[0], -1).astype(np.int64)[:, 0]
    depth = w_shape[1] * w_shape[2] * w_shape[3]
    zp = np.arange(w_shape[0]) % 3 - 1 if per_channel else np.zeros(w_shape[0], np.int64)
    exact = 255 * depth * (w - zp)
    pair = np.clip(2 * 255 * w, -32768, 32767)
    clamped = depth // 2 * pair + depth % 2 * 255 * w - 255 * depth * zp
    return exact, clamped, depth


def _requantised(total: np.ndarray, depth: int) -> np.ndarray:
    q = np.clip(np.rint(total / np.float32(int8_kernels.out_scale(depth))) + 128, 0, 255)
    return (q - 128) * np.float32(int8_kernels.out_scale(depth))


@pytest.mark.parametrize("case", int8_kernels.CASES, ids=[c[0] for c in int8_kernels.CASES])
def test_probe_tells_exact_kernels_from_clamping_ones(case) -> None:
    index = int8_kernels.CASES.index(case)
    exact, clamped, depth = _centre_sums(case)
    outputs = int8_kernels.probe_outputs(exact=True)[index]  # onnxruntime's exact kernels
    h, w = outputs.shape[2] // 2, outputs.shape[3] // 2
    assert np.array_equal(outputs[0, :, h, w], _requantised(exact, depth))
    # a clamping kernel would give another value in every output channel
    assert (_requantised(clamped, depth) != _requantised(exact, depth)).all()


def test_probe_one_row_matrix_product() -> None:
    _, _, (depth, cols) = int8_kernels.GEMM_CASE
    w = int8_kernels.probe_weights([cols, depth])[:, 0].astype(np.int64)
    zp = np.arange(cols) % 3 - 1
    exact = 255 * depth * (w - zp)
    clamped = depth // 2 * np.clip(2 * 255 * w, -32768, 32767) - 255 * depth * zp
    outputs = int8_kernels.probe_outputs(exact=True)[-1]
    assert np.array_equal(outputs[0], _requantised(exact, depth))
    assert (_requantised(clamped, depth) != _requantised(exact, depth)).all()


@pytest.mark.parametrize("fast_exact", [True, False])
def test_sessions_ask_for_exact_kernels_unless_the_probe_cleared_the_fast_ones(
    fast_exact, monkeypatch
) -> None:
    monkeypatch.setattr(int8_kernels, "fast_kernels_exact", lambda: fast_exact)
    options = factory.options_for(_quantised_model().SerializeToString(), policies.PROGRAM)
    if fast_exact:
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry(policies.PRECISION_KEY)
    else:
        assert options.get_session_config_entry(policies.PRECISION_KEY) == "1"


def _quantised_model() -> onnx.ModelProto:
    """The saturating convolution between a QuantizeLinear/DequantizeLinear pair."""
    model = _saturating_model()
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    model.graph.initializer.append(scale)
    model.graph.node.extend([helper.make_node("QuantizeLinear", ["y", "s"], ["q"]),
                             helper.make_node("DequantizeLinear", ["q", "s"], ["z"])])  # fmt: skip
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    return model


def _saturating_model() -> onnx.ModelProto:
    """A 1x1 convolution with large positive weights over 32 channels: inputs at their
    maximum give pairs of products beyond the 16-bit range."""
    rng = np.random.RandomState(2)
    w = rng.uniform(0.8, 1.0, (6, 32, 1, 1)).astype(np.float32)
    w[::2] *= -1
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])], "sat",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4, 4])],
        [numpy_helper.from_array(w, "w")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_runtime_int8_on_saturating_weights_is_the_exact_kernels_result(tmp_path) -> None:
    """Fails on a CPU whose fast kernels clamp if the runtime used them anyway."""
    rng = np.random.RandomState(3)
    calib = [[rng.rand(1, 32, 4, 4).astype(np.float32)] for _ in range(4)]
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    rknn.load_onnx(_saturating_model())
    assert rknn.build(do_quantization=True, dataset=calib) == 0
    path = str(tmp_path / "sat.rknn")
    assert rknn.export_rknn(path) == 0
    program, (scale, zp) = rknn._built.program, rknn._built.io_qparams["x"]
    weights = next(numpy_helper.to_array(t) for t in program.graph.initializer
                   if t.data_type == TensorProto.INT8 and t.dims == [6, 32, 1, 1])  # fmt: skip
    pairs = weights.reshape(6, 16, 2).astype(np.int64).sum(axis=2) * 255
    assert (np.abs(pairs) > 32767).all()  # every pair of products saturates int16
    options = ort.SessionOptions()
    options.add_session_config_entry(policies.PRECISION_KEY, "1")
    exact = ort.InferenceSession(program.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"])  # fmt: skip
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        for x in (np.ones((1, 32, 4, 4), np.float32), rng.rand(1, 32, 4, 4).astype(np.float32)):
            q = np.clip(np.rint(x / np.float32(scale)) + zp, -128, 127).astype(np.int8)
            assert (q.max() == 127) or x.max() < 1
            (got,) = runtime.inference([x], data_format="nchw")
            (want,) = exact.run(None, {"x": q})
            out_scale, out_zp = rknn._built.io_qparams["y"]
            want = (want.astype(np.float32) - out_zp) * np.float32(out_scale)
            assert np.ptp(want) > 0 and np.array_equal(got, want)
    finally:
        runtime.release()


def test_float_graphs_skip_the_probe(monkeypatch) -> None:
    probed: list[int] = []
    monkeypatch.setattr(int8_kernels, "fast_kernels_exact", lambda: probed.append(1) or False)
    float_graph = _saturating_model().SerializeToString()  # Conv only
    options = factory.options_for(float_graph, policies.PROGRAM)
    with pytest.raises(RuntimeError, match="does not have configuration"):
        options.get_session_config_entry(policies.PRECISION_KEY)
    assert probed == []
    options = factory.options_for(_quantised_model().SerializeToString(), policies.PROGRAM)
    assert options.get_session_config_entry(policies.PRECISION_KEY) == "1"
    assert probed == [1]
    assert probed == [1]
