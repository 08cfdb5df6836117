"""Issue 27 item 1: a valid few-KB model file cannot make rknn_init or rknn_run take all
memory or time. Every bomb is refused at rknn_init (RKNN_ERR_MODEL_INVALID, one E line); the
memory budget answers RKNN_ERR_MALLOC_FAIL; the run deadline cancels with RKNN_ERR_TIMEOUT."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import pytest

import rknnrt as rk
from rknnrt.model import op_rules

from . import bombs
from .conftest import init_status, rebuild, run_once


@pytest.mark.parametrize("name", sorted(bombs.BOMBS))
def test_bombs_are_refused_at_init(three_models, name, capfd) -> None:
    blob = bombs.BOMBS[name](three_models["float16"])
    assert len(blob) < 20_000  # a small file
    assert init_status(blob) == rk.RKNN_ERR_MODEL_INVALID
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("E RKNN")]
    assert len(errors) == 1, errors


def test_bomb_messages_name_the_fault(three_models, capfd) -> None:
    init_status(bombs.loop(three_models["int8"]))
    assert "Loop" in capfd.readouterr().err
    init_status(bombs.constant_of_shape(three_models["float32"]))
    err = capfd.readouterr().err
    assert "ConstantOfShape" in err and "3221225472 bytes" in err
    init_status(bombs.range_from_values(three_models["float16"]))
    assert "cannot bound" in capfd.readouterr().err


def test_small_static_growth_stays_allowed(three_models) -> None:
    """Expand/ConstantOfShape of a size the model can hold keep working (and compute)."""
    blob = bombs.expand(three_models["float32"], copies=2)
    assert init_status(blob) == rk.RKNN_SUCC
    x = np.random.RandomState(0).randint(0, 256, (1, 64, 64, 3)).astype(np.float32)
    plain = run_once(three_models["float32"], x)
    grown = run_once(blob, x)
    assert grown.shape == plain.shape and np.all(grown > plain)  # plus 2*sum(x) >= 0


def test_memory_budget_gives_malloc_fail(three_models, monkeypatch, capfd) -> None:
    blob = bombs.many_tensors(three_models["float32"], count=64, elements=1 << 20)  # 256 MB
    monkeypatch.setenv("RKNNRT_MEMORY_BUDGET_MB", "128")
    assert init_status(blob) == rk.RKNN_ERR_MALLOC_FAIL
    assert "RKNNRT_MEMORY_BUDGET_MB" in capfd.readouterr().err
    monkeypatch.setenv("RKNNRT_MEMORY_BUDGET_MB", "1024")
    assert init_status(blob) == rk.RKNN_SUCC


def test_lying_value_info_does_not_hide_a_bomb(three_models) -> None:
    """The file's own value_info claims the big tensor is one float: inference ignores it."""

    def lie(model: onnx.ModelProto) -> None:
        model.graph.value_info.append(
            onnx.helper.make_tensor_value_info("bomb", onnx.TensorProto.FLOAT, [1])
        )

    blob = rebuild(bombs.constant_of_shape(three_models["float16"]), graph=lie)
    assert init_status(blob) == rk.RKNN_ERR_MODEL_INVALID


def test_every_fixture_model_passes_the_resource_rules(three_models) -> None:
    for blob in three_models.values():
        assert init_status(blob) == rk.RKNN_SUCC


def test_run_deadline_gives_timeout(three_models, monkeypatch, capfd) -> None:
    """A run longer than RKNNRT_RUN_TIMEOUT_MS is cancelled: RKNN_ERR_TIMEOUT, and the context
    still runs afterwards."""
    blob = bombs.many_tensors(three_models["float32"], count=300, elements=1 << 20, from_input=True)
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == rk.RKNN_SUCC
    try:
        x = np.zeros((1, 64, 64, 3), np.float32)
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size, inputs[0].fmt = x.ctypes.data, x.nbytes, rk.RKNN_TENSOR_NHWC
        inputs[0].type = rk.RKNN_TENSOR_FLOAT32
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0
        monkeypatch.setenv("RKNNRT_RUN_TIMEOUT_MS", "1")
        assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_TIMEOUT
        assert "RKNNRT_RUN_TIMEOUT_MS" in capfd.readouterr().err
        monkeypatch.delenv("RKNNRT_RUN_TIMEOUT_MS")
        assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
    finally:
        assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC


def test_allow_list_covers_the_converter_and_the_vendor_reader() -> None:
    """The allow-list holds every operator the converter accepts and every one the code emits
    (make_node / GraphBuilder.add literals in toolkit/ and model/vendor_rknn/)."""
    import re
    from pathlib import Path

    from rknnrt.toolkit.op_support import SUPPORTED_OPS

    assert SUPPORTED_OPS <= op_rules.ALLOWED_OPS
    root = Path(op_rules.__file__).resolve().parents[1]
    emitted = set()
    for folder in ("toolkit", "model/vendor_rknn"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            emitted.update(re.findall(r'make_node\(\s*"([A-Za-z]+)"', text))
            emitted.update(re.findall(r'\bb\.add\(\s*"([A-Za-z]+)"', text))
            emitted.update(re.findall(r'\bself\.add\(\s*"([A-Za-z]+)"', text))
    assert len(emitted) > 15
    assert emitted <= op_rules.ALLOWED_OPS, emitted - op_rules.ALLOWED_OPS
    assert not {"Loop", "If", "Scan"} & op_rules.ALLOWED_OPS


def _edit_node(op_type: str, edit, per_axis: bool = False):
    def graph(model: onnx.ModelProto) -> None:
        sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
        node = next(n for n in model.graph.node if n.op_type == op_type
                    and (not per_axis or sizes.get(n.input[1], 1) > 1))  # fmt: skip
        edit(node, model)

    return graph


def _set_attr(name: str, value: int):
    def edit(node: onnx.NodeProto, model: onnx.ModelProto) -> None:
        for a in node.attribute:
            if a.name == name:
                a.i = value
                return
        node.attribute.append(onnx.helper.make_attribute(name, value))

    return edit


def _bad_reshape(node: onnx.NodeProto, model: onnx.ModelProto) -> None:
    """The Flatten becomes a Reshape to one value too many (a rebuilt vendor graph's fault)."""
    from onnx import numpy_helper

    node.op_type = "Reshape"
    del node.attribute[:]
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, 12345], np.int64), "bad"))
    node.input.append("bad")


def test_files_that_would_fail_every_run_fail_at_init(three_models, capfd) -> None:
    """Issue 27 item 11: attribute and shape faults that onnxruntime loads and then refuses on
    every rknn_run are refused by rknn_init."""
    cases = {
        "cast-to-0": ("float16", _edit_node("Cast", _set_attr("to", 0)), "'to' 0"),
        "dq-axis": ("int8", _edit_node("DequantizeLinear", _set_attr("axis", -(2**62)), True),
                    "axis"),
        "reshape": ("float32", _edit_node("Flatten", _bad_reshape), "inconsistent"),
    }  # fmt: skip
    for name, (model, edit, words) in cases.items():
        blob = rebuild(three_models[model], graph=edit)
        assert init_status(blob) == rk.RKNN_ERR_MODEL_INVALID, name
        assert words in capfd.readouterr().err, name
