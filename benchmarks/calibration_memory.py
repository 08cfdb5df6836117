"""Calibration memory against the number of samples (issue 27 item 6).

    PYTHONPATH=$PWD python benchmarks/calibration_memory.py          # 100 vs 1000 samples
    PYTHONPATH=$PWD python benchmarks/calibration_memory.py 100 4000

Part 1, the dataset: RKNN.build(dataset='dataset.txt') over a dataset file of N lines (one
3x128x128 .npy file listed N times: 192 KB per sample read), streamed (the loader reads one
sample at a time), against the previous loader's behaviour measured in the same run (every
sample read into one list first, which is then the dataset). Part 2, the statistics:

each count runs in its own process: calibrate() over a two-conv model (8 x 32 x 32 = 8,192
values per tensor) with 'mmse' and 'kl_divergence', and the peak RSS (ru_maxrss) is printed.
The cap on kept values is lowered to 2^18 per tensor so that the error searches stay quick
(the default, 2^22, bounds memory the same way, at a higher level). The baseline, measured in
the same run, is the previous behaviour (no cap: every sample's subset kept). The samples are
one small array reused (the dataset loader is not what is measured), so the ratios are the
statistics' alone.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _child(count: int, algorithm: str, cap: int) -> None:
    import importlib

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    calibration = importlib.import_module("rknnrt.toolkit.quantize.calibrate")
    calibration._Histogram.CAP = cap
    rng = np.random.RandomState(0)
    w1 = numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.randn(8, 8, 3, 3).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], [w1, w2],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    tensors = ["x", "c1", "r1", "y"]
    x = rng.rand(1, 3, 32, 32).astype(np.float32)
    samples = _Repeat([x], count)  # the same values: only the statistics' memory is measured
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    calibration.calibrate(model, samples, tensors, algorithm, progress=lambda d, t: None)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"grown_kb": after - before, "peak_kb": after}))


class _Repeat:
    """`count` times the same sample, without `count` copies in memory."""

    def __init__(self, sample: list, count: int) -> None:
        self.sample, self.count = sample, count

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return (self.sample for _ in range(self.count))


def _dataset_child(count: int, algorithm: str, mode: str, folder: str) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from rknnrt.toolkit import RKNN
    from rknnrt.toolkit import dataset as datasets

    rng = np.random.RandomState(0)
    w = numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 128, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 128, 128])], [w],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(folder, f"dataset-{count}.txt")
    dataset = path if mode == "streamed" else datasets.load(
        path, [datasets.InputSpec("x", (1, 3, 128, 128))])  # the previous loader: a list
    rknn = RKNN()
    rknn.config(quantized_algorithm=algorithm)
    rknn.load_onnx(model)
    if rknn.build(dataset=dataset) != 0:
        raise SystemExit(rknn.last_error)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_kb": peak}))


def _datasets(counts: list[int]) -> None:
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as folder:
        np.save(os.path.join(folder, "x.npy"),
                np.random.RandomState(1).rand(1, 3, 128, 128).astype(np.float32))  # fmt: skip
        for count in counts:
            with open(os.path.join(folder, f"dataset-{count}.txt"), "w") as f:
                f.write("x.npy\n" * count)
        for algorithm in ("normal", "kl_divergence"):
            for mode in ("streamed", "previous"):
                peaks = []
                for count in counts:
                    command = [sys.executable, __file__, "--dataset-child", str(count),
                               algorithm, mode, folder]  # fmt: skip
                    out = subprocess.run(command, capture_output=True, text=True, check=True)
                    peaks.append(json.loads(out.stdout.strip().splitlines()[-1])["peak_kb"] / 1024)
                print(
                    f"dataset {algorithm:14s} {mode:9s} samples {counts[0]} -> {counts[1]}: "
                    f"peak RSS {peaks[0]:.0f} -> {peaks[1]:.0f} MB, ratio {peaks[1] / peaks[0]:.2f}"
                )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--dataset-child":
        _dataset_child(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
        return
    counts = [int(a) for a in sys.argv[1:3]] or [100, 1000]
    _datasets(counts)
    for algorithm in ("mmse", "kl_divergence"):
        for label, cap in (("bounded", 1 << 18), ("previous", 1 << 62)):
            peaks = []
            for count in counts:
                command = [sys.executable, __file__, "--child", str(count), algorithm, str(cap)]
                out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
                peaks.append(json.loads(out.strip().splitlines()[-1])["peak_kb"] / 1024)
            print(
                f"statistics {algorithm:14s} {label:9s} samples {counts[0]} -> {counts[1]}: "
                f"peak RSS {peaks[0]:.0f} -> {peaks[1]:.0f} MB, ratio {peaks[1] / peaks[0]:.2f}"
            )


if __name__ == "__main__":
    main()
