"""sessions/: every onnxruntime session of the package opens under a named policy."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rknnrt.sessions import factory, policies

ROOT = pathlib.Path(__file__).resolve().parents[2] / "rknnrt"


def _conv(quantised: bool) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])]
    if quantised:
        s = numpy_helper.from_array(np.array(0.5, np.float32), "s")
        nodes += [helper.make_node("QuantizeLinear", ["y", "s"], ["q"]),
                  helper.make_node("DequantizeLinear", ["q", "s"], ["z"])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2])],
        [helper.make_tensor_value_info("z" if quantised else "y", TensorProto.FLOAT, None)],
        [w] + ([s] if quantised else []),
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_program_workers_stop_spinning_at_the_end_of_a_run() -> None:
    options = factory.options_for(_conv(False).SerializeToString(), policies.PROGRAM)
    assert options.get_session_config_entry(policies.SPIN_STOP_KEY) == "1"


def test_helpers_run_on_one_thread_without_spinning() -> None:
    options = factory.options_for(_conv(False).SerializeToString(), policies.HELPER, threads=8)
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry(policies.ALLOW_SPIN_KEY) == "0"


def test_analysis_runs_the_graph_as_it_is_stated() -> None:
    import onnxruntime as ort

    options = factory.options_for(_conv(False).SerializeToString(), policies.ANALYSIS, threads=3)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.intra_op_num_threads == 3


def test_one_module_opens_sessions() -> None:
    """The door: InferenceSession( and SessionOptions( appear in sessions/policies.py only."""
    openers = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                     if "InferenceSession(" in p.read_text() or "SessionOptions(" in p.read_text())
    assert openers == ["sessions/policies.py"]


def test_a_failing_run_prints_nothing_of_onnxruntimes_own(capfd) -> None:
    """onnxruntime's errors reach the caller as exceptions (the runtime reports them in one E
    line of its own); at severity 3 its own "[E:onnxruntime:...]" line went to stderr too."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    for policy in (policies.PROGRAM, policies.HELPER, policies.REFERENCE):
        session = factory.create(model, policy)
        feeds = {"x": np.ones(6, np.float32), "shape": np.array([5], np.int64)}
        try:
            session.run(None, feeds)
        except Exception as exc:  # onnxruntime's own exception type
            assert "Reshape" in str(exc) or "shape" in str(exc).lower()
        else:
            raise AssertionError("a 6-element tensor reshaped to 5 ran")
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
