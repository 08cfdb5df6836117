"""rknnrt.client: the one driver of the C-shaped API that RKNNLite, the CLI, the evaluation and
the board estimate share; a failed call becomes one E line and each user's own convention."""

from __future__ import annotations

import ctypes
import os
import re

import numpy as np
import pytest

import rknnrt as rk
from rknnrt import board_eval, cli
from rknnrt import client as client_module
from rknnrt.client import Client, ClientError
from rknnrt.core import switches
from rknnrt.evaluation.runner import EvaluationError, ModelRunner
from rknnrt.lite import RKNNLite
from rknnrt.sessions import factory
from rknnrt.toolkit.samples import default_input

BROKEN = b"RKNN" + bytes(60)  # not a model


def _status_of_broken_model() -> int:
    ctx = rk.rknn_context(0)
    return rk.rknn_init(ctypes.byref(ctx), BROKEN, len(BROKEN), 0, None)


def _lines(log) -> list[str]:
    """The E lines without their timestamps."""
    return [re.sub(r"\[[0-9:.]+\] ", "", line) for line in log.take("E")]


def test_a_failed_init_is_one_e_line_and_each_users_convention(rknn_log) -> None:
    status = _status_of_broken_model()
    assert status < 0
    direct = _lines(rknn_log)
    assert len(direct) == 1

    with pytest.raises(ClientError) as caught:
        Client(BROKEN)
    assert (caught.value.call, caught.value.status) == ("rknn_init", status)
    assert str(caught.value) == f"rknn_init failed: {status}"
    assert _lines(rknn_log) == direct

    lite = RKNNLite()
    assert lite.load_rknn(BROKEN) == 0
    assert lite.init_runtime() == -1
    assert _lines(rknn_log) == direct

    with pytest.raises(EvaluationError, match=f"^rknn_init failed with status {status}$"):
        ModelRunner(BROKEN)
    assert _lines(rknn_log) == direct

    with pytest.raises(RuntimeError, match=f"^rknn_init failed: {status}$"):
        board_eval.eval_memory(BROKEN)
    assert _lines(rknn_log) == direct

    with pytest.raises(ClientError, match=f"^rknn_init failed: {status}$"):
        cli.Session(BROKEN)
    assert _lines(rknn_log) == direct


def test_a_failed_inputs_set_is_named_with_the_runtimes_status(default_model_bytes, rknn_log):
    client = Client(default_model_bytes)
    short = np.zeros(7, np.uint8)  # the input takes 1x32x32x3 bytes
    with pytest.raises(ClientError) as caught:
        client.set_inputs([short], [rk.RKNN_TENSOR_UINT8], [rk.RKNN_TENSOR_NHWC])
    assert caught.value.call == "rknn_inputs_set"
    assert caught.value.status == rk.RKNN_ERR_PARAM_INVALID
    assert len(rknn_log.take("E")) == 1
    client.close()
    client.close()  # a second close does nothing
    assert not client.alive


def test_the_four_users_get_the_same_outputs(default_model_bytes) -> None:
    image = default_input(seed=2)
    client = Client(default_model_bytes)
    client.set_inputs([image], [rk.RKNN_TENSOR_UINT8], [rk.RKNN_TENSOR_NHWC])
    client.run()
    (expected,) = client.get_outputs()
    assert expected.shape == (1, 10) and expected.dtype == np.float32
    client.close()

    lite = RKNNLite()
    assert lite.load_rknn(default_model_bytes) == 0 and lite.init_runtime() == 0
    np.testing.assert_array_equal(lite.inference([image])[0], expected)
    lite.release()

    runner = ModelRunner(default_model_bytes)
    np.testing.assert_array_equal(runner.run([image])[0], expected)
    runner.close()

    session = cli.Session(default_model_bytes)
    twin = session.dup()
    assert isinstance(twin, cli.Session)
    for s in (session, twin):
        s.feed([image])
        np.testing.assert_array_equal(s.infer()[0], expected)
        s.close()


def test_a_static_models_outputs_need_no_query_per_run(default_model_bytes, monkeypatch) -> None:
    """get_outputs of a model without dynamic shapes asks for no attribute after init (a query
    costs ~30 us once a run has pushed the interpreter's lines out of cache); the shapes are
    the output attributes' (a dynamic model's follow its inputs: tests/vendor's dynamic file)."""
    client = Client(default_model_bytes)
    asked: list[int] = []
    query = client_module.rk.rknn_query  # the C-shaped API the client drives

    def counting(ctx, cmd, *args):
        asked.append(cmd)
        return query(ctx, cmd, *args)

    monkeypatch.setattr(client_module.rk, "rknn_query", counting)
    client.set_inputs([default_input(seed=2)], [rk.RKNN_TENSOR_UINT8], [rk.RKNN_TENSOR_NHWC])
    client.run()
    (out,) = client.get_outputs()
    assert asked == [] and out.shape == (1, 10) == tuple(client.outputs[0].dims[:2])
    client.close()


def test_threads_is_an_argument_for_rknn_init_only(default_model_bytes, monkeypatch) -> None:
    monkeypatch.delenv("RKNNRT_NUM_THREADS", raising=False)
    asked: list[int | None] = []
    create = factory.create

    def recording(*args, **kwargs):
        asked.append(kwargs.get("threads"))
        return create(*args, **kwargs)

    monkeypatch.setattr(factory, "create", recording)
    Client(default_model_bytes, threads=3).close()
    assert asked and set(asked) == {3}
    assert switches.num_threads() is None  # the override ended with rknn_init
    asked.clear()
    ModelRunner(default_model_bytes, threads=2).close()
    assert asked and set(asked) == {2}


def test_eval_perf_host_times_is_an_argument(default_model_bytes, monkeypatch) -> None:
    monkeypatch.delenv("RKNNRT_PERF_HOST", raising=False)
    seen: list[bool] = []
    run = Client.run

    def recording(self: Client) -> None:
        seen.append(switches.perf_host())
        run(self)

    monkeypatch.setattr(Client, "run", recording)
    board = board_eval.eval_perf(default_model_bytes)
    host = board_eval.eval_perf(default_model_bytes, host_times=True)
    assert seen == [False, True]
    assert switches.perf_host() is False
    assert board.run_us > 0 and host.run_us > 0
    assert "RKNNRT_PERF_HOST" not in os.environ
