"""core/program/fp16_layout.py: a float16 program's roundings run inside onnxruntime's blocked
layout, with outputs bit-identical to the toolkit's graph."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rknnrt.core.program import fp16_blocked_ops, fp16_layout, whole
from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import (
    hardswish_like,
    inverted_residual_like,
    pooled_like,
    residual_like,
    scaled_matmul_like,
    shufflenet_like,
)


def _fp16_build(model: onnx.ModelProto, tmp_path) -> tuple[str, onnx.ModelProto]:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=False) == 0
    path = str(tmp_path / f"{model.graph.name}_{len(model.graph.node)}.rknn")
    assert rknn.export_rknn(path) == 0
    return path, rknn._built.program


def _infer(path: str, inputs: list[np.ndarray]) -> list[bytes]:
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [runtime.inference([x], data_format="nchw")[0].tobytes() for x in inputs]
    finally:
        runtime.release()


def _inputs(size: int) -> list[np.ndarray]:
    rng = np.random.RandomState(3)
    return [(rng.rand(1, 3, size, size) * 4 - 1).astype(np.float32) for _ in range(4)]


@pytest.mark.parametrize("model", [residual_like(), shufflenet_like(), hardswish_like()],
                         ids=["residual", "shuffle", "hardswish"])
def test_the_runtime_gives_the_same_bits_with_roundings_in_the_blocked_layout(
        model, tmp_path, monkeypatch) -> None:  # fmt: skip
    size = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    path, _ = _fp16_build(model, tmp_path)
    made: list[bool] = []
    original = fp16_layout.blocked_program
    monkeypatch.setattr(fp16_layout, "blocked_program",
                        lambda *a: made.append((r := original(*a)) is not None) or r)  # fmt: skip
    blocked = _infer(path, _inputs(size))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    plain = _infer(path, _inputs(size))
    assert made and len(made) == 1  # the switch skipped it on the second init
    assert blocked == plain
    assert len(set(plain)) == len(plain)  # four inputs, four different outputs


def test_pairs_go_back_on_the_blocked_tensors(tmp_path) -> None:
    _, program = _fp16_build(residual_like(), tmp_path)
    pairs = fp16_layout.rounding_pairs(program.graph)
    assert len(pairs) >= 5  # every stored tensor but the graph output
    laid_out = fp16_layout.blocked_program(program.SerializeToString(), whole.open_program, None)
    if laid_out is None:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU: nothing to move "
                    "(the runtime keeps the toolkit's graph; the bit-equality test still runs)")
    graph = onnx.load_model_from_string(laid_out.graph).graph
    # the constants are in the one external file handed back, not inside the graph
    assert laid_out.data.size > 0
    assert all(t.data_location == TensorProto.EXTERNAL or t.ByteSize() < 1024
               for t in graph.initializer)  # fmt: skip
    producer = {out: n for n in graph.node for out in n.output}
    outputs = {o.name for o in graph.output}
    halves = [n for n in graph.node if n.op_type == "Cast" and n.attribute[0].i == 10
              and n.output[0] not in outputs]  # fmt: skip
    # a pair after a blocked Add (and its Relu) is fp16_blocked_ops' rounded add's now
    rounded_adds = [n for n in graph.node if n.op_type in (fp16_blocked_ops.ADD_OP,
                                                           fp16_blocked_ops.ADD_RELU_OP)]
    assert len(halves) + len(rounded_adds) == len(pairs)
    blocked_sources = [producer[n.input[0]].domain == "com.microsoft.nchwc" for n in halves]
    assert sum(blocked_sources) >= len(halves) - 1  # without the kernels Add+Relu stays plain
    # no value is reordered out of the blocked layout only to be rounded and reordered back
    assert not [n for n in halves if producer[n.input[0]].op_type == "ReorderOutput"]
    fast = whole.open_program(laid_out.graph, optimise=False, files_in_memory=(
        [fp16_layout.DATA_FILE], [laid_out.data], [laid_out.data.size]))  # fmt: skip
    plain = ort.InferenceSession(program.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in _inputs(16):
        feed = {"x": x.astype(np.float16)}
        assert fast.run(None, feed)[0].tobytes() == plain.run(None, feed)[0].tobytes()


def test_only_roundings_inside_the_graph_are_moved() -> None:
    cast = helper.make_node
    nodes = [cast("Relu", ["x"], ["a"]),
             cast("Cast", ["a"], ["a_h"], to=TensorProto.FLOAT16),  # a rounding: moved
             cast("Cast", ["a_h"], ["a_r"], to=TensorProto.FLOAT),
             cast("Relu", ["a_r"], ["b"]),
             cast("Cast", ["b"], ["b_h"], to=TensorProto.FLOAT16),  # b is read twice: kept
             cast("Cast", ["b_h"], ["b_r"], to=TensorProto.FLOAT),
             cast("Neg", ["b"], ["c"]),
             cast("Add", ["b_r", "c"], ["d"]),
             cast("Cast", ["d"], ["y"], to=TensorProto.FLOAT16),  # the output's own Cast: kept
             cast("Cast", ["y"], ["y_r"], to=TensorProto.FLOAT),
             cast("Cast", ["x"], ["x_h"], to=TensorProto.FLOAT16),  # an input's: kept
             cast("Cast", ["x_h"], ["x_r"], to=TensorProto.FLOAT),
             cast("Add", ["y_r", "x_r"], ["z"]),
             cast("Relu", ["z"], ["e"]),
             cast("Cast", ["e"], ["e_h"], to=TensorProto.FLOAT16),  # rounded output: kept
             cast("Cast", ["e_h"], ["w"], to=TensorProto.FLOAT)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 4])])  # fmt: skip
    assert [(a.output[0], b.output[0]) for a, b in fp16_layout.rounding_pairs(graph)] == [
        ("a_h", "a_r")]  # fmt: skip


def test_a_failed_layout_leaves_the_toolkit_graph(tmp_path, monkeypatch) -> None:
    path, _ = _fp16_build(residual_like(), tmp_path)
    expected = _infer(path, _inputs(16))

    def fail(*args):
        raise RuntimeError("no layout")

    monkeypatch.setattr(fp16_layout, "blocked_program", fail)
    assert _infer(path, _inputs(16)) == expected


def test_a_rounded_hardswish_stays_fused_into_its_conv(tmp_path) -> None:
    """A HardSwish whose output is rounded runs inside its blocked Conv, as onnxruntime fuses it
    in the toolkit's graph, not as HardSigmoid and Mul (its function body: two more passes)."""
    _, program = _fp16_build(hardswish_like(), tmp_path)
    laid_out = fp16_layout.blocked_program(program.SerializeToString(), whole.open_program, None)
    if laid_out is None:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU: nothing to move "
                    "(the runtime keeps the toolkit's graph; the bit-equality test still runs)")
    graph = onnx.load_model_from_string(laid_out.graph).graph
    activations = [next((a.s for a in n.attribute if a.name == "activation"), b"")
                   for n in graph.node if n.op_type == "Conv"]  # fmt: skip
    assert activations.count(b"HardSwish") == 3
    # only the SE gate's HardSigmoid is left: its conv's output is a stored tensor
    ops = [n.op_type for n in graph.node]
    assert ops.count("HardSigmoid") == 1
    assert ops.count("Mul") + ops.count(fp16_blocked_ops.MUL_OP) == 1  # its gate's multiply


def _laid_out_graph(program: onnx.ModelProto) -> onnx.GraphProto:
    laid_out = fp16_layout.blocked_program(program.SerializeToString(), whole.open_program, None)
    if laid_out is None:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU: nothing to move")
    return onnx.load_model_from_string(laid_out.graph).graph


def _blocked_and_plain(path: str, size: int, monkeypatch) -> tuple[list[bytes], list[bytes]]:
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    blocked = _infer(path, _inputs(size))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    return blocked, _infer(path, _inputs(size))


def test_a_residual_add_is_not_fused_into_the_conv_beside_its_rounded_input(
        tmp_path, monkeypatch) -> None:  # fmt: skip
    """The toolkit's graph gives such an Add a Cast's plain output, which onnxruntime never
    fuses across; a blocked Conv with the Add as its Sum input sums in another order (it was
    so on MobileNetV3-small, MobileNetV2, EfficientNet-B0, ResNet-18, RegNetX, DeepLabV3)."""
    path, program = _fp16_build(inverted_residual_like(6, 32), tmp_path)
    graph = _laid_out_graph(program)
    convs = [n for n in graph.node if n.op_type == "Conv"]
    assert len(convs) == 8 and all(len(n.input) <= 3 for n in convs)  # no Sum input
    ops = [n.op_type for n in graph.node]
    assert ops.count("Add") + ops.count(fp16_blocked_ops.ADD_OP) == 2  # with their own sums
    blocked, plain = _blocked_and_plain(path, 32, monkeypatch)
    assert blocked == plain  # one of the four differed in 4 values with the Adds fused


def test_pools_and_linear_resizes_read_their_rounded_input_plain(tmp_path, monkeypatch) -> None:
    """A blocked GlobalAveragePool and a blocked (linear) Upsample compute otherwise than the
    plain kernels the toolkit's graph gives a rounded tensor: their inputs keep their pairs
    (the pool's, where rknnrt's blocked pool does not run: test_fp16_blocked_ops.py)."""
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED_OPS", "0")
    path, program = _fp16_build(pooled_like(), tmp_path)
    graph = _laid_out_graph(program)
    producer = {out: n for n in graph.node for out in n.output}
    for node in graph.node:
        if node.op_type in ("GlobalAveragePool", "Resize", "Upsample"):
            assert node.domain == ""  # the plain kernel
            source = producer[node.input[0]]
            assert source.op_type == "Cast" and source.attribute[0].i == TensorProto.FLOAT
    blocked, plain = _blocked_and_plain(path, 32, monkeypatch)
    assert blocked == plain  # all four differed (6-12 values) with both blocked


def test_a_fusion_across_a_rounding_leaves_that_pair_where_it_is(tmp_path, monkeypatch) -> None:
    """Without its pair, a stored Mul by a constant is folded into the MatMul reading it (alpha
    of a FusedMatMul, the rounding lost: 229-251 values of each output differed); the layout is
    made again with that pair in place."""
    path, program = _fp16_build(scaled_matmul_like(), tmp_path)
    graph = _laid_out_graph(program)
    ops = [n.op_type for n in graph.node]
    assert "FusedMatMul" not in ops and ops.count("Mul") == 1 and ops.count("MatMul") == 1
    assert "ReorderOutput" in ops  # the Conv's own rounding is still inside the blocked layout
    blocked, plain = _blocked_and_plain(path, 16, monkeypatch)
    assert blocked == plain


def _sessions(monkeypatch) -> list[dict]:
    """The settings of every program session opened (whole.open_program), in order."""
    opened: list[dict] = []
    original = whole.open_program

    def record(graph, **settings):
        opened.append(settings)
        return original(graph, **settings)

    monkeypatch.setattr(whole, "open_program", record)
    return opened


def test_the_laid_out_program_reads_its_constants_in_place(tmp_path, monkeypatch) -> None:
    """The session of a laid-out program is given its constants as views of the laid-out data
    (no in-memory file, which onnxruntime copies whole), with the same bits."""
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    path, _ = _fp16_build(residual_like(), tmp_path)
    laid: list = []
    original = fp16_layout.blocked_program
    monkeypatch.setattr(fp16_layout, "blocked_program",
                        lambda *a: laid.append(original(*a)) or laid[-1])  # fmt: skip
    opened = _sessions(monkeypatch)
    got = _infer(path, _inputs(16))
    if laid[0] is None:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU")
    final = opened[-1]
    assert final["optimise"] is False and final.get("files_in_memory") is None
    names, values = final["initializers"]
    graph = onnx.load_model_from_string(laid[0].graph).graph
    external = {t.name for t in graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert set(names) == external and len(names) >= 5  # every external constant, no other
    data = laid[0].data
    start = data.__array_interface__["data"][0]
    for value in values:  # OrtValues over the mapped data itself
        assert start <= value.data_ptr() < start + data.size
    monkeypatch.setattr(fp16_layout, "constants", lambda blocked: None)  # the in-memory file
    assert _infer(path, _inputs(16)) == got
    assert opened[-1].get("files_in_memory") is not None


def test_the_layout_session_packs_no_weights_and_lays_out_the_same(tmp_path) -> None:
    """The session that lays the program out is never run: it does not pre-pack weights, and
    the laid-out graph (its operators; onnxruntime numbers the names it makes process-wide),
    constants and results are those it lays out with packing on."""
    _, program = _fp16_build(residual_like(), tmp_path)
    graph = program.SerializeToString()
    configs: list[dict] = []

    def opener(packing: bool):
        def open_program(g, **settings):
            config = dict(settings.get("config") or {})
            if packing:
                config.pop("session.disable_prepacking")
            configs.append(config)
            return whole.open_program(g, **{**settings, "config": config})
        return open_program

    unpacked = fp16_layout.blocked_program(graph, opener(False), None)
    packed = fp16_layout.blocked_program(graph, opener(True), None)
    assert configs[0]["session.disable_prepacking"] == "1"
    if unpacked is None:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU")

    def ops(laid_out: bytes) -> list[tuple]:
        graph = onnx.load_model_from_string(laid_out).graph
        return [(n.op_type, n.domain, [a.SerializeToString() for a in n.attribute])
                for n in graph.node]  # fmt: skip

    def run(laid_out) -> list[bytes]:
        session = whole.open_program(laid_out.graph, optimise=False, files_in_memory=(
            [fp16_layout.DATA_FILE], [laid_out.data], [laid_out.data.size]))  # fmt: skip
        return [session.run(None, {"x": x.astype(np.float16)})[0].tobytes()
                for x in _inputs(16)]  # fmt: skip

    # the same operators; their order may differ (onnxruntime's topological order of the nodes
    # it makes follows their process-wide names: seen on a CI machine)
    assert sorted(ops(unpacked.graph)) == sorted(ops(packed.graph))
    assert unpacked.data.tobytes() == packed.data.tobytes() and unpacked.data.size > 0
    assert run(unpacked) == run(packed)
