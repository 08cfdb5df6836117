"""The cost of rknnrt.client.Client against hand-written C-API calls, in one process.

One small float32 model (a Relu on 1x3x4x4, so that the runtime's own work is small and the
Python around it shows); per iteration, alternately (ABBA): the calls written out as RKNNLite,
the CLI and the evaluation wrote them before client.py (rknn_inputs_set, rknn_run,
rknn_outputs_get with want_float, a CURRENT_OUTPUT_ATTR query, rknn_outputs_release), and the
same through Client.set_inputs / run / get_outputs on a second context of the same model.

    PYTHONPATH=. python benchmarks/client.py [--repeat N]

Target: median ratio client/direct <= 1.05.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
from onnx import TensorProto, helper

import rknnrt as rk
from rknnrt.client import Client
from rknnrt.toolkit import RKNN


def _model() -> bytes:
    shape = [1, 3, 4, 4]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )  # fmt: skip
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    rknn.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    if rknn.build(do_quantization=False) != 0:
        raise SystemExit(rknn.last_error)
    return rknn.model_bytes()


def _direct(ctx: rk.rknn_context, x: np.ndarray) -> np.ndarray:
    c_inputs = (rk.rknn_input * 1)()
    c_inputs[0].index, c_inputs[0].buf, c_inputs[0].size = 0, x.ctypes.data, x.nbytes
    c_inputs[0].type, c_inputs[0].fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC
    if rk.rknn_inputs_set(ctx, 1, c_inputs) or rk.rknn_run(ctx, None):
        raise SystemExit("direct run failed")
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    if rk.rknn_outputs_get(ctx, 1, outs, None):
        raise SystemExit("direct outputs_get failed")
    try:
        attr = rk.rknn_tensor_attr(index=0)
        rk.rknn_query(ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, ctypes.byref(attr),
                      ctypes.sizeof(attr))  # fmt: skip
        o = outs[0]
        data = np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
        return data.reshape(list(attr.dims[: attr.n_dims])).copy()
    finally:
        rk.rknn_outputs_release(ctx, 1, outs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3000)
    args = parser.parse_args()
    blob = _model()
    ctx = rk.rknn_context(0)
    if rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None):
        raise SystemExit("rknn_init failed")
    client = Client(blob)
    x = np.random.default_rng(0).random((1, 4, 4, 3), dtype=np.float32)

    def through_client() -> np.ndarray:
        client.set_inputs([x], [rk.RKNN_TENSOR_FLOAT32], [rk.RKNN_TENSOR_NHWC])
        client.run()
        return client.get_outputs()[0]

    runs = {"direct": lambda: _direct(ctx, x), "client": through_client}
    np.testing.assert_array_equal(runs["direct"](), runs["client"]())
    times: dict[str, list[float]] = {k: [] for k in runs}
    for i in range(args.repeat):
        order = ("direct", "client") if i % 2 == 0 else ("client", "direct")
        for key in order:
            start = time.perf_counter()
            runs[key]()
            times[key].append(time.perf_counter() - start)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    print(f"direct C-API calls: {med['direct']:.1f} us, Client: {med['client']:.1f} us, "
          f"ratio client/direct {med['client'] / med['direct']:.3f}")  # fmt: skip
    client.close()
    rk.rknn_destroy(ctx)


if __name__ == "__main__":
    main()
