"""Issue 14 follow-ups: weights stored as several input-channel tiles (SqueezeNet's fire6/7),
AveragePool and LRN (ShuffleNet, Inception v1), and the identity conv the compiler puts before
an input's first CPU op. Checked against the fixtures' simulator outputs and their original
ONNX models (make_fixtures.make_onnx; no vendor toolkit needed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from rknnrt.lite import RKNNLite
from rknnrt.model.vendor_rknn import fileformat, graph, rebuild, weights, window_ops
from rknnrt.model.vendor_rknn.flatbuf import VendorFormatError

from .make_fixtures import make_onnx
from .vendor_data import FIXTURES, REPORTED, model_bytes, reference

PLATFORMS = ("rk3588", "rk3566", "rk3576")


def _outputs(stem: str) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    ref = reference(stem)
    lite = RKNNLite()
    assert lite.load_rknn(str(FIXTURES / f"{stem}.rknn")) == 0
    assert lite.init_runtime() == 0
    runs = [lite.inference(inputs=[ref["in0"][s]], data_format=["nchw"])
            for s in range(ref["in0"].shape[0])]  # fmt: skip
    lite.release()
    outs = [np.stack([np.asarray(r[k], np.float64) for r in runs]) for k in range(len(runs[0]))]
    return outs, ref


def _int8_steps(stem: str) -> list[np.ndarray]:
    """Per output: rknnrt's int8 codes minus the simulator's."""
    outs, ref = _outputs(stem)
    rep = REPORTED[stem]
    steps = []
    for k, name in enumerate(rep["outputs"]):
        scale = rep["io_quant"][name]["scale"]
        want = ref[f"out{k}"].astype(np.float64).reshape(outs[k].shape)
        steps.append(np.round(outs[k] / scale) - np.round(want / scale))
    return steps


def _node(m: fileformat.VendorModel, op_type: str, k: int = 0) -> fileformat.Node:
    return [n for n in m.nodes if n.op_type == op_type][k]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_average_pool_int8_is_bit_exact(platform: str) -> None:
    """The pools' window sums in row-major float32 order reproduce the simulator's int8 ties
    (onnxruntime's AveragePool gives 98.2% of y1 equal); the model's input reaches the first
    (CPU) pool through the compiler's identity conv, whose bias blob has no scale groups."""
    for diff in _int8_steps(f"avgpool_{platform}_i8"):
        assert not diff.any(), (platform, int(np.abs(diff).max()), float(np.mean(diff != 0)))


@pytest.mark.parametrize("dtype", ["i8", "fp16"])
def test_average_pool_attributes_come_from_the_file(dtype: str) -> None:
    m = fileformat.parse(memoryview(model_bytes(f"avgpool_rk3588_{dtype}")))
    first, second, third = (window_ops.pool_attrs(_node(m, "AveragePool", k)) for k in range(3))
    assert first == dict(ceil_mode=0, count_include_pad=0, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2])  # fmt: skip
    assert second["kernel_shape"] == [4, 4] and second["pads"] == [0, 0, 1, 1]
    assert third["count_include_pad"] == 1 and third["pads"] == [1, 1, 1, 1]


def test_lrn_attributes_come_from_the_file_and_default_like_onnx() -> None:
    """make_fixtures' m_lrn: size 3, alpha 0.2, beta 0.6, bias 1.5, then ONNX's defaults with
    size 5 (the file omits fields equal to the defaults)."""
    for dtype in ("i8", "fp16"):
        m = fileformat.parse(memoryview(model_bytes(f"lrn_rk3576_{dtype}")))
        first, second = (window_ops.lrn_attrs(_node(m, "LRN", k)) for k in range(2))
        assert first == pytest.approx(dict(size=3, alpha=0.2, beta=0.6, bias=1.5))
        assert second == pytest.approx(dict(size=5, alpha=1e-4, beta=0.75, bias=1.0))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lrn_int8_agrees_with_the_simulator(platform: str) -> None:
    (diff,) = _int8_steps(f"lrn_{platform}_i8")
    assert np.abs(diff).max() <= 1 and np.mean(diff == 0) >= 0.99, platform


@pytest.mark.parametrize("platform", PLATFORMS)
def test_weights_split_into_input_channel_tiles_unpack_to_the_original(platform: str) -> None:
    """fire's conv 48->64 is stored as two tiles per output block (32 + 16 input channels,
    interleaved per OC1 step) everywhere but rk3566 float16; its float16 weights equal the
    ONNX model's rounded to float16."""
    original = {i.name: numpy_helper.to_array(i) for i in make_onnx("fire").graph.initializer}
    m = fileformat.parse(memoryview(model_bytes(f"fire_{platform}_fp16")))
    w = next(t for t in m.tensors if t.name == "c2_w")
    got = weights.unpack(m.data(w), "float16", w.native_shape, *w.shape, w.name)
    np.testing.assert_array_equal(got, original["c2_w"].astype(np.float16))
    if platform != "rk3566":
        assert len(w.native_shape) == 12 and w.native_shape[0] > 1  # two tiles, OC1 > 1


@pytest.mark.parametrize("platform", PLATFORMS)
def test_fire_int8_is_bit_exact(platform: str) -> None:
    for diff in _int8_steps(f"fire_{platform}_i8"):
        assert not diff.any(), platform


def test_pool_output_shape_that_does_not_fit_is_refused() -> None:
    m = fileformat.parse(memoryview(model_bytes("avgpool_rk3588_fp16")))
    pool = _node(m, "AveragePool")
    m.tensors[pool.outputs[0]].shape = [1, 8, 6, 6]  # 13x13, 3x3 stride 2 pad 1 gives 7x7
    with pytest.raises(VendorFormatError, match="AveragePool .* does not fit"):
        rebuild.rebuild(m)


class _Attrs:
    """A node attribute table with given scalar values (slot -> value)."""

    def __init__(self, values: dict[int, float]) -> None:
        self.values = values

    def scalar(self, slot: int, fmt: str, default: float = 0) -> float:
        return self.values.get(slot, default)

    def string(self, slot: int) -> None:
        return None

    def ints(self, slot: int) -> None:
        return None


@pytest.mark.parametrize("values", [{3: 0}, {3: 5, 2: -1.0}, {}])
def test_invalid_lrn_attributes_are_refused(values: dict[int, float]) -> None:
    node = fileformat.Node(1, "LRN", "LRN:n1", 0, [0], [1], 31, _Attrs(values))  # type: ignore[arg-type]
    with pytest.raises(VendorFormatError, match="LRN 'LRN:n1' has invalid attributes"):
        window_ops.lrn_attrs(node)


class _PoolAttrs(_Attrs):
    def __init__(self, values: dict[int, float], lists: dict[int, list[int]]) -> None:
        super().__init__(values)
        self.lists = lists

    def ints(self, slot: int) -> list[int] | None:  # type: ignore[override]
        return self.lists.get(slot)


@pytest.mark.parametrize(
    ("size", "kernel", "strides", "pads", "ceil", "count_pad"),
    [
        (13, [3, 3], [2, 2], [1, 1, 1, 1], 0, 0),  # ShuffleNet
        (6, [7, 7], [1, 1], [0, 0, 1, 1], 0, 0),  # Inception v1's head
        (8, [3, 3], [2, 2], [1, 1, 0, 0], 1, 0),  # ceil_mode: the last window overhangs
        (9, [2, 3], [2, 1], [0, 1, 1, 1], 1, 1),
        (7, [3, 3], [1, 1], [1, 1, 1, 1], 0, 1),
    ],
)
def test_average_pool_rebuild_computes_onnx_average_pool(size, kernel, strides, pads, ceil,
                                                         count_pad) -> None:  # fmt: skip
    """The sliced form equals onnxruntime's AveragePool up to float rounding (its summation
    order is what differs), including ceil_mode overhangs and count_include_pad."""
    import onnxruntime as ort
    from onnx import TensorProto
    from onnx import helper as oh

    x = np.random.default_rng(5).standard_normal((1, 3, size, size)).astype(np.float32)
    ref_model = oh.make_model(oh.make_graph(
        [oh.make_node("AveragePool", ["x"], ["y"], kernel_shape=kernel, strides=strides,
                      pads=pads, ceil_mode=ceil, count_include_pad=count_pad)], "ref",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[oh.make_opsetid("", 13)])  # fmt: skip
    want = ort.InferenceSession(ref_model.SerializeToString()).run(None, {"x": x})[0]
    m = fileformat.parse(memoryview(model_bytes("avgpool_rk3588_fp16")))
    src, out = (fileformat.Tensor(**{**vars(m.tensors[0]), "shape": list(shape)})
                for shape in (x.shape, want.shape))  # fmt: skip
    attrs = _PoolAttrs({1: ceil, 2: count_pad}, {3: kernel, 4: pads, 5: strides})
    node = fileformat.Node(1, "AveragePool", "AveragePool:p", 0, [0], [1], 5, attrs)  # type: ignore[arg-type]
    b = graph.GraphBuilder(m)
    y = window_ops.average_pool(b, "x", node, src, out)
    b.graph.node.extend(b.nodes)
    b.graph.input.append(oh.make_tensor_value_info("x", TensorProto.FLOAT, x.shape))
    b.graph.output.append(oh.make_tensor_value_info(y, TensorProto.FLOAT, want.shape))
    b.model.opset_import.add(domain="", version=13)
    b.graph.name = "pool"
    got = ort.InferenceSession(b.model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
