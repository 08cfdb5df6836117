"""The vendor's own int8 on the real-architecture set (tools/real_arch), beside rknnrt's:
records tests/quant/data/real_arch_vendor.json (needs the vendor's toolkit in its own python).

    PYTHONPATH=. python3 -m tools.vendor_diff.real_arch /work/vendor_env/bin/python [--real]
        [--no-record] [NAME ...]

Per network (default: all of catalog.NETWORKS) at the test size (--real: the real input size):
both sides build int8 from the same graph and catalog.test_data's calibration (normal/channel,
rk3588) and run the same input; prints each side's cosine vs onnxruntime float32 (and, for the
detectors, of the class scores alone) and records the vendor's, or the vendor's error line
where its build fails. Recorded names are replaced, the others kept.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort

from tools.real_arch import catalog

from .__main__ import vendor_side

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "quant", "data",
                   "real_arch_vendor.json")  # fmt: skip
COMMAND = "PYTHONPATH=. python3 -m tools.vendor_diff.real_arch /work/vendor_env/bin/python"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity in float64; 0.0 where a side is all zeros."""
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norm) if norm else 0.0


def rknnrt_outputs(model, calib: list, x: np.ndarray) -> list[np.ndarray]:
    """rknnrt's int8 outputs, through the users' path (build, export, RKNNLite)."""
    from rknnrt.lite import RKNNLite
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=True, dataset=calib) == 0
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "m.rknn")
        assert rknn.export_rknn(path) == 0
        runtime = RKNNLite()
        assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
        try:
            return runtime.inference([x], data_format="nchw")
        finally:
            runtime.release()


def sides(model, calib: list, x: np.ndarray, vendor_python: str) -> dict:
    """Float32 reference, rknnrt's and the vendor's int8 outputs (or the vendor's error line)."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    run = {"float": session.run(None, {"images": x})}
    try:
        vendor = vendor_side(model, calib, [x], vendor_python, "normal", "channel",
                             values=False, analysis=False)  # fmt: skip
        run["vendor"] = [np.asarray(v, np.float32).reshape(w.shape)
                         for v, w in zip(vendor["outputs"], run["float"])]  # fmt: skip
    except (RuntimeError, AssertionError) as e:
        run["vendor_error"] = str(e).splitlines()[0].removeprefix("vendor build failed: ")
    run["rknnrt"] = rknnrt_outputs(model, calib, x)
    return run


def measure(name: str, vendor_python: str, real: bool) -> dict:
    """Per side its output's cosine, the class scores inside that output (`_joint_scores`) and,
    for a detector, the class scores of its head's own Sigmoid outputs on the inputs that
    spread them (`_class_scores`, catalog.with_score_outputs)."""
    model = catalog.build(name, test=not real)
    run = sides(model, *catalog.test_data(name, test=not real), vendor_python)
    figures: dict = {k: run[k] for k in ("vendor_error",) if k in run}
    if "vendor" in run:  # the two int8 programs against each other
        figures["agreement"] = cosine(run["rknnrt"][0], run["vendor"][0])
    for side in ("rknnrt", "vendor"):
        if side in run:
            figures[side] = cosine(run[side][0], run["float"][0])
            if name in catalog.CLASS_SCORE_INPUT_SCALE:
                figures[f"{side}_joint_scores"] = cosine(
                    catalog.class_scores(name, run[side][0]),
                    catalog.class_scores(name, run["float"][0]))  # fmt: skip
    if name in catalog.CLASS_SCORE_INPUT_SCALE:
        data = catalog.test_data(name, not real, catalog.CLASS_SCORE_INPUT_SCALE[name])
        run = sides(catalog.with_score_outputs(name, model), *data, vendor_python)
        want = catalog.head_scores(name, run["float"])
        for side in ("rknnrt", "vendor"):
            if side in run:
                figures[f"{side}_class_scores"] = cosine(catalog.head_scores(name, run[side]),
                                                         want)  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vendor_diff.real_arch")
    parser.add_argument("vendor_python")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--real", action="store_true", help="the real input size")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_intermixed_args(argv)
    names = args.names or list(catalog.NETWORKS)
    record = json.load(open(OUT)) if os.path.exists(OUT) else {}
    for old in ("int8_cosine", "yolov8n_class_scores_cosine"):  # (the first record's keys)
        record.pop(old, None)
    size = "real_size" if args.real else "test_size"
    for name in names:
        f = measure(name, args.vendor_python, args.real)
        nan = float("nan")
        print(f"{name:24s} rknnrt {f['rknnrt']:.6f}  vendor "
              + (f"{f['vendor']:.6f} (rknnrt vs vendor {f['agreement']:.6f})" if "vendor" in f
                 else f"cannot build: {f['vendor_error']}")
              + (f"  class scores: rknnrt {f['rknnrt_class_scores']:.6f} vendor "
                 f"{f.get('vendor_class_scores', nan):.6f} (in the joint output: rknnrt "
                 f"{f['rknnrt_joint_scores']:.6f} vendor {f.get('vendor_joint_scores', nan):.6f})"
                 if "rknnrt_class_scores" in f else ""), flush=True)  # fmt: skip
        if args.no_record:
            continue
        entry = record.setdefault(size, {}).setdefault(name, {})
        entry.clear()
        for key in ("vendor", "vendor_class_scores", "vendor_joint_scores", "vendor_error"):
            if key in f:
                entry[key] = f[key]
        record["what"] = (
            "int8 cosine vs onnxruntime float32 of the vendor's own int8 (rknn-toolkit2 2.5.0 "
            "simulator) on tools/real_arch's graphs, per input size (test_size: as "
            "tests/quant/test_real_arch.py; real_size: catalog's real one), with "
            "catalog.test_data's 4 uniform[0,1) calibration samples and input (seed 0), "
            "normal/channel, rk3588. Detectors: 'vendor_joint_scores', the cosine of the class "
            "scores inside the one output (0.0: the boxes beside them set its int8 step, every "
            "score quantises to 0, on both sides); 'vendor_class_scores', of the head's Sigmoid "
            "outputs added as graph outputs (catalog.with_score_outputs) on inputs times "
            "catalog.CLASS_SCORE_INPUT_SCALE, which spread the scores over (0, 1); "
            "'vendor_error': the vendor's build error line. Regenerate: " + COMMAND
            + " [--real] [NAME ...]; last recorded " + datetime.date.today().isoformat())
        with open(OUT, "w") as out:
            json.dump(record, out, indent=2, sort_keys=True)
            out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
