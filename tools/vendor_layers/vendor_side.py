"""Runs INSIDE the vendor's environment (its own python): build an ONNX model into a vendor
.rknn file with rknn-toolkit2 and dump every tensor its simulator computes on one test input
(accuracy_analysis), so that rknnrt's decoders can be checked op by op on the simulator's own
inputs (tools/vendor_layers/__main__.py).

usage: vendor_python vendor_side.py MODEL.onnx PLATFORM OUT_DIR [--fp16] [--samples 4] [--seed 7]

Writes OUT_DIR/model.rknn and OUT_DIR/dumps.npz (simulator tensors by name, float32, plus
'__input__<i>' for the test input). The calibration samples are standard normal; the test
input is the first calibration sample (every intermediate then lies inside its range).
"""

import argparse
import contextlib
import os

import numpy as np
import onnx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("platform")
    ap.add_argument("out")
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    out = os.path.abspath(args.out)
    model = onnx.load(args.model)
    inits = {i.name for i in model.graph.initializer}
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input if i.name not in inits]
    rng = np.random.default_rng(args.seed)
    lines = []
    for k in range(args.samples):
        paths = []
        for i, shape in enumerate(shapes):
            paths.append(os.path.join(out, f"calib{k}_{i}.npy"))
            np.save(paths[-1], rng.standard_normal(shape).astype(np.float32))
        lines.append(" ".join(paths))
    with open(os.path.join(out, "dataset.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chdir(out)  # the toolkit writes check*.onnx into the cwd
    from rknn.api import RKNN

    log = open(os.path.join(out, "vendor.log"), "w")
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rknn = RKNN(verbose=False)
        rknn.config(target_platform=args.platform)
        assert rknn.load_onnx(os.path.abspath(args.model)) == 0, "load_onnx"
        assert rknn.build(do_quantization=not args.fp16,
                          dataset=os.path.join(out, "dataset.txt")) == 0, "build"
        assert rknn.export_rknn(os.path.join(out, "model.rknn")) == 0, "export"
        assert rknn.init_runtime() == 0
        tests = lines[0].split(" ")
        outs = rknn.inference(inputs=[np.load(p) for p in tests], data_format="nchw")
        assert rknn.accuracy_analysis(inputs=tests, output_dir="snapshot") == 0
        rknn.release()
    arrays = {f"__input__{i}": np.load(p) for i, p in enumerate(tests)}
    for i, o in enumerate(outs):
        arrays[f"__output__{i}"] = np.asarray(o, np.float32)
    with open(os.path.join("snapshot", "map_name_to_file.txt")) as f:
        for line in f.read().splitlines()[2:]:
            parts = line.split()
            if len(parts) == 2:
                path = os.path.join("snapshot", "simulator", "npy",
                                    parts[1][: -len(".txt")] + ".npy")
                if os.path.exists(path):
                    arrays[parts[0]] = np.load(path).astype(np.float32)
    np.savez_compressed(os.path.join(out, "dumps.npz"), **arrays)
    print("ok", len(arrays))


if __name__ == "__main__":
    main()
