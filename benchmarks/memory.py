"""Memory figures of rknnrt on the onnx package's light models.

For each model: the internal memory the converter planned (greedy, lifetime-based) against the
naive sum of every intermediate tensor, and the resident-memory growth of rknn_init with and
without RKNN_FLAG_MODEL_BUFFER_ZERO_COPY against the size of the model's weights. Each RSS
figure is measured in a fresh subprocess, so one measurement cannot disturb another.

    python benchmarks/memory.py [--models squeezenet,resnet50] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import onnx

from rknnrt.model import container
from rknnrt.model.meta import ModelMeta
from rknnrt.toolkit import RKNN

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
          "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19",
          "light_zfnet512"]  # fmt: skip
QUICK_SKIP = {"light_vgg19", "light_bvlc_alexnet", "light_zfnet512"}

# Runs in a subprocess: the model goes into rknn_create_mem2 memory first (as the vendor's
# zero-copy example does), then the RSS growth of rknn_init alone is printed.
_PROBE = """
import ctypes, gc, sys
import rknnrt as rk
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
path, zero_copy, warm = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
# The first context in a process also loads the runtime itself (onnxruntime's environment,
# thread pool and kernels, ~10 MB once per process): a one-op model takes that cost first.
warm_ctx = rk.rknn_context()
warm_model = open(warm, "rb").read()
assert rk.rknn_init(warm_ctx, warm_model, len(warm_model), 0, None) == 0
rk.rknn_destroy(warm_ctx)
data = open(path, "rb").read()
mem = rk.rknn_create_mem2(0, len(data), rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
ctypes.memmove(mem.contents.virt_addr, data, len(data))
del data
gc.collect()
ctx = rk.rknn_context()
before = rss()
ext = rk.rknn_init_extend(real_model_size=mem.contents.size, model_buffer_fd=mem.contents.fd,
                          model_buffer_flags=mem.contents.flags)
flag = rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY if zero_copy else 0
assert rk.rknn_init(ctx, mem.contents.virt_addr, mem.contents.size, flag, ext) == 0
print(rss() - before)
"""


def rss_growth(path: str, zero_copy: bool, warm: str) -> int:
    env = dict(os.environ, RKNNRT_KEEP_PRIORITY="1")
    out = subprocess.run([sys.executable, "-c", _PROBE, path, "1" if zero_copy else "0", warm],
                         capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return int(out.stdout.split()[-1])


def one_op_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "one_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    rknn = RKNN()
    rknn.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert rknn.build(do_quantization=False) == 0
    return rknn.model_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated parts of model names")
    parser.add_argument("--quick", action="store_true", help="skip vgg19, alexnet, zfnet512")
    args = parser.parse_args()
    names = MODELS
    if args.models:
        wanted = args.models.split(",")
        names = [n for n in MODELS if any(w in n for w in wanted)]
    if args.quick:
        names = [n for n in names if n not in QUICK_SKIP]
    start = time.perf_counter()
    MB = 1e6
    print(f"{'model':20} {'weights MB':>10} {'naive int. MB':>13} {'planned MB':>10} "
          f"{'plan/naive':>10} {'init RSS MB':>11} {'/weights':>8} {'zero-copy MB':>12} "
          f"{'/weights':>8} {'target <10%':>11}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        warm = os.path.join(tmp, "one_op.rknnrt")
        with open(warm, "wb") as f:
            f.write(one_op_model())
        for name in names:
            rknn = RKNN()
            rknn.load_onnx(os.path.join(LIGHT, f"{name}.onnx"))
            assert rknn.build(do_quantization=False) == 0, rknn.last_error
            blob = rknn.model_bytes()
            rknn.release()
            sections = container.read(memoryview(blob))
            meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
            path = os.path.join(tmp, f"{name}.rknnrt")
            with open(path, "wb") as f:
                f.write(blob)
            del blob, sections
            weights = meta.memory.weight_size
            naive = sum(t.size for t in meta.memory.tensors)
            planned = meta.memory.internal_size
            plain, zero = rss_growth(path, False, warm), rss_growth(path, True, warm)
            verdict = "PASS" if zero < 0.10 * weights else "FAIL"
            print(f"{name:20} {weights / MB:10.1f} {naive / MB:13.1f} {planned / MB:10.1f} "
                  f"{planned / naive:10.3f} {plain / MB:11.1f} {plain / weights:8.3f} "
                  f"{zero / MB:12.1f} {zero / weights:8.3f} {verdict:>11}")  # fmt: skip
    print("init RSS: growth of rknn_init after a one-op model was loaded in the same process")
    print(f"total time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
