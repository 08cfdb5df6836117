"""Runs INSIDE the vendor's environment (its own python, its own temp dir): build the ONNX model
with rknn-toolkit2 and print JSON with its per-tensor quantisation parameters (from
hybrid_quantization_step1's .quantization.cfg), its IO attributes and its simulator's outputs.

usage: vendor_python vendor_side.py request.json   (request written by vendor_diff)
"""

import contextlib
import glob
import json
import os
import sys

import numpy as np


def main() -> None:
    with open(sys.argv[1]) as f:
        req = json.load(f)
    os.chdir(req["workdir"])
    from rknn.api import RKNN

    log = open("vendor.log", "w")
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rknn = RKNN(verbose=False)
        rknn.config(
            target_platform=req["platform"],
            quantized_algorithm=req["algorithm"],
            quantized_method=req["method"],
        )
        assert rknn.load_onnx(req["model"]) == 0, "load_onnx"
        assert rknn.hybrid_quantization_step1(dataset=req["dataset"], proposal=False) == 0
        cfg = glob.glob("*.quantization.cfg")[0]
        base = cfg[: -len(".quantization.cfg")]
        rknn.release()
        rknn = RKNN(verbose=False)
        assert (
            rknn.hybrid_quantization_step2(
                model_input=base + ".model", data_input=base + ".data", model_quantization_cfg=cfg
            )
            == 0
        )
        assert rknn.init_runtime() == 0
        inputs = [np.load(p, allow_pickle=False) for p in req["test_inputs"]]
        outs = rknn.inference(inputs=inputs, data_format="nchw")
    from ruamel.yaml import YAML

    params = YAML(typ="safe").load(open(cfg))["quantize_parameters"]
    tensors = {}
    for name, p in params.items():
        if p.get("scale"):
            tensors[name] = {
                "dtype": p["dtype"],
                "scale": float(p["scale"][0]),
                "zp": int(p["zero_point"][0]),
            }
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
