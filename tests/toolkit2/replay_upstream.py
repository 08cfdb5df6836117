"""Run the vendor's own example scripts against rknnrt, unedited, through `rknnrt compat`.

    python -m tests.toolkit2.replay_upstream [REPO_GIT_DIR] [--zoo ZOO_GIT_DIR] [--only NAME]

REPO_GIT_DIR is a clone (or bare mirror) of airockchip/rknn-toolkit2. Each example folder is
exported into a temporary directory and run as it is: the compatibility layer is installed
into a temporary site directory (`rknn.api`, `rknn.utils`, `rknnlite.api` forwarding to
rknnrt) that comes first on PYTHONPATH, so `from rknn.api import RKNN` finds rknnrt. Model
files the repository does not carry (downloaded or large files) are replaced by models built
here with the same names and interfaces (small ONNX stand-ins, a caffemodel with the blobs the
prototxt asks for, Darknet weights of the cfg's real layout); `cv2` and `torchvision` (not
installed) are provided by small shims over Pillow and torch. The outcome of every script (exit
status and its last lines) is printed. Not a test: it needs the upstream repository, which CI
does not have.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from rknnrt.compat import layer
from tests.toolkit2.models import Graph, ocr_det_like

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CV2_SHIM = '''"""A cv2 stand-in over Pillow: the calls the vendor's examples make."""
import numpy as np
from PIL import Image, ImageDraw
COLOR_BGR2RGB = COLOR_RGB2BGR = 4
IMREAD_GRAYSCALE, IMREAD_COLOR, FONT_HERSHEY_SIMPLEX, INTER_LINEAR = 0, 1, 0, 1
INTER_AREA, LINE_AA = 3, 16
def imread(path, flag=1):
    try:
        im = Image.open(path)
    except OSError:
        return None
    if flag == 0:
        return np.asarray(im.convert("L"))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"))[..., ::-1])
def cvtColor(img, code):
    return np.ascontiguousarray(img[..., ::-1])
def resize(img, size, interpolation=None):
    mode = "L" if img.ndim == 2 else "RGB"
    return np.asarray(Image.fromarray(img, mode).resize(tuple(size), Image.BILINEAR))
def imwrite(path, img):
    Image.fromarray(np.ascontiguousarray(img[..., ::-1]) if img.ndim == 3 else img).save(path)
    return True
def rectangle(img, *args, **kwargs):
    return img
def putText(img, *args, **kwargs):
    return img
def circle(img, *args, **kwargs):
    return img
def line(img, *args, **kwargs):
    return img
def copyMakeBorder(img, top, bottom, left, right, border_type, value=None):
    return np.pad(img, ((top, bottom), (left, right), (0, 0)), constant_values=114)
BORDER_CONSTANT = 0
'''

TORCHVISION_SHIM = '''"""torchvision.models stand-in: a small resnet18()."""
import torch
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=4, padding=1), torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, stride=4, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 1000))
    def forward(self, x):
        return self.body(x)
def resnet18(pretrained=False, **kwargs):
    torch.manual_seed(0)
    return _Net()
'''


def classifier(size: int = 224, classes: int = 1000, seed: int = 0,
               input_name: str = "data") -> onnx.ModelProto:  # fmt: skip
    """ImageNet-shaped classifier: [1,3,size,size] -> [1,classes] logits."""
    g = Graph(seed)
    x = g.node("Relu", [g.conv(input_name, "c1", 3, 16, stride=4)], "r1")
    x = g.node("Relu", [g.conv(x, "c2", 16, 32, stride=4)], "r2")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], "gap")], "flat")
    w = g.const("fc.w", (g.rng.randn(32, classes) * 0.5).astype(np.float32))
    # resnet50v2.onnx's output name: the accuracy_analysis example reads its snapshot file
    g.node("MatMul", [x, w], "resnetv24_dense0_fwd")
    return g.model([(input_name, [1, 3, size, size])], ["resnetv24_dense0_fwd"], opset=11,
                   name="classifier")


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


def yolov5_heads(size: int = 640, seed: int = 1) -> onnx.ModelProto:
    """yolov5s_relu.onnx's interface: images [1,3,640,640] -> three [1,255,h,w] heads at
    strides 8, 16 and 32 (Conv + Relu backbone, Resize + Concat neck)."""
    g = Graph(seed)
    x = g.node("Relu", [g.conv("images", "s2", 3, 8, stride=2)], "a2")
    x = g.node("Relu", [g.conv(x, "s4", 8, 16, stride=2)], "a4")
    p8 = g.node("Relu", [g.conv(x, "s8", 16, 16, stride=2)], "a8")
    p16 = g.node("Relu", [g.conv(p8, "s16", 16, 32, stride=2)], "a16")
    p32 = g.node("Relu", [g.conv(p16, "s32", 32, 32, stride=2)], "a32")
    roi = g.const("roi", np.zeros(0, np.float32))
    sc = g.const("sc", np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [p32, roi, sc], "up32", mode="nearest")
    n16 = g.node("Relu", [g.conv(g.node("Concat", [up, p16], "cat16", axis=1), "n16", 64, 32)],
                 "b16")  # fmt: skip
    outs = []
    for name, src, cin in (("output", p8, 16), ("417", n16, 32), ("419", p32, 32)):
        outs.append(g.conv(src, name, cin, 255, k=1))
    return g.model([("images", [1, 3, size, size])], outs, opset=12, name="yolov5s_relu")


def yolov8_heads(size: int = 640, seed: int = 2) -> onnx.ModelProto:
    """The model zoo's yolov8/yolo11 ONNX interface: images [1,3,640,640] -> per stride 8, 16,
    32: box distribution [1,64,h,w], class scores [1,80,h,w] (Sigmoid), score sum [1,1,h,w]."""
    g = Graph(seed)
    x = g.silu(g.conv("images", "s2", 3, 8, stride=2), "a2")
    x = g.silu(g.conv(x, "s4", 8, 16, stride=2), "a4")
    feats, outs = [], []
    for stride, (cin, cout) in zip((8, 16, 32), ((16, 16), (16, 32), (32, 32))):
        x = g.silu(g.conv(x, f"s{stride}", cin, cout, stride=2), f"a{stride}")
        feats.append((x, cout, stride))
    for x, c, stride in feats:
        box = g.conv(x, f"box{stride}", c, 64, k=1)
        cls = g.node("Sigmoid", [g.conv(x, f"cls{stride}_logits", c, 80, k=1)], f"cls{stride}")
        total = g.node("ReduceSum", [cls, g.const(f"ax{stride}", np.array([1], np.int64))],
                       f"sum{stride}_raw", keepdims=1)  # fmt: skip
        lo, hi = g.const(f"lo{stride}", np.float32(0)), g.const(f"hi{stride}", np.float32(1))
        outs += [box, cls, g.node("Clip", [total, lo, hi], f"score_sum{stride}")]
    return g.model([("images", [1, 3, size, size])], outs, opset=13, name="yolov8")


def yolov8_pose_heads(size: int = 640, seed: int = 3) -> onnx.ModelProto:
    """The model zoo's yolov8_pose ONNX interface: images [1,3,640,640] -> three [1,65,h,w]
    detection heads and keypoints [1,17,3,8400]; the keypoint branches carry the tensor names
    its convert.py gives custom_hybrid ('/model.22/cv4.K/cv4.K.0/act/Mul_output_0' ...
    '/model.22/Concat_6_output_0')."""
    g = Graph(seed)
    x = g.silu(g.conv("images", "s2", 3, 8, stride=2), "a2")
    x = g.silu(g.conv(x, "s4", 8, 16, stride=2), "a4")
    feats = []
    for stride, (cin, cout) in zip((8, 16, 32), ((16, 16), (16, 32), (32, 32))):
        x = g.silu(g.conv(x, f"s{stride}", cin, cout, stride=2), f"a{stride}")
        feats.append((x, cout))
    outs, kpts = [], []
    flat = g.const("flat", np.array([1, 51, -1], np.int64))
    for k, (x, c) in enumerate(feats):
        outs.append(g.conv(x, f"det{k}", c, 65, k=1))
        pre = g.conv(x, f"/model.22/cv4.{k}/cv4.{k}.0/conv/Conv_output_0", c, 16)
        act = g.node("Mul", [pre, g.node("Sigmoid", [pre], f"/model.22/cv4.{k}/sig")],
                     f"/model.22/cv4.{k}/cv4.{k}.0/act/Mul_output_0")  # fmt: skip
        kpt = g.conv(act, f"/model.22/cv4.{k}/cv4.{k}.2/Conv_output_0", 16, 51, k=1)
        kpts.append(g.node("Reshape", [kpt, flat], f"/model.22/Reshape_{k}_output_0"))
    cat = g.node("Concat", kpts, "/model.22/Concat_6_output_0", axis=2)
    shape = g.const("kshape", np.array([1, 17, 3, -1], np.int64))
    outs.append(g.node("Reshape", [g.node("Sigmoid", [cat], "kpt_sig"), shape], "kpt"))
    return g.model([("images", [1, 3, size, size])], outs, opset=12, name="yolov8_pose")


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


def replay(git_dir: str, folder: str, script: str, substitutes: dict, timeout: int,
           tops: list[str] | None = None, commands: list[list[str]] | None = None) -> tuple:
    """Run `script` (or each of `commands`) in the exported `folder`; the last outcome."""
    with tempfile.TemporaryDirectory(prefix="replay_") as tmp:
        # the examples tree holding `folder` (siblings too, for '../../caffe/...' paths)
        # the model zoo's demos find their helpers by a folder named rknn_model_zoo
        base = os.path.join(tmp, "rknn_model_zoo") if tops else tmp
        _export(git_dir, tops or [folder.split("/examples/")[0] + "/examples"], base)
        work = os.path.join(base, folder)
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
        shims = os.path.join(tmp, "_shims")
        os.makedirs(os.path.join(shims, "torchvision"), exist_ok=True)
        with open(os.path.join(shims, "cv2.py"), "w") as f:
            f.write(CV2_SHIM)
        with open(os.path.join(shims, "torchvision", "__init__.py"), "w") as f:
            f.write("from . import models\n")
        with open(os.path.join(shims, "torchvision", "models.py"), "w") as f:
            f.write(TORCHVISION_SHIM)
        commands = commands or [[script]]
        site = os.path.join(tmp, "_site")
        os.makedirs(site)
        layer.install(site)  # the scripts stay as they are: rknn.api is rknnrt's
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, ROOT, shims, tmp]),
                   MPLBACKEND="Agg")  # fmt: skip
        outcome: tuple = ("not run", "")
        for command in commands:
            try:
                done = subprocess.run([sys.executable, *command], cwd=work, env=env,
                                      timeout=timeout, capture_output=True, text=True)  # fmt: skip
            except subprocess.TimeoutExpired:
                return "timeout", " ".join(command)
            lines = [line for line in (done.stdout + done.stderr).splitlines()
                     if line.strip() and "calibrating" not in line]  # fmt: skip
            outcome = (done.returncode, "\n      ".join([" ".join(command), *lines[-4:]]))
            if done.returncode != 0:
                break
        return outcome


# rknn_model_zoo: folder -> (trees to export, {file: builder}, commands run in python/)
ZOO = {
    "examples/yolov5/python": (
        ["examples/yolov5", "py_utils", "datasets/COCO"],
        {"../model/yolov5s.onnx": yolov5_heads},
        [["convert.py", "../model/yolov5s.onnx", "rk3588", "i8", "../model/yolov5.rknn"],
         ["yolov5.py", "--model_path", "../model/yolov5.rknn", "--target", "rk3588",
          "--img_save"]],
    ),
    "examples/yolov8/python": (
        ["examples/yolov8", "py_utils", "datasets/COCO"],
        {"../model/yolov8n.onnx": yolov8_heads},
        [["convert.py", "../model/yolov8n.onnx", "rk3588", "i8", "../model/yolov8.rknn"],
         ["yolov8.py", "--model_path", "../model/yolov8.rknn", "--target", "rk3588",
          "--img_save"]],
    ),
    "examples/yolo11/python": (
        ["examples/yolo11", "py_utils", "datasets/COCO"],
        {"../model/yolo11n.onnx": yolov8_heads},
        [["convert.py", "../model/yolo11n.onnx", "rk3588", "i8", "../model/yolo11.rknn"],
         ["yolo11.py", "--model_path", "../model/yolo11.rknn", "--target", "rk3588",
          "--img_save"]],
    ),
    "examples/yolov8_pose/python": (
        ["examples/yolov8_pose", "py_utils", "datasets/COCO"],
        {"../model/yolov8_pose.onnx": yolov8_pose_heads},
        [["convert.py", "../model/yolov8_pose.onnx", "rk3588", "i8",
          "../model/yolov8_pose.rknn"],
         ["yolov8_pose.py", "--model_path", "../model/yolov8_pose.rknn", "--target", "rk3588"]],
    ),
    "examples/resnet/python": (
        ["examples/resnet", "datasets/imagenet"],
        {"../model/resnet50-v2-7.onnx": classifier},
        [["resnet.py", "../model/resnet50-v2-7.onnx", "rk3588", "i8"]],
    ),
    "examples/mobilenet/python": (
        ["examples/mobilenet", "datasets/imagenet"],
        {"../model/mobilenetv2-12.onnx": lambda: classifier(input_name="input")},
        [["mobilenet.py", "--target", "rk3588"]],
    ),
    "examples/PPOCR/PPOCR-Det/python": (
        ["examples/PPOCR/PPOCR-Det", "py_utils", "datasets/PPOCR"],
        {"../model/ppocrv4_det.onnx": lambda: ocr_det_like(480)},
        [["convert.py", "../model/ppocrv4_det.onnx", "rk3588", "i8",
          "../model/ppocrv4_det.rknn"]],
    ),
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", nargs="?",
                        default="/work/.mirror/airockchip+rknn-toolkit2/repo")  # fmt: skip
    parser.add_argument("--zoo", default="/work/.mirror/airockchip+rknn_model_zoo/repo",
                        help="a clone of airockchip/rknn_model_zoo ('' to skip)")
    parser.add_argument("--only", help="run the examples whose folder contains this")
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    for folder, (script, subs) in EXAMPLES.items():
        if args.only and args.only not in folder:
            continue
        steps = [[s] for s in script] if isinstance(script, tuple) else None
        rc, tail = replay(args.git_dir, folder, "", subs, args.timeout, commands=steps or
                          [[script]])  # fmt: skip
        print(f"{folder}/{'+'.join(script) if steps else script}: exit {rc}\n      {tail}",
              flush=True)  # fmt: skip
    for folder, (tops, subs, commands) in ZOO.items() if args.zoo else ():
        if args.only and args.only not in folder:
            continue
        rc, tail = replay(args.zoo, folder, "", subs, args.timeout, tops, commands)
        print(f"model zoo {folder}: exit {rc}\n      {tail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
