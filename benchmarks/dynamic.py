"""Cost of switching input shapes on a dynamic-shape model.

For each shape set of a small CNN with three sets: the median time of rknn_set_input_shapes
(to this set, from another one) plus one inference through the general API, against one
inference at a fixed shape (the same set, no switch). Target: <= 1.2 after the first use of
each set (plans and bindings are made once per set and reused).

    python benchmarks/dynamic.py [--repeat N]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.toolkit import RKNN

SETS = [[[1, 3, 224, 224]], [[1, 3, 320, 256]], [[1, 3, 160, 160]]]


def model() -> bytes:
    rng = np.random.RandomState(0)
    nodes, inits, x = [], [], "x"
    for k, (cin, cout) in enumerate([(3, 16), (16, 32), (32, 32)]):
        inits += [numpy_helper.from_array(rng.randn(cout, cin, 3, 3).astype(np.float32), f"w{k}"),
                  numpy_helper.from_array(rng.randn(cout).astype(np.float32), f"b{k}")]  # fmt: skip
        nodes += [helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"], kernel_shape=[3, 3],
                                   pads=[1] * 4, strides=[2, 2]),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"])]  # fmt: skip
        x = f"r{k}"
    graph = helper.make_graph(
        nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    rknn = RKNN()
    rknn.config(dynamic_input=SETS)
    rknn.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    return rknn.model_bytes()


def shape_attr(shape: list[int]) -> ctypes.Array:
    attrs = (rk.rknn_tensor_attr * 1)()
    n, c, h, w = shape
    attrs[0].n_dims, attrs[0].fmt = 4, rk.RKNN_TENSOR_NHWC
    for d, v in enumerate((n, h, w, c)):
        attrs[0].dims[d] = v
    return attrs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=60)
    args = parser.parse_args()
    blob = model()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == 0
    images = [np.random.RandomState(1).rand(s[0][0], s[0][2], s[0][3], s[0][1])
              .astype(np.float32) for s in SETS]  # fmt: skip
    attrs = [shape_attr(s[0]) for s in SETS]
    outs = (rk.rknn_output * 1)()

    def infer(k: int) -> None:
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size = images[k].ctypes.data, images[k].nbytes
        inputs[0].fmt = rk.RKNN_TENSOR_NHWC
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
        outs[0].want_float = 1
        assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0
        rk.rknn_outputs_release(ctx, 1, outs)

    first = []
    for k in range(len(SETS)):  # first use of each set: plans and bindings are made
        start = time.perf_counter()
        assert rk.rknn_set_input_shapes(ctx, 1, attrs[k]) == 0
        infer(k)
        first.append(time.perf_counter() - start)
    switch = [[] for _ in SETS]
    fixed = [[] for _ in SETS]
    for _ in range(args.repeat):
        for k in range(len(SETS)):
            start = time.perf_counter()  # switch from the previous set to set k, then infer
            assert rk.rknn_set_input_shapes(ctx, 1, attrs[k]) == 0
            infer(k)
            switch[k].append(time.perf_counter() - start)
            start = time.perf_counter()  # again at the same shape: no switch
            infer(k)
            fixed[k].append(time.perf_counter() - start)
    print(f"{'shape (NCHW)':18} {'first use ms':>12} {'switch+run ms':>13} {'fixed run ms':>12} "
          f"{'ratio':>6} target<=1.2")  # fmt: skip
    ok = True
    for k, shapes in enumerate(SETS):
        s, f = np.median(switch[k]) * 1e3, np.median(fixed[k]) * 1e3
        ok &= s / f <= 1.2
        print(f"{str(shapes[0]):18} {first[k] * 1e3:12.3f} {s:13.3f} {f:12.3f} {s / f:6.3f} "
              f"{'PASS' if s / f <= 1.2 else 'FAIL'}")  # fmt: skip
    rk.rknn_destroy(ctx)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
