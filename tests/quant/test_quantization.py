"""int8 (w8a8) and fp16 models: the converter's numbers, the runtime's attributes and
conversions, and fidelity against the float32 original."""

from __future__ import annotations

import ctypes
import os
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.quantize import _Histogram, asymmetric
from rknnrt.toolkit.samples import default_model
from tests.helpers import query_attr as query

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def two_io_model(seed: int = 3) -> onnx.ModelProto:
    """Two inputs, two outputs: img[1,3,32,32] -> Conv -> Relu -> DW conv -> Add(residual)
    -> Concat with a second conv -> out_map (4-D); GAP -> Flatten -> Gemm(+vec) -> Sigmoid."""
    rng = np.random.RandomState(seed)

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.randn(*shape) * scale).astype(np.float32)

    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("w1", w(8, 3, 3, 3)), ("b1", w(8)), ("w2", w(8, 1, 3, 3)), ("b2", w(8)),
        ("w3", w(8, 8, 1, 1)), ("b3", w(8)), ("fc", w(16, 6)), ("fcb", w(6)))]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["img", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4,
                         group=8),
        helper.make_node("Add", ["r1", "c2"], ["res"]),
        helper.make_node("Conv", ["res", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Concat", ["res", "c3"], ["out_map"], axis=1),
        helper.make_node("GlobalAveragePool", ["out_map"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"]),
        helper.make_node("Add", ["logits", "vec"], ["mixed"]),
        helper.make_node("Sigmoid", ["mixed"], ["score"]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "two_io",
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 32, 32]),
         helper.make_tensor_value_info("vec", TensorProto.FLOAT, [1, 6])],
        [helper.make_tensor_value_info("out_map", TensorProto.FLOAT, [1, 16, 32, 32]),
         helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 6])],
        inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def mlp_model(seed: int = 4) -> onnx.ModelProto:
    """x[1,64] -> MatMul -> Relu -> Gemm -> Softmax (a final Softmax: float16 output)."""
    rng = np.random.RandomState(seed)
    inits = [numpy_helper.from_array((rng.randn(64, 32) * 0.2).astype(np.float32), "m"),
             numpy_helper.from_array((rng.randn(10, 32) * 0.2).astype(np.float32), "g"),
             numpy_helper.from_array((rng.randn(10) * 0.1).astype(np.float32), "gb")]  # fmt: skip
    nodes = [helper.make_node("MatMul", ["x", "m"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "g", "gb"], ["z"], transB=1),
             helper.make_node("Softmax", ["z"], ["p"], axis=1)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 10])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def samples_for(model: onnx.ModelProto, count: int, seed: int, image: bool) -> list[list]:
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(count):
        sample = []
        for vi in model.graph.input:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            if image and len(shape) == 4:
                sample.append(rng.randint(0, 256, shape).astype(np.float32))
            else:
                sample.append(rng.randn(*shape).astype(np.float32))
        out.append(sample)
    return out


def build(model, quantize: bool, dataset=None, **config) -> bytes:
    rknn = RKNN()
    assert rknn.config(**config) == 0, rknn.last_error
    assert rknn.load_onnx(model) == 0, rknn.last_error
    assert rknn.build(do_quantization=quantize, dataset=dataset) == 0, rknn.last_error
    return rknn.model_bytes()


def infer(ctx, arrays: list[np.ndarray], n_out: int, want_float: int = 1) -> list[np.ndarray]:
    """General API with float32 data in the model's layout (NCHW for 4-D)."""
    inputs = (rk.rknn_input * len(arrays))()
    keep = [np.ascontiguousarray(x, np.float32) for x in arrays]
    for i, x in enumerate(keep):
        inputs[i].index, inputs[i].buf, inputs[i].size = i, x.ctypes.data, x.nbytes
        inputs[i].fmt = rk.RKNN_TENSOR_NCHW if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED
    assert rk.rknn_inputs_set(ctx, len(keep), inputs) == 0
    assert rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * n_out)()
    for o in outs:
        o.want_float = want_float
    assert rk.rknn_outputs_get(ctx, n_out, outs, None) == 0
    results = []
    for i, o in enumerate(outs):
        a = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, i)
        dtype = (
            np.float32
            if want_float
            else {rk.RKNN_TENSOR_INT8: np.int8, rk.RKNN_TENSOR_FLOAT16: np.float16}[a.type]
        )
        raw = (ctypes.c_char * o.size).from_address(o.buf)
        results.append(np.frombuffer(raw, dtype).reshape(list(a.dims[: a.n_dims])).copy())
    assert rk.rknn_outputs_release(ctx, n_out, outs) == 0
    return results


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- the vendor's numbers ------------------------------------------------------------------
def test_normal_algorithm_reproduces_the_vendor_numbers() -> None:
    qp = asymmetric(-2.1178, 2.6398)
    assert qp.scale == pytest.approx(0.0186573, abs=5e-8)
    assert qp.zp == -14
    assert asymmetric(0.0, 6.0).zp == -128  # a Relu output
    assert asymmetric(0.5, 2.0) == asymmetric(0.0, 2.0)  # the range always holds 0


def test_mmse_clips_long_tails() -> None:
    values = np.random.RandomState(0).laplace(size=60000).astype(np.float32)
    hist = _Histogram()
    hist.add(values)
    normal, mmse = asymmetric(hist.lo, hist.hi), hist.mmse()
    assert mmse.scale < normal.scale

    def err(qp):
        q = np.clip(np.round(values / qp.scale) + qp.zp, -128, 127)
        return np.mean(((q - qp.zp) * qp.scale - values) ** 2)

    assert err(mmse) < 0.95 * err(normal)


# ---- fidelity on models with random weights ---------------------------------------------------
CASES = {
    "default_cnn": (default_model, {"mean_values": [MEAN], "std_values": [STD]}, True),
    "two_io": (two_io_model, {}, False),
    "mlp_softmax": (mlp_model, {}, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_and_fp16_fidelity(case, make_ctx, capsys) -> None:
    factory, config, image = CASES[case]
    model = factory()
    calib = samples_for(model, 12, seed=1, image=image)
    int8 = make_ctx(build(model, True, calib, **config))
    fp16 = make_ctx(build(model, False, float_dtype="float16", **config))
    assert "calibrating [" in capsys.readouterr().err  # the progress bar
    session = ort.InferenceSession(model.SerializeToString())
    names = [i.name for i in session.get_inputs()]
    worst_int8 = worst_fp16 = 1.0
    for sample in samples_for(model, 6, seed=2, image=image):
        ref_in = [x.copy() for x in sample]
        if "mean_values" in config:
            ref_in[0] = (ref_in[0] - np.array(MEAN, np.float32).reshape(1, -1, 1, 1)) / \
                np.array(STD, np.float32).reshape(1, -1, 1, 1)  # fmt: skip
        expected = session.run(None, dict(zip(names, ref_in)))
        for ctx, tag in ((int8, "int8"), (fp16, "fp16")):
            got = infer(ctx, sample, len(expected))
            for g, e in zip(got, expected):
                c = cosine(g, e)
                if tag == "int8":
                    worst_int8 = min(worst_int8, c)
                else:
                    worst_fp16 = min(worst_fp16, c)
    assert worst_int8 >= 0.999, worst_int8
    assert worst_fp16 >= 0.99999, worst_fp16


@pytest.mark.parametrize(
    "name", ["light_squeezenet", pytest.param("light_shufflenet", marks=pytest.mark.slow)]
)
def test_light_models_int8_and_fp16(name, make_ctx) -> None:
    """These models' generated weights are constant; SqueezeNet's activations reach 6.6e9,
    beyond float16's 65504, so its fp16 build overflows as it would on the NPU."""
    path = os.path.join(LIGHT, f"{name}.onnx")
    model = onnx.load(path)
    inp = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    shape = [d.dim_value for d in inp[0].type.tensor_type.shape.dim]
    rng = np.random.RandomState(0)
    calib = [[rng.uniform(-1, 1, shape).astype(np.float32)] for _ in range(4)]
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    expected = ort.InferenceSession(path).run(None, {inp[0].name: x})[0]
    for quantize, config in ((True, {}), (False, {"float_dtype": "float16"})):
        ctx = make_ctx(build(path, quantize, calib if quantize else None, **config))
        (got,) = infer(ctx, [x], 1)
        if not quantize and name == "light_squeezenet":
            assert not np.all(np.isfinite(got))  # float16 overflow, faithfully
        else:
            assert cosine(got, expected) >= (0.999 if quantize else 0.99999)


# ---- attributes and conversions ----------------------------------------------------------------
@pytest.fixture(scope="module")
def int8_two_io() -> bytes:
    model = two_io_model()
    return build(model, True, samples_for(model, 12, seed=1, image=False))


def test_int8_attributes(make_ctx, int8_two_io) -> None:
    ctx = make_ctx(int8_two_io)
    a = query(ctx, rk.RKNN_QUERY_INPUT_ATTR, 0)
    assert (a.type, a.fmt) == (rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_NHWC)
    assert a.qnt_type == rk.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC
    assert list(a.dims[:4]) == [1, 32, 32, 3] and a.size == 32 * 32 * 3 and a.scale > 0
    assert -128 <= a.zp <= 127
    native = query(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR, 0)
    assert native.fmt == rk.RKNN_TENSOR_NHWC and native.w_stride == 32
    out_map = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 0)
    assert (out_map.type, out_map.fmt) == (rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_NCHW)
    nat = query(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, 0)
    assert list(nat.dims[:5]) == [1, 1, 32, 32, 16]  # int8 C2 = 16 on rk3588
    assert nat.size == nat.size_with_stride == 32 * 32 * 16
    score = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 1)
    # a final Sigmoid gives an int8 output, as the vendor's ('score_int8', tools/vendor_diff)
    assert score.type == rk.RKNN_TENSOR_INT8
    fp16 = make_ctx(build(two_io_model(), False, float_dtype="float16"))
    nat16 = query(fp16, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, 0)
    assert list(nat16.dims[:5]) == [1, 2, 32, 32, 8] and nat16.type == rk.RKNN_TENSOR_FLOAT16


def test_int8_outputs_lie_on_their_grid(make_ctx, int8_two_io) -> None:
    ctx = make_ctx(int8_two_io)
    rng = np.random.RandomState(5)
    arrays = [rng.randn(1, 3, 32, 32).astype(np.float32), rng.randn(1, 6).astype(np.float32)]
    floats = infer(ctx, arrays, 2, want_float=1)
    raw = infer(ctx, arrays, 2, want_float=0)
    attr = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 0)
    assert raw[0].dtype == np.int8
    np.testing.assert_array_equal(floats[0], (raw[0].astype(np.float32) - attr.zp) *
                                  np.float32(attr.scale))  # fmt: skip
    steps = floats[0] / np.float32(attr.scale) + attr.zp
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)
    score = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 1)  # final Sigmoid: int8 like the vendor's
    assert raw[1].dtype == np.int8
    np.testing.assert_array_equal(floats[1], (raw[1].astype(np.float32) - score.zp) *
                                  np.float32(score.scale))  # fmt: skip


def test_int8_input_conversions(make_ctx, int8_two_io) -> None:
    """float32 NCHW, uint8 NHWC and int8 pass-through (native NHWC) give the same result."""
    ctx = make_ctx(int8_two_io)
    rng = np.random.RandomState(6)
    img = rng.randint(0, 5, (1, 3, 32, 32)).astype(np.float32)
    vec = rng.randn(1, 6).astype(np.float32)
    reference = infer(ctx, [img, vec], 2, want_float=0)
    a = query(ctx, rk.RKNN_QUERY_INPUT_ATTR, 0)
    q = np.clip(np.rint(img / np.float32(a.scale)) + a.zp, -128, 127).astype(np.int8)
    cases = [
        (np.ascontiguousarray(img.transpose(0, 2, 3, 1).astype(np.uint8)), rk.RKNN_TENSOR_UINT8,
         rk.RKNN_TENSOR_NHWC, 0),
        (np.ascontiguousarray(q.transpose(0, 2, 3, 1)), rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_NHWC,
         1),
    ]  # fmt: skip
    for data, type_, fmt, pass_through in cases:
        inputs = (rk.rknn_input * 2)()
        inputs[0].buf, inputs[0].size, inputs[0].type = data.ctypes.data, data.nbytes, type_
        inputs[0].fmt, inputs[0].pass_through = fmt, pass_through
        inputs[1].index, inputs[1].buf, inputs[1].size = 1, vec.ctypes.data, vec.nbytes
        assert rk.rknn_inputs_set(ctx, 2, inputs) == 0 and rk.rknn_run(ctx, None) == 0
        outs = (rk.rknn_output * 2)()
        assert rk.rknn_outputs_get(ctx, 2, outs, None) == 0
        got = np.frombuffer((ctypes.c_char * outs[0].size).from_address(outs[0].buf), np.int8)
        np.testing.assert_array_equal(got.reshape(reference[0].shape), reference[0])
        rk.rknn_outputs_release(ctx, 2, outs)


def test_zero_copy_int8_output_layouts(make_ctx, int8_two_io) -> None:
    ctx = make_ctx(int8_two_io)
    rng = np.random.RandomState(7)
    arrays = [rng.randn(1, 3, 32, 32).astype(np.float32), rng.randn(1, 6).astype(np.float32)]
    expected = infer(ctx, arrays, 2, want_float=1)[0]
    for i, x in enumerate(arrays):
        a = query(ctx, rk.RKNN_QUERY_INPUT_ATTR, i)
        a.type, a.fmt = rk.RKNN_TENSOR_FLOAT32, (rk.RKNN_TENSOR_NCHW if x.ndim == 4
                                                  else rk.RKNN_TENSOR_UNDEFINED)  # fmt: skip
        mem = rk.rknn_create_mem(ctx, x.nbytes)
        ctypes.memmove(mem.contents.virt_addr, x.ctypes.data, x.nbytes)
        assert rk.rknn_set_io_mem(ctx, mem, a) == 0
    native = query(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, 0)  # int8 NC1HWC2
    as_float = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 0)
    as_float.type = rk.RKNN_TENSOR_FLOAT32
    m_native = rk.rknn_create_mem(ctx, native.size)
    m_float = rk.rknn_create_mem(ctx, as_float.n_elems * 4)
    score = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, 1)
    m_score = rk.rknn_create_mem(ctx, score.size)
    assert rk.rknn_set_io_mem(ctx, m_score, score) == 0
    assert rk.rknn_set_io_mem(ctx, m_native, native) == 0
    assert rk.rknn_run(ctx, None) == 0
    q = np.frombuffer((ctypes.c_char * native.size).from_address(m_native.contents.virt_addr),
                      np.int8).reshape(list(native.dims[:5]))  # fmt: skip
    nchw = q.transpose(0, 1, 4, 2, 3).reshape(1, 16, 32, 32)
    np.testing.assert_array_equal((nchw.astype(np.float32) - native.zp) * np.float32(native.scale),
                                  expected)  # fmt: skip
    assert rk.rknn_set_io_mem(ctx, m_float, as_float) == 0
    assert rk.rknn_run(ctx, None) == 0
    got = np.frombuffer((ctypes.c_char * m_float.contents.size)
                        .from_address(m_float.contents.virt_addr), np.float32)  # fmt: skip
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_dataset_file_and_errors(tmp_path) -> None:
    model = two_io_model()
    lines = []
    for k, (img, vec) in enumerate(samples_for(model, 3, seed=8, image=False)):
        np.save(tmp_path / f"img{k}.npy", img)
        np.save(tmp_path / f"vec{k}.npy", vec[0])  # without its batch dim: accepted
        lines.append(f"{tmp_path / f'img{k}.npy'} {tmp_path / f'vec{k}.npy'}")
    (tmp_path / "dataset.txt").write_text("\n".join(lines) + "\n")
    assert build(model, True, str(tmp_path / "dataset.txt"))
    (tmp_path / "bad.txt").write_text(f"{tmp_path / 'img0.npy'}\n")
    rknn = RKNN()
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=True, dataset=str(tmp_path / "bad.txt")) == -1
    assert re.search(r"dataset line 1 has 1 files for 2 inputs", rknn.last_error)
    assert rknn.build(do_quantization=True) == -1
    assert "needs a calibration dataset" in rknn.last_error


def test_batch_size(make_ctx) -> None:
    model = mlp_model()
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=False, rknn_batch_size=2) == 0, rknn.last_error
    ctx = make_ctx(rknn.model_bytes())
    assert list(query(ctx, rk.RKNN_QUERY_INPUT_ATTR).dims[:2]) == [2, 64]
    from rknnrt.core import registry

    assert registry.get(ctx.value).model.meta.rknn_batch_size == 2
    x = np.random.RandomState(9).randn(2, 64).astype(np.float32)
    (got,) = infer(ctx, [x], 1)
    session = ort.InferenceSession(model.SerializeToString())
    for b in range(2):
        np.testing.assert_allclose(got[b], session.run(None, {"x": x[b : b + 1]})[0][0],
                                   rtol=1e-5, atol=1e-6)  # fmt: skip


def test_multi_batch_input_with_h_stride(make_ctx) -> None:
    """Zero-copy NHWC input of a batch-2 model whose batches are h_stride rows apart, with
    padded rows (w_stride) too: equal to the general API on the packed data."""
    rng = np.random.RandomState(10)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)], "bconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 5])],
        [numpy_helper.from_array(rng.randn(4, 3, 3, 3).astype(np.float32), "w")],
    )  # fmt: skip
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    rknn.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert rknn.build(do_quantization=False, rknn_batch_size=2) == 0, rknn.last_error
    ctx = make_ctx(rknn.model_bytes())
    x = rng.randn(2, 3, 6, 5).astype(np.float32)
    (expected,) = infer(ctx, [x], 1)
    h_stride, w_stride = 9, 8
    padded = rng.randn(2, h_stride, w_stride, 3).astype(np.float32) * 100  # junk in the padding
    padded[:, :6, :5, :] = x.transpose(0, 2, 3, 1)
    attr = query(ctx, rk.RKNN_QUERY_INPUT_ATTR)
    attr.type, attr.w_stride, attr.h_stride = rk.RKNN_TENSOR_FLOAT32, w_stride, h_stride
    flat = padded.reshape(-1)[: (h_stride + 6) * w_stride * 3]  # the last batch needs 6 rows
    mem = rk.rknn_create_mem(ctx, flat.nbytes)
    ctypes.memmove(mem.contents.virt_addr, flat.ctypes.data, flat.nbytes)
    small = rk.rknn_create_mem(ctx, flat.nbytes - 4)
    assert rk.rknn_set_io_mem(ctx, small, attr) == rk.RKNN_ERR_PARAM_INVALID
    assert rk.rknn_set_io_mem(ctx, mem, attr) == 0
    out_attr = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
    out = rk.rknn_create_mem(ctx, out_attr.size)
    assert rk.rknn_set_io_mem(ctx, out, out_attr) == 0
    assert rk.rknn_run(ctx, None) == 0
    got = np.frombuffer((ctypes.c_char * out_attr.size).from_address(out.contents.virt_addr),
                        np.float32).reshape(expected.shape)  # fmt: skip
    np.testing.assert_array_equal(got, expected)
