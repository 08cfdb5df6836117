"""Runs INSIDE the vendor's environment: the real-architecture set at its real input size, built
by the vendor's toolkit for each platform and dtype as a user builds it, exported, and run once
on its simulator (tools/vendor_diff/real_size.py writes the inputs and reads the results).

    /work/vendor_env/bin/python tools/vendor_diff/real_size_vendor.py OUT PLATFORMS DTYPES NAME ...

For each NAME, OUT/onnx/NAME.onnx with OUT/NAME/dataset.txt (its calibration samples) and
OUT/NAME/input.npy: writes OUT/NAME/NAME_PLATFORM_DTYPE.rknn and ..._sim.npz (the simulator's
outputs, arr_0, arr_1, ...) or ..._failed.txt (the traceback). Files already there are kept.
"""

import os
import sys
import traceback

import numpy as np


def build(root: str, name: str, platform: str, dtype: str) -> None:
    from rknn.api import RKNN  # the vendor toolkit: only in its own environment

    folder = os.path.join(root, name)
    stem = os.path.join(folder, f"{name}_{platform}_{dtype}")
    if os.path.exists(stem + "_sim.npz") or os.path.exists(stem + "_failed.txt"):
        return
    try:
        rknn = RKNN(verbose=False)
        rknn.config(target_platform=platform, quantized_algorithm="normal",
                    quantized_method="channel")  # fmt: skip
        assert rknn.load_onnx(os.path.join(root, "onnx", f"{name}.onnx")) == 0, "load_onnx"
        assert rknn.build(do_quantization=dtype == "i8",
                          dataset=os.path.join(folder, "dataset.txt")) == 0, "build"  # fmt: skip
        assert rknn.export_rknn(stem + ".rknn") == 0, "export_rknn"
        assert rknn.init_runtime() == 0, "init_runtime"
        x = np.load(os.path.join(folder, "input.npy"), allow_pickle=False)
        outs = rknn.inference(inputs=[x], data_format="nchw")
        np.savez(stem + "_sim.npz", *[np.asarray(o) for o in outs])
        rknn.release()
        print("built", os.path.basename(stem), flush=True)
    except Exception:  # noqa: BLE001 - record it and go on with the others
        with open(stem + "_failed.txt", "w") as f:
            f.write(traceback.format_exc())
        print("FAILED", os.path.basename(stem), flush=True)


def main() -> int:
    root, platforms, dtypes = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    for name in sys.argv[4:]:
        for platform in platforms:
            for dtype in dtypes:
                build(root, name, platform, dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
