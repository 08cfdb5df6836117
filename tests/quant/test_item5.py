"""Issue 13 item 5: detector-shaped models in int8 through rknn_init/run, kl_divergence,
float16 layers inside int8 models (hybrid), the automatic choice of such layers, the vendor's
quantised dtypes per platform, and int8 with dynamic_input."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from shaped_models import ocr_det_like, op_zoo, yolov5s_like
from test_quantization import build, cosine, infer, query

import rknnrt as rk
from rknnrt.lite import RKNNLite
from rknnrt.toolkit.errors import ConversionError
from rknnrt.toolkit.quantize import (
    _Histogram,
    check_dtype,
    choose_float_layers,
    quantize_model,
    rank_layers,
)


def dataset(model: onnx.ModelProto, count: int, seed: int) -> list[np.ndarray]:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.RandomState(seed)
    return [rng.rand(*shape).astype(np.float32) for _ in range(count)]


def reference(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {model.graph.input[0].name: x})


@pytest.mark.parametrize("make", [yolov5s_like, ocr_det_like, op_zoo])
def test_detector_shaped_models_run_in_int8(make, make_ctx) -> None:
    """Resize (nearest with scales, linear with sizes), SiLU, Concat, MaxPool, Split, Slice,
    Reshape, Transpose, MatMul, Softmax, HardSwish, LeakyRelu, Sigmoid: int8 build, rknn_init
    (which used to fail on Resize's scales stored as external weights) and outputs within
    cosine 0.999 of float."""
    model = make()
    ctx = make_ctx(build(model, True, dataset(model, 8, seed=1)))
    x = dataset(model, 1, seed=2)[0]
    outs = infer(ctx, [x], len(model.graph.output))
    for got, want in zip(outs, reference(model, x)):
        assert got.shape == want.shape
        assert cosine(got, want) >= 0.999
    # a final Softmax's output is float16, a final Sigmoid's int8, as the vendor's
    producers = {n.output[0]: n.op_type for n in model.graph.node}
    for k, vi in enumerate(model.graph.output):
        attr = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, k)
        softmax = producers[vi.name] == "Softmax"
        assert attr.type == (rk.RKNN_TENSOR_FLOAT16 if softmax else rk.RKNN_TENSOR_INT8)


def test_kl_divergence_clips_outliers_that_min_max_keeps() -> None:
    rng = np.random.RandomState(0)
    h = _Histogram()
    h.add(np.concatenate([rng.randn(50000), [40.0, -35.0]]).astype(np.float32))
    qp = h.kl_divergence()
    full = (40.0 + 35.0) / 255
    assert qp.scale < full * 0.6  # the two outliers are clipped
    assert qp.scale * 255 > 6.0  # but the Gaussian body (about +-4.5) is kept
    # a distribution without outliers keeps (nearly) its whole range
    h2 = _Histogram()
    h2.add(rng.uniform(-1, 1, 50000).astype(np.float32))
    assert h2.kl_divergence().scale * 255 > 1.7


def test_kl_divergence_build_matches_float() -> None:
    model = ocr_det_like()
    calib = [[x] for x in dataset(model, 6, seed=3)]
    q = quantize_model(model, calib, algorithm="kl_divergence", progress=lambda d, t: None)
    normal = quantize_model(model, calib, algorithm="normal", progress=lambda d, t: None)
    assert q.tensor_qparams.keys() == normal.tensor_qparams.keys()
    narrower = [t for t in q.tensor_qparams
                if q.tensor_qparams[t][0] < normal.tensor_qparams[t][0] * 0.999]  # fmt: skip
    assert narrower  # KL chose clipped ranges somewhere
    x = dataset(model, 1, seed=4)[0]
    sess = ort.InferenceSession(q.program.SerializeToString(), providers=["CPUExecutionProvider"])
    scale, zp = q.io_qparams["x"]
    xq = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
    (out,) = sess.run(None, {"x": xq})
    oscale, ozp = q.io_qparams["prob"]  # a final Sigmoid: int8 output, as the vendor's
    got = (out.astype(np.float32) - ozp) * oscale
    assert cosine(got, reference(model, x)[0]) >= 0.999
    with pytest.raises(ConversionError, match="quantized_algorithm"):
        quantize_model(model, calib, algorithm="kl")


def test_float_layers_stay_float16_and_help(make_ctx) -> None:
    """Hybrid quantisation: named nodes keep float16 weights and outputs; an output produced
    by a float16 layer is a float16 output; choosing the worst layers raises fidelity."""
    model = yolov5s_like()
    calib = [[x] for x in dataset(model, 6, seed=5)]
    quiet = {"progress": lambda d, t: None}
    plain = quantize_model(model, calib, **quiet)
    ranked = rank_layers(model, calib, plain)
    drops = [drop for _, drop, _ in ranked]
    assert drops == sorted(drops, reverse=True) and len(ranked) > 10
    chosen = choose_float_layers(model, calib, plain, count=3)
    assert chosen and set(chosen) <= {n.name for n in model.graph.node}
    hybrid = quantize_model(model, calib, float_layers=chosen, **quiet)
    produced = {o for n in model.graph.node if n.name in chosen for o in n.output}
    assert not produced & hybrid.tensor_qparams.keys()  # no int8 tensor out of a float layer
    inits = {t.name for t in hybrid.program.graph.initializer}
    conv_weights = [n.input[1] for n in model.graph.node
                    if n.name in chosen and n.op_type == "Conv"]  # fmt: skip
    assert all(f"{w}__fp16w" in inits and f"{w}__q" not in inits for w in conv_weights)
    # a float layer at the very end: the detection head conv -> float16 model output
    last = [n.name for n in model.graph.node if n.output[0] == "out1"]
    head = quantize_model(model, calib, float_layers=last, **quiet)
    out1 = next(o for o in head.program.graph.output if o.name == "out1")
    assert out1.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert "out1" not in head.io_qparams
    with pytest.raises(ConversionError, match="not nodes of the model"):
        quantize_model(model, calib, float_layers=["no_such_node"], **quiet)


def test_float_layers_lower_the_error() -> None:
    """The chosen layers in float16 bring the output closer to float, and every conv in
    float16 much closer (mean over several inputs)."""
    model = ocr_det_like()
    calib = [[x] for x in dataset(model, 6, seed=6)]
    quiet = {"progress": lambda d, t: None}
    plain = quantize_model(model, calib, **quiet)
    chosen = choose_float_layers(model, calib, plain, count=8, min_drop=0.0)
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    tests = dataset(model, 4, seed=7)

    def error(float_layers) -> float:
        q = quantize_model(model, calib, float_layers=float_layers, **quiet)
        sess = ort.InferenceSession(q.program.SerializeToString(),
                                    providers=["CPUExecutionProvider"])  # fmt: skip
        total = 0.0
        for x in tests:
            scale, zp = q.io_qparams["x"]
            xq = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
            (out,) = sess.run(None, {"x": xq})
            if "prob" in q.io_qparams:  # int8, unless the last conv is a float16 layer
                oscale, ozp = q.io_qparams["prob"]
                out = (out.astype(np.float32) - ozp) * oscale
            total += float(np.abs(out.astype(np.float32) - reference(model, x)[0]).mean())
        return total / len(tests)

    base = error(())
    assert error(chosen) < base
    assert error(convs) < 0.8 * base


@pytest.mark.parametrize(
    ("dtype", "platform", "message"),
    [
        ("w8a16", "rk3588", "The quantized_dtype = 'w8a16' not support in 'rk3588'!"),
        ("w4a16", "rk3566", "The quantized_dtype = 'w4a16' not support in 'rk3566'!"),
        ("int8", "rk3588", "Invalid quantized_dtype 'int8', expect in"),
        ("w4a16", "rk3576", "offered by the vendor on rk3576 but rknnrt implements only"),
        ("w8a16", "rk3562", "offered by the vendor on rk3562 but rknnrt implements only"),
        ("w16a16i_dfp", "rv1106", "offered by the vendor on rv1106"),
    ],
)
def test_quantized_dtypes_per_platform(dtype, platform, message) -> None:
    with pytest.raises(ConversionError) as info:
        check_dtype(dtype, platform)
    assert message in str(info.value)


def test_w8a8_and_its_alias_everywhere() -> None:
    for platform in ("rk3588", "rk3576", "rk3566", "rk3562", "rv1106b", "rv1126b", "rk2118"):
        assert check_dtype("w8a8", platform) == "w8a8"
        assert check_dtype("asymmetric_quantized-8", platform) == "w8a8"


def _shape_attrs(shape: list[int]) -> ctypes.Array:
    attrs = (rk.rknn_tensor_attr * 1)()
    dims = [shape[0], shape[2], shape[3], shape[1]]
    attrs[0].index, attrs[0].n_dims, attrs[0].fmt = 0, 4, rk.RKNN_TENSOR_NHWC
    for d, v in enumerate(dims):
        attrs[0].dims[d] = v
    return attrs


def test_int8_with_dynamic_input(tmp_path) -> None:
    """dynamic_input + do_quantization: calibrated at every shape set (samples resampled),
    and every shape set runs in int8 within cosine 0.999 of float."""
    model = ocr_det_like()
    for vi in (model.graph.input[0], model.graph.output[0]):
        dims = vi.type.tensor_type.shape.dim
        dims[2].dim_param, dims[3].dim_param = "h", "w"
    del model.graph.value_info[:]
    sets = [[[1, 3, 64, 64]], [[1, 3, 96, 128]]]
    path = tmp_path / "dyn.rknn"
    path.write_bytes(build(model, True, dataset(ocr_det_like(), 6, seed=8), dynamic_input=sets))
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    rng = np.random.RandomState(9)
    for (shape,) in sets:
        assert rk.rknn_set_input_shapes(runtime._ctx, 1, _shape_attrs(shape)) == 0
        x = rng.rand(*shape).astype(np.float32)
        (got,) = runtime.inference([x], data_format="nchw")
        want = reference(model, x)[0]
        assert got.shape == want.shape == (1, 1, shape[2], shape[3])
        assert cosine(got, want) >= 0.999


def test_shape_sets_resample_calibration_samples() -> None:
    from rknnrt.toolkit.quantize.dataset import at_shape_sets

    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)[:1]
    out = at_shape_sets([[x]], [[[1, 3, 4, 4]], [[1, 3, 8, 2]]])
    assert len(out) == 2 and out[0][0] is x
    assert out[1][0].shape == (1, 3, 8, 2)
    np.testing.assert_array_equal(out[1][0][0, 0, :, 0], x[0, 0, [0, 0, 1, 1, 2, 2, 3, 3], 0])
    np.testing.assert_array_equal(out[1][0][0, 0, 0, :], x[0, 0, 0, [0, 2]])


def test_softmax_wrapped_in_flatten_reshape_gives_a_float16_output(make_ctx) -> None:
    """SqueezeNet after the opset upgrade: GlobalAveragePool -> Flatten -> Softmax -> Reshape.
    The vendor's output is float16 (issue 15 cause 6); the tensors between stay float."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Softmax", ["f"], ["s"], axis=1),
        helper.make_node("Reshape", ["s", "shape"], ["prob"]),
    ]
    w = np.random.RandomState(0).randn(10, 3, 1, 1).astype(np.float32)
    graph = helper.make_graph(
        nodes, "wrapped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10, 1, 1])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([1, 10, 1, 1], np.int64), "shape")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    q = quantize_model(model, [[x] for x in dataset(model, 4, 1)], progress=lambda d, t: None)
    assert "s" not in q.tensor_qparams and "prob" not in q.io_qparams
    ctx = make_ctx(build(model, True, dataset(model, 4, seed=1)))
    assert query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 0).type == rk.RKNN_TENSOR_FLOAT16
    x = dataset(model, 1, seed=2)[0]
    (got,) = infer(ctx, [x], 1)
    assert cosine(got, reference(model, x)[0]) >= 0.9999
