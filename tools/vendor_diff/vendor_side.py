"""Runs INSIDE the vendor's environment (its own python, its own temp dir): build the ONNX model
with rknn-toolkit2 and print JSON with its per-tensor quantisation parameters (from
hybrid_quantization_step1's .quantization.cfg), its IO attributes, its simulator's outputs (a
plain build) and,
from accuracy_analysis's dumps of every tensor on the test input, which tensors the simulator
actually rounds to their int8 grid ("rounded": the config also lists tensors a fused op keeps
unrounded) with their int8 values (zlib + base64) when the request asks for them. A request
with "analysis": false skips the config and the dumps (only the outputs: real_arch.py).

usage: vendor_python vendor_side.py request.json   (request written by vendor_diff)
"""

import base64
import contextlib
import glob
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (run as a script, no package)
from snapshot import dump_files, on_grid  # noqa: E402


def main() -> None:
    with open(sys.argv[1]) as f:
        req = json.load(f)
    os.chdir(req["workdir"])
    from rknn.api import RKNN

    log = open("vendor.log", "w")
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        analysis = req.get("analysis", True)
        if analysis:
            rknn = RKNN(verbose=False)
            rknn.config(
                target_platform=req["platform"],
                quantized_algorithm=req["algorithm"],
                quantized_method=req["method"],
            )
            assert rknn.load_onnx(req["model"]) == 0, "load_onnx"
            assert rknn.hybrid_quantization_step1(dataset=req["dataset"], proposal=False) == 0
            cfg = glob.glob("*.quantization.cfg")[0]
            rknn.release()
        # values and outputs from a plain build (the users' path): hybrid step 2 re-reads the
        # parameters from the config's text, which moves some roundings
        rknn = RKNN(verbose=False)
        rknn.config(
            target_platform=req["platform"],
            quantized_algorithm=req["algorithm"],
            quantized_method=req["method"],
        )
        assert rknn.load_onnx(req["model"]) == 0, "load_onnx"
        assert rknn.build(do_quantization=True, dataset=req["dataset"]) == 0, "build"
        assert rknn.init_runtime() == 0
        inputs = [np.load(p, allow_pickle=False) for p in req["test_inputs"]]
        outs = rknn.inference(inputs=inputs, data_format="nchw")
        if analysis:
            assert rknn.accuracy_analysis(inputs=req["test_inputs"], output_dir="snapshot") == 0
    if not analysis:
        print(json.dumps({"tensors": {}, "output_shapes": [list(np.shape(o)) for o in outs],
                          "outputs": [np.asarray(o, np.float32).ravel().tolist() for o in outs]}))
        return
    from ruamel.yaml import YAML

    params = YAML(typ="safe").load(open(cfg))["quantize_parameters"]
    files = dump_files("snapshot")
    tensors = {}
    for name, p in params.items():
        if p.get("scale"):
            tensors[name] = {
                "dtype": p["dtype"],
                "scale": float(p["scale"][0]),
                "zp": int(p["zero_point"][0]),
            }
            if name in files and os.path.exists(files[name]):
                rounded, q = on_grid(files[name], tensors[name]["scale"], tensors[name]["zp"])
                tensors[name]["rounded"] = rounded
                if rounded and req.get("values"):
                    tensors[name]["q"] = base64.b64encode(zlib.compress(q.tobytes(), 9)).decode()
                    tensors[name]["shape"] = list(q.shape)
        else:
            tensors[name] = {"dtype": p["dtype"]}
    print(
        json.dumps(
            {
                "tensors": tensors,
                "outputs": [np.asarray(o, np.float32).ravel().tolist() for o in outs],
                "output_shapes": [list(np.shape(o)) for o in outs],
            }
        )
    )


if __name__ == "__main__":
    main()
