"""Run the vendor's own example scripts against rknnrt, unedited, through `rknnrt compat`.

    python -m tests.toolkit2.replay_upstream [REPO_GIT_DIR] [--zoo ZOO_GIT_DIR] [--only NAME]

REPO_GIT_DIR is a clone (or bare mirror) of airockchip/rknn-toolkit2, ZOO_GIT_DIR one of
airockchip/rknn_model_zoo. Each example folder is exported into a temporary directory and run
as it is: the compatibility layer is installed into a temporary site directory (`rknn.api`,
`rknn.utils`, `rknnlite.api` forwarding to rknnrt) that comes first on PYTHONPATH, so
`from rknn.api import RKNN` finds rknnrt. Model files the repositories do not carry
(downloaded or large files) are replaced by models built here with the same names and
interfaces (replay_standins.py; a caffemodel with the blobs the prototxt asks for, Darknet
weights of the cfg's real layout, TensorFlow graphs); replay_env/ holds the environment's
stand-ins (torchvision, headless OpenCV GUI calls, a Pillow cv2 where OpenCV is missing).
The outcome of every script (exit status and its last lines) is printed. Not a test: it needs
the upstream repositories, which CI does not have, and takes minutes (each zoo flow converts
a model: the PPOCR and yolov8_seg flows about a minute each on 2 cores).

The demos' own dependencies go into the interpreter running this, never into rknnrt's:
`pip install opencv-python-headless shapely pyclipper six pycocotools torch` (PPOCR, yolov8,
yolov8_seg demos), the `tensorflow` extra for the TF examples.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from rknnrt.compat import layer
from tests.toolkit2.replay_standins import (
    classifier,
    ppocr_det,
    ppocr_rec,
    yolov5_heads,
    yolov8_heads,
    yolov8_pose_heads,
    yolov8_seg_heads,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_env")


def _caffemodel(work: str, prototxt: str) -> bytes:
    from tests.toolkit2.caffe_files import caffemodel, weights_for

    with open(os.path.join(work, prototxt)) as f:
        return caffemodel(weights_for(f.read()))


def _darknet_weights(work: str, cfg: str) -> bytes:
    from tests.toolkit2.darknet_files import weights_for

    with open(os.path.join(work, cfg)) as f:
        return weights_for(f.read())


def _tf(name: str) -> bytes:
    """A TensorFlow stand-in (tf_models.py); needs the tensorflow extra in this interpreter."""
    from tests.toolkit2 import tf_models

    return getattr(tf_models, name)()


MV2 = "../../caffe/mobilenet_v2/"
CAFFE_MV2 = {f"{MV2}mobilenet_v2.caffemodel":
             lambda work: _caffemodel(work, f"{MV2}mobilenet_v2_deploy.prototxt")}  # fmt: skip


# example folder -> (script, {file to write: builder}); other files come from the repository.
# A builder returns an onnx model or the file's bytes; it is called with the example's folder.
EXAMPLES = {
    "rknn-toolkit2/examples/onnx/resnet50v2": ("test.py", {"resnet50v2.onnx": classifier}),
    "rknn-toolkit2/examples/functions/accuracy_analysis":
        ("test.py", {"resnet50v2.onnx": classifier}),
    "rknn-toolkit2/examples/onnx/yolov5": ("test.py", {"yolov5s_relu.onnx": yolov5_heads}),
    "rknn-toolkit2/examples/pytorch/resnet18": ("test.py", {}),
    "rknn-toolkit2/examples/functions/custom_op/convert_custom_onnx_to_rknn": ("test.py", {}),
    "rknn-toolkit2/examples/functions/onnx_edit": ("test.py", {}),
    "rknn-toolkit2/examples/functions/hybrid_quant": (("step1.py", "step2.py"), {
        "ssd_mobilenet_v2.pb": lambda: _tf("ssd_mobilenet_v2_pb")}),
    "rknn-toolkit2/examples/functions/multi_input": ("test.py", {}),
    "rknn-toolkit2/examples/functions/dynamic_shape": ("test.py", CAFFE_MV2),
    "rknn-toolkit2/examples/functions/multi_batch": ("test.py", CAFFE_MV2),
    "rknn-toolkit2/examples/functions/codegen": ("test.py", CAFFE_MV2),
    "rknn-toolkit2/examples/functions/quantize_algorithm_mmse": ("test.py", {
        "mobilenet_v1_1.0_224_frozen.pb": lambda: _tf("mobilenet_v1_pb")}),
    "rknn-toolkit2/examples/tflite/mobilenet_v1": ("test.py", {
        "mobilenet_v1_1.0_224.tflite": lambda: _tf("mobilenet_v1_tflite")}),
    "rknn-toolkit2/examples/caffe/mobilenet_v2": ("test.py", {
        "mobilenet_v2.caffemodel": lambda work: _caffemodel(work, "mobilenet_v2_deploy.prototxt")}),
    "rknn-toolkit2/examples/darknet/yolov3_416x416": ("test.py", {
        "yolov3.weights": lambda work: _darknet_weights(work, "yolov3.cfg")}),
    "rknn-toolkit-lite2/examples/resnet18": ("test.py", {"resnet18_for_rk3588.rknn": "lite"}),
}  # fmt: skip


def _export(git_dir: str, tops: list[str], dest: str) -> None:
    """The trees `tops` into `dest`; blobs the mirror lacks (large files) are left out."""
    git = ["git", f"--git-dir={git_dir}"]
    listing = subprocess.run([*git, "ls-tree", "-r", "HEAD", *tops], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
    entries = [line.split(None, 3) for line in listing.splitlines()]
    batch = subprocess.Popen([*git, "cat-file", "--batch"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)  # fmt: skip
    for _mode, _kind, sha, path in entries:
        batch.stdin.write(f"{sha}\n".encode())
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    batch.stdin.close()
    batch.wait()


def _lite_model(path: str) -> None:
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[1, 1, 1], target_platform="rk3588")
    rknn.load_onnx(classifier())
    rng = np.random.RandomState(0)
    rknn.build(dataset=[rng.rand(1, 3, 224, 224).astype(np.float32) * 255 for _ in range(2)])
    rknn.export_rknn(path)


def _takes_folder(build) -> bool:
    """Builders that read the example's own files take its folder as `work`."""
    import inspect

    return "work" in inspect.signature(build).parameters


def _write_substitutes(work: str, substitutes: dict) -> None:
    for name, build in substitutes.items():
        target = os.path.join(work, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.exists(target) and os.path.getsize(target) > 1024:
            continue  # the repository's own file is there: use it
        if build == "lite":
            _lite_model(target)
            continue
        made = build(work) if _takes_folder(build) else build()
        if isinstance(made, onnx.ModelProto):
            onnx.save(made, target)
        else:
            with open(target, "wb") as f:
                f.write(made)


def _pythonpath(site: str, tmp: str) -> str:
    """The compat layer first, then rknnrt, the environment's stand-ins and the export."""
    # OpenCV where it is installed (with its GUI calls made harmless), else the Pillow cv2
    cv2_dir = "headless" if importlib.util.find_spec("cv2") else "no_cv2"
    paths = [site, ROOT, os.path.join(ENV, "always"), os.path.join(ENV, cv2_dir), tmp]
    return os.pathsep.join(paths)


Step = tuple[str, list[str]]  # (folder relative to the example's, argv after `python`)


def replay(git_dir: str, folder: str, substitutes: dict, steps: list[Step], timeout: int,
           tops: list[str] | None = None, tail: int = 4) -> list[tuple]:  # fmt: skip
    """Run `steps` in turn in the exported `folder` (stopping at the first failure); for each
    step run, (its argv, exit status or 'timeout', its last output lines)."""
    with tempfile.TemporaryDirectory(prefix="replay_") as tmp:
        # the examples tree holding `folder` (siblings too, for '../../caffe/...' paths);
        # the model zoo's demos find their helpers by a folder named rknn_model_zoo
        base = os.path.join(tmp, "rknn_model_zoo") if tops else tmp
        _export(git_dir, tops or [folder.split("/examples/")[0] + "/examples"], base)
        work = os.path.join(base, folder)
        try:
            _write_substitutes(work, substitutes)
        except ImportError as e:  # e.g. the TF stand-ins where tensorflow is not installed
            return [(["(stand-ins)"], "not run", [f"building a stand-in needs {e.name}"])]
        site = os.path.join(tmp, "_site")
        os.makedirs(site)
        layer.install(site)  # the scripts stay as they are: rknn.api is rknnrt's
        env = dict(os.environ, PYTHONPATH=_pythonpath(site, tmp), MPLBACKEND="Agg")
        outcomes = []
        for cwd, argv in steps:
            try:
                done = subprocess.run([sys.executable, *argv], cwd=os.path.join(work, cwd),
                                      env=env, timeout=timeout, capture_output=True,
                                      text=True)  # fmt: skip
            except subprocess.TimeoutExpired:
                outcomes.append((argv, "timeout", []))
                break
            lines = [line for line in (done.stdout + done.stderr).splitlines()
                     if line.strip() and "calibrating" not in line]  # fmt: skip
            outcomes.append((argv, done.returncode, lines[-tail:]))
            if done.returncode != 0:
                break
        return outcomes


def _zoo_detector(name: str, onnx_file: str, build, demo: list[str] | None = None,
                  reference: bool = True) -> tuple:  # fmt: skip
    """A zoo detection example (yolov5 / yolov8 family): the COCO subset for calibration,
    convert.py to int8 for rk3588, the Python demo on the converted model and, where the demo
    takes ONNX too (`reference`), on the stand-in itself through onnxruntime for comparison."""
    rknn, source = f"../model/{name}.rknn", f"../model/{onnx_file}"
    demo = ["--img_save"] if demo is None else demo
    steps = [("python", ["convert.py", source, "rk3588", "i8", rknn]),
             ("python", [f"{name}.py", "--model_path", rknn, "--target", "rk3588", *demo])]
    if reference:
        steps.append(("python", [f"{name}.py", "--model_path", source, *demo]))
    return ([f"examples/{name}", "py_utils", "datasets/COCO"], {f"model/{onnx_file}": build},
            steps)  # fmt: skip


# rknn_model_zoo: example folder -> (trees to export, {file: builder}, steps)
ZOO = {
    "examples/yolov5": _zoo_detector("yolov5", "yolov5s.onnx", yolov5_heads),
    "examples/yolov8": _zoo_detector("yolov8", "yolov8n.onnx", yolov8_heads),
    "examples/yolo11": _zoo_detector("yolo11", "yolo11n.onnx", yolov8_heads),
    "examples/yolov8_pose": _zoo_detector("yolov8_pose", "yolov8_pose.onnx", yolov8_pose_heads,
                                          demo=[], reference=False),  # its demo: .rknn only
    "examples/yolov8_seg": _zoo_detector("yolov8_seg", "yolov8n-seg.onnx", yolov8_seg_heads),
    "examples/resnet": (
        ["examples/resnet", "datasets/imagenet"],
        {"model/resnet50-v2-7.onnx": classifier},
        [("python", ["resnet.py", "../model/resnet50-v2-7.onnx", "rk3588", "i8"])],
    ),
    "examples/mobilenet": (
        ["examples/mobilenet", "datasets/imagenet"],
        {"model/mobilenetv2-12.onnx": lambda: classifier(input_name="input")},
        [("python", ["mobilenet.py", "--target", "rk3588"])],
    ),
    # detection (int8) and recognition (float: its convert.py takes only 'fp'), each demo on
    # its own model, then the whole system on both, as the READMEs run them; each demo also
    # on the ONNX stand-ins (onnxruntime), the reference its rknnrt output is compared with
    "examples/PPOCR": (
        ["examples/PPOCR", "py_utils", "datasets/PPOCR"],
        {"PPOCR-Det/model/ppocrv4_det.onnx": ppocr_det,
         "PPOCR-Rec/model/ppocrv4_rec.onnx": ppocr_rec},
        [("PPOCR-Det/python", ["convert.py", "../model/ppocrv4_det.onnx", "rk3588", "i8",
                               "../model/ppocrv4_det.rknn"]),
         ("PPOCR-Det/python", ["ppocr_det.py", "--model_path", "../model/ppocrv4_det.rknn",
                               "--target", "rk3588"]),
         ("PPOCR-Det/python", ["ppocr_det.py", "--model_path", "../model/ppocrv4_det.onnx"]),
         ("PPOCR-Rec/python", ["convert.py", "../model/ppocrv4_rec.onnx", "rk3588", "fp",
                               "../model/ppocrv4_rec.rknn"]),
         ("PPOCR-Rec/python", ["ppocr_rec.py", "--model_path", "../model/ppocrv4_rec.rknn",
                               "--target", "rk3588"]),
         ("PPOCR-Rec/python", ["ppocr_rec.py", "--model_path", "../model/ppocrv4_rec.onnx"]),
         ("PPOCR-System/python", ["ppocr_system.py",
                                  "--det_model_path", "../../PPOCR-Det/model/ppocrv4_det.rknn",
                                  "--rec_model_path", "../../PPOCR-Rec/model/ppocrv4_rec.rknn",
                                  "--target", "rk3588"]),
         ("PPOCR-System/python", ["ppocr_system.py",
                                  "--det_model_path", "../../PPOCR-Det/model/ppocrv4_det.onnx",
                                  "--rec_model_path", "../../PPOCR-Rec/model/ppocrv4_rec.onnx"])],
    ),
}  # fmt: skip


def _report(label: str, outcomes: list[tuple]) -> None:
    for argv, rc, tail in outcomes:
        print(f"{label} {' '.join(argv)}: exit {rc}", *(f"      {t}" for t in tail),
              sep="\n", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", nargs="?",
                        default="/work/.mirror/airockchip+rknn-toolkit2/repo")  # fmt: skip
    parser.add_argument("--zoo", default="/work/.mirror/airockchip+rknn_model_zoo/repo",
                        help="a clone of airockchip/rknn_model_zoo ('' to skip)")
    parser.add_argument("--only", help="run the examples whose folder contains one of these "
                        "comma-separated names")  # fmt: skip
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--tail", type=int, default=4, help="output lines shown per script")
    args = parser.parse_args()
    wanted = args.only.split(",") if args.only else None
    for folder, (script, subs) in EXAMPLES.items():
        if wanted and not any(name in folder for name in wanted):
            continue
        steps = [(".", [s]) for s in (script if isinstance(script, tuple) else (script,))]
        _report(folder, replay(args.git_dir, folder, subs, steps, args.timeout, tail=args.tail))
    for folder, (tops, subs, steps) in ZOO.items() if args.zoo else ():
        if wanted and not any(name in folder for name in wanted):
            continue
        outcomes = replay(args.zoo, folder, subs, steps, args.timeout, tops, args.tail)
        _report(f"model zoo {folder}", outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
