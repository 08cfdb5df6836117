"""core/program/fp16_round.py and sessions/kernels/f16ops.c: a float16 rounding in one pass
gives onnxruntime's Cast(float16) -> Cast(float32) values bit for bit (both kernel paths, every
float16 value and its neighbours, the rounding midpoints, the range's ends), programs give the
same outputs with and without it, and where it cannot run the Cast pairs stay."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rknnrt.core import switches
from rknnrt.core.program import dw_kernel, fp16_round, whole
from rknnrt.lite import RKNNLite
from rknnrt.sessions import factory, kernels

from .conftest import kernel_session
from .models import hardswish_like, inverted_residual_like, scaled_matmul_like
from .test_fp16_layout import _fp16_build


def _bits() -> np.ndarray:
    """Random float32 bit patterns, every float16 value and its float32 neighbours around the
    midpoints to the next one, and the edges: zeros, infinities, 65504 / 65520, the smallest
    normal and subnormal float16 values and the halfway points below them."""
    random = np.random.RandomState(0).randint(0, 2**32, 300_000, dtype=np.uint64)
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    exact = halves.astype(np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([exact + d for d in (0, 1, -1, 0xFFF, 0x1000, 0x1001)])
    edges = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x477FF000, 0x477FEFFF, 0x477FE000,
             0x38800000, 0x387FFFFF, 0x33000000, 0x33000001, 0x32FFFFFF, 0x33800000]  # fmt: skip
    every = np.concatenate([random.astype(np.int64), near, np.array(edges, np.int64)])
    return (every & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def _cast_pair(x: np.ndarray) -> np.ndarray:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)], "pair",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _round_model() -> onnx.ModelProto:
    """x -> RoundFloat16 -> y."""
    graph = helper.make_graph(
        [helper.make_node(fp16_round.OP, ["x"], ["y"], domain=kernels.DOMAIN)], "round",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(kernels.DOMAIN, 1)])


def _op(library, x: np.ndarray) -> np.ndarray:
    model = _round_model()
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(library[0]))
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    return session.run(None, {"x": x})[0]


def test_the_widest_rounding_path_is_the_cpus(library) -> None:
    """AVX-512 where the CPU has it (16 lanes a step), else F16C, else the scalar path."""
    flags = open("/proc/cpuinfo").read().split() if sys.platform.startswith("linux") else []
    widest = 2 if "avx512f" in flags else 1 if "f16c" in flags else 0
    assert library[1].rknnrt_f16round_widest() == widest


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "f16c", "scalar"])
def test_the_op_gives_the_cast_pairs_bits(library, level) -> None:
    x = _bits()
    assert x.size % 8  # a tail shorter than a vector
    want = _cast_pair(x)
    part = np.ascontiguousarray(x[: x.size // 7 * 7].reshape(1, -1, 7)[:, :, :5])  # rank 3
    library[1].rknnrt_f16round_max_level(level)
    try:
        got = _op(library, part)
        flat = _op(library, x)
    finally:
        library[1].rknnrt_f16round_max_level(2)
    nan = np.isnan(x)
    assert nan.sum() > 1000 and np.isnan(flat[nan]).all()  # onnxruntime's NaN payloads vary
    assert flat[~nan].tobytes() == want[~nan].tobytes()
    assert np.isinf(flat).sum() > 1000 and (flat[~nan] != x[~nan]).sum() > x.size // 2
    assert got.shape == part.shape
    keep = ~np.isnan(part)
    assert got[keep].tobytes() == _cast_pair(part)[keep].tobytes()


def _pair_graph(source_type: int = TensorProto.FLOAT, shared_half: bool = False) -> bytes:
    """x -> Relu -> Cast(f16) -> Cast(f32) -> y (and the float16 value also an output when
    `shared_half`); x of `source_type` goes through a Cast to float first."""
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["xf"], ["r"]),
             helper.make_node("Cast", ["r"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    if shared_half:
        outputs.append(helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 3]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", source_type, [2, 3])],
                              outputs)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_rewrite_takes_the_pairs_it_can(library) -> None:
    rewritten = onnx.load_model_from_string(fp16_round.rewrite(_pair_graph()))
    ops = [(n.op_type, n.domain) for n in rewritten.graph.node]
    assert ops == [("Cast", ""), ("Relu", ""), (fp16_round.OP, kernels.DOMAIN)]
    assert rewritten.graph.node[-1].output[0] == "y"
    assert kernels.DOMAIN in {o.domain for o in rewritten.opset_import}
    shared = _pair_graph(shared_half=True)  # the float16 value is read elsewhere: kept
    assert fp16_round.rewrite(shared) is shared
    typed = onnx.load_model_from_string(_pair_graph())
    typed.graph.value_info.append(helper.make_tensor_value_info("r", TensorProto.DOUBLE, None))
    typed_bytes = typed.SerializeToString()  # a source recorded as another type: kept
    assert fp16_round.rewrite(typed_bytes) is typed_bytes


def test_optimised_graphs_get_the_rounded_shapes_and_the_layout_keeps_its_pairs(
        library, monkeypatch) -> None:  # fmt: skip
    opened: list[bytes] = []
    original = factory.create
    monkeypatch.setattr(factory, "create",
                        lambda m, *a, **k: opened.append(m) or original(m, *a, **k))  # fmt: skip
    model = onnx.load_model_from_string(_pair_graph())
    model.graph.node.append(helper.make_node("Relu", ["y"], ["z"]))  # y no longer an output
    model.graph.output[0].name = "z"
    graph = model.SerializeToString()
    x = np.array([[1.0001, -2.0, 65519.0], [1e-8, 3.14159, -0.1]], np.float32)
    want = np.maximum(x, 0).astype(np.float16).astype(np.float32).tobytes()
    assert whole.open_program(graph).run(None, {"x": x})[0].tobytes() == want
    assert whole.open_program(graph, round_in_one_pass=False).run(None, {"x": x})[0].tobytes() \
        == want  # fmt: skip
    rewritten = onnx.load_model_from_string(opened[0])
    assert fp16_round.OP in {n.op_type for n in rewritten.graph.node}
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in rewritten.graph.value_info}  # fmt: skip
    assert shapes.get("y") == [2, 3]  # onnxruntime cannot infer it through the node
    assert opened[1] is graph  # the layout's own session (fp16_layout) keeps the Casts


def test_a_failed_shape_inference_keeps_the_pairs(library, monkeypatch) -> None:
    graph = _pair_graph()
    assert fp16_round.rewrite(graph, record_shapes=True) is not graph

    def fails(model):
        raise onnx.shape_inference.InferenceError("no shapes")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fails)
    assert fp16_round.rewrite(graph, record_shapes=True) is graph
    assert fp16_round.rewrite(graph) is not graph  # a graph run as it is needs no shapes


def test_open_program_falls_back_to_the_pairs_where_onnxruntime_refuses(library) -> None:
    model = onnx.load_model_from_string(_pair_graph())
    model.graph.node[0].attribute[0].i = TensorProto.DOUBLE  # an unrecorded double source
    model.graph.node[1].op_type = "Neg"
    graph = model.SerializeToString()
    assert fp16_round.rewrite(graph) is not graph  # taken: the type is not recorded
    x = np.array([[1.0001, -2.0, 65519.0], [1e-8, 3.14159, -0.1]], np.float32)
    y = whole.open_program(graph, optimise=False).run(None, {"x": x})[0]
    assert y.tobytes() == (-x.astype(np.float64)).astype(np.float16).astype(np.float32).tobytes()


def _run(path: str, x: np.ndarray, monkeypatch, on: bool) -> tuple[list[bytes], int]:
    """(outputs, RoundFloat16 nodes in the sessions the program opened)."""
    seen: list[int] = []
    original = factory.create

    def create(model, *args, **kwargs):
        if isinstance(model, bytes) and kernels.DOMAIN.encode() in model:
            proto = onnx.load_model_from_string(model)
            seen.append(sum(n.op_type == fp16_round.OP for n in proto.graph.node))
        return original(model, *args, **kwargs)

    monkeypatch.setattr(factory, "create", create)
    monkeypatch.setenv(switches.FP16_ROUND_KERNEL.name, "1" if on else "0")
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [o.tobytes() for o in runtime.inference([x], data_format="nchw")], sum(seen)
    finally:
        runtime.release()


@pytest.mark.parametrize("model", [hardswish_like(), inverted_residual_like(),
                                   scaled_matmul_like()], ids=["hardswish", "inverted", "matmul"])
def test_fp16_programs_give_the_same_outputs_with_the_one_pass_rounding(
        library, model, tmp_path, monkeypatch) -> None:  # fmt: skip
    path, _ = _fp16_build(model, tmp_path)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = (np.random.RandomState(9).rand(*dims) * 4 - 1).astype(np.float32)
    with_kernel, rounded = _run(path, x, monkeypatch, True)
    pairs, none = _run(path, x, monkeypatch, False)
    assert rounded >= 3 and none == 0
    assert with_kernel == pairs
    assert np.ptp(np.frombuffer(with_kernel[0], np.float32)) > 0.1


def test_no_compiler_keeps_the_pairs_with_one_warning(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv(switches.CACHE_DIR.name, str(tmp_path))  # nothing cached there
    monkeypatch.setattr(kernels, "compiler", lambda: None)
    monkeypatch.setattr(dw_kernel, "_warned", False)
    graph = _pair_graph()
    assert fp16_round.rewrite(graph) is graph and fp16_round.rewrite(graph) is graph
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("W RKNN:")]
    assert len(lines) == 1 and "no C compiler" in lines[0], lines
    x = np.array([[1.0001, -2.0, 65519.0], [1e-8, 3.14159, -0.1]], np.float32)
    y = whole.open_program(graph, optimise=False).run(None, {"x": x})[0]
    assert y.tobytes() == np.maximum(x, 0).astype(np.float16).astype(np.float32).tobytes()


@pytest.mark.slow  # three real-architecture builds (~10 s)
@pytest.mark.parametrize("name", ["resnet18", "mobilenetv3_small", "deit_tiny"])
def test_plain_programs_give_the_same_bits_with_the_kernel(library, name, tmp_path,
                                                           monkeypatch) -> None:  # fmt: skip
    """The optimised (not laid-out) program: without the recorded shapes onnxruntime picked
    other kernels around the node (ResNet-18: 627 output values differed)."""
    from tools.real_arch import catalog

    path, _ = _fp16_build(catalog.build(name, test=True), tmp_path)
    x = np.random.RandomState(0).rand(*catalog.input_shape(name, True)).astype(np.float32)
    monkeypatch.setenv(switches.FP16_BLOCKED.name, "0")
    with_kernel, rounded = _run(path, x, monkeypatch, True)
    pairs, _ = _run(path, x, monkeypatch, False)
    assert rounded >= 1 and with_kernel == pairs


def _in_place_runs(library) -> int:
    count = library[1].rknnrt_f16round_in_place_runs
    count.restype = ctypes.c_int64
    return count()


def _round_between(later_reader: bool) -> onnx.ModelProto:
    """x -> Relu -> a -> RoundFloat16 -> b -> Relu -> y, no shapes recorded; with
    `later_reader`, y = Relu(b) + a (a is read after the rounding)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node(fp16_round.OP, ["a"], ["b"], domain=kernels.DOMAIN),
             helper.make_node("Relu", ["b"], ["c" if later_reader else "y"])]  # fmt: skip
    if later_reader:
        nodes.append(helper.make_node("Add", ["c", "a"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [3, 1001])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1001])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(kernels.DOMAIN, 1)])


@pytest.mark.skipif(tuple(map(int, ort.get_version_string().split(".")[:2])) < (1, 18),
                    reason="onnxruntime before 1.18 has no in-place custom ops: fresh outputs")
def test_the_rounding_takes_its_inputs_buffer_only_where_nothing_reads_it_later(
        library, tmp_path) -> None:  # fmt: skip
    x = (np.random.RandomState(3).rand(3, 1001) * 8 - 2).astype(np.float32)
    rounded = np.maximum(x, 0).astype(np.float16).astype(np.float32)
    before = _in_place_runs(library)
    y = kernel_session(library, _round_between(False)).run(None, {"x": x})[0]
    assert y.tobytes() == rounded.tobytes()
    assert _in_place_runs(library) == before + 1  # no shapes recorded: the op says them
    y = kernel_session(library, _round_between(True)).run(None, {"x": x})[0]
    assert y.tobytes() == (rounded + np.maximum(x, 0)).tobytes()  # `a` left unrounded
    assert (rounded != np.maximum(x, 0)).sum() > 1000
    assert _in_place_runs(library) == before + 1  # a fresh output there
    model = inverted_residual_like()
    path, _ = _fp16_build(model, tmp_path)  # a laid-out program
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        runtime.inference([np.random.RandomState(4).rand(*dims).astype(np.float32)],
                          data_format="nchw")  # fmt: skip
    finally:
        runtime.release()
    assert _in_place_runs(library) >= before + 3


def test_a_large_rounding_gives_the_same_bits_on_more_threads(library) -> None:
    """Chunks of at least 64 K values (whole vectors) over onnxruntime's threads: 1 000 003
    values give 15 chunks, the last one short."""
    x = np.random.RandomState(6).randn(1_000_003).astype(np.float32) * 1000
    model = _round_model()
    runs = [kernel_session(library, model, threads).run(None, {"x": x})[0] for threads in (1, 4)]
    assert runs[0].tobytes() == runs[1].tobytes() == _cast_pair(x).tobytes()
    assert (runs[1] != x).sum() > x.size // 2
