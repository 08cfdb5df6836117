"""Replay the vendor's C/C++ demos against `rknnrt sdk` (issue 26; docs/c-library.md).

    python3 tools/replay_demos.py --toolkit /tmp/x/rknn-toolkit2 --zoo /tmp/x/rknn_model_zoo \
        --work /tmp/x/build [--only yolov5,...] [--target rk3588]

Given checkouts of airockchip/rknn-toolkit2 and airockchip/rknn_model_zoo (V2.3.2), it
writes rknnrt's SDK into them (`rknnrt sdk --layout rknpu2|zoo`: this overwrites their ARM
librknnrt/librga, restore with git), makes stand-in models (tools/replay/standins.py),
configures each demo's own CMake project unchanged, builds it, runs it and prints one row
per demo: build / run / the demo's own check. Needs cmake, a C++ compiler and, for the
OpenCV demos, the host's OpenCV (`apt-get install libopencv-dev`), reached through
tools/replay/cmake/FindOpenCV.cmake (the demos' CMake shadows -DOpenCV_DIR). Not part of
the test suite: it needs the snapshots. The PP-OCR demos are built at -O0 and with -j1 (their
6,625-string dictionary takes ~18 GB at -O2).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "replay"))
import standins  # noqa: E402

OPENCV = [f"-DCMAKE_MODULE_PATH={HERE / 'replay' / 'cmake'}"]


@dataclass
class Demo:
    name: str
    repo: str  # "toolkit" or "zoo"
    src: str  # CMake project, relative to the repo
    target: str  # make target
    args: list[str]  # run arguments; {model} and {src} are substituted
    model: str | None = None  # standins.MAKERS key
    quantize: bool = False
    check: str | None = None  # regex the demo's output must match (its own check or output)
    cmake: list[str] = field(default_factory=list)
    dynamic: list | None = None
    runs: list[list[str]] | None = None  # several runs (matmul demo)
    model2: str | None = None  # a second (quantised) stand-in, {model2}
    env: dict[str, str] = field(default_factory=dict)
    note: str = ""


RK = "rknpu2/examples"
DEMOS = [
    Demo(
        "rknpu2 rknn_api_demo/create_mem",
        "toolkit",
        f"{RK}/rknn_api_demo",
        "rknn_create_mem_demo",
        ["{model}", "{src}/model/dog_224x224.jpg"],
        "mobilenet_v1",
        True,
        r"FPS[\s\S]*\d+\.\d+ - \d+",
    ),
    Demo(
        "rknpu2 rknn_api_demo/create_mem_with_rga",
        "toolkit",
        f"{RK}/rknn_api_demo",
        "rknn_create_mem_with_rga_demo",
        ["{model}", "{src}/model/dog_224x224.jpg"],
        "mobilenet_v1",
        True,
        r"FPS[\s\S]*\d+\.\d+ - \d+",
    ),
    Demo(
        "rknpu2 rknn_benchmark",
        "toolkit",
        f"{RK}/rknn_benchmark",
        "rknn_benchmark",
        ["{model}", "", "10"],
        "mobilenet_v1",
        True,
        r"Avg FPS",
    ),
    Demo(
        "rknpu2 rknn_mobilenet_demo",
        "toolkit",
        f"{RK}/rknn_mobilenet_demo",
        "rknn_mobilenet_demo",
        ["{model}", "{src}/model/dog_224x224.jpg"],
        "mobilenet_v1",
        True,
        r"Top5 ---\s*\n\s*\d+: ",
        OPENCV,
    ),
    Demo(
        "rknpu2 rknn_yolov5_demo",
        "toolkit",
        f"{RK}/rknn_yolov5_demo",
        "rknn_yolov5_demo",
        ["{model}", "{src}/model/bus.jpg"],
        "yolov5",
        True,
        r"loop count",
        OPENCV,
    ),
    Demo(
        "rknpu2 rknn_common_test",
        "toolkit",
        f"{RK}/rknn_common_test",
        "rknn_common_test",
        ["{model}", "{src}/model/dog_224x224.jpg"],
        "mobilenet_v1",
        True,
        r"---- Top5 ----",
        OPENCV,
    ),
    *[
        Demo(
            f"rknpu2 rknn_dynamic_shape_input_demo/{t}",
            "toolkit",
            f"{RK}/rknn_dynamic_shape_input_demo",
            t,
            ["{model}", "{src}/images/dog_224x224.jpg"],
            "mobilenet_v2_dyn",
            False,
            r"Top5",
            OPENCV,
            dynamic=[[[1, 3, 224, 224]], [[1, 3, 160, 160]], [[1, 3, 256, 256]]],
        )
        # (its third program, ..._alloc_outside, is built for Android only: libmpimmz)
        for t in ("rknn_dynshape_inference", "rknn_dynshape_inference_zero_copy")
    ],
    Demo(
        "rknpu2 rknn_internal_mem_reuse_demo",
        "toolkit",
        f"{RK}/rknn_internal_mem_reuse_demo",
        "rknn_internal_mem_reuse_demo",  # its README's two models; images from the sibling demos
        [
            "{model}",
            "{src}/../rknn_yolov5_demo/model/bus.jpg",
            "{model2}",
            "{src}/../rknn_common_test/model/cat_224x224.jpg",
        ],
        "yolov5",
        True,
        r"==== \S+yolov5\S+ ====[\s\S]*FPS[\s\S]*==== \S+mobilenet\S+ ====[\s\S]*FPS",
        OPENCV,
        model2="mobilenet_v1",
    ),
    Demo(
        "rknpu2 rknn_multiple_input_demo",
        "toolkit",
        f"{RK}/rknn_multiple_input_demo",
        "rknn_multiple_input_demo",
        ["{model}", "{src}/model/input1.bin#{src}/model/input2.bin"],
        "file:model/RK3588/multiple_input_demo.rknn",
        check=r"output",
    ),
    Demo(
        "rknpu2 rknn_custom_cpu_op_demo",
        "toolkit",
        f"{RK}/rknn_custom_op_demo/rknn_custom_cpu_op_demo",
        "rknn_custom_cpu_op_demo",
        ["{model}", "{src}/model/test_image.jpg"],
        "yolox_custom_sigmoid",
        True,
        r"@ \(\d+ \d+ \d+ \d+\)",
    ),
    Demo(
        "zoo mobilenet",
        "zoo",
        "examples/mobilenet/cpp",
        "rknn_mobilenet_demo",
        ["{model}", "{src}/../model/bell.jpg"],
        "mobilenet_v2",
        False,
        r"\[\d+\] score=",
        ["-DDISABLE_LIBJPEG=ON"],
    ),
    Demo(
        "zoo resnet",
        "zoo",
        "examples/resnet/cpp",
        "rknn_resnet_demo",
        ["{model}", "{src}/../model/dog_224x224.jpg"],
        "resnet50",
        False,
        r"\[\d+\] score=",
        ["-DDISABLE_LIBJPEG=ON"],
    ),
    Demo(
        "zoo yolov5",
        "zoo",
        "examples/yolov5/cpp",
        "rknn_yolov5_demo",
        ["{model}", "{src}/../model/bus.jpg"],
        "yolov5",
        True,
        r"@ \(\d+ \d+ \d+ \d+\)",
        ["-DDISABLE_LIBJPEG=ON"],
    ),
    Demo(
        "zoo yolov8",
        "zoo",
        "examples/yolov8/cpp",
        "rknn_yolov8_demo",
        ["{model}", "{src}/../model/bus.jpg"],
        "yolov8",
        True,
        r"@ \(\d+ \d+ \d+ \d+\)",
        ["-DDISABLE_LIBJPEG=ON"],
    ),
    Demo(
        "zoo RetinaFace",
        "zoo",
        "examples/RetinaFace/cpp",
        "rknn_retinaface_demo",
        ["{model}", "{src}/../model/test.jpg"],
        "retinaface",
        True,
        r"face @",
        ["-DDISABLE_LIBJPEG=ON"],
    ),
    Demo(
        "zoo PPOCR-Det",
        "zoo",
        "examples/PPOCR/PPOCR-Det/cpp",
        "rknn_ppocr_det_demo",
        ["{model}", "{src}/../model/test.jpg"],
        "ppocr_det",
        False,
        r"\[\d+\]: \[\(\d+, \d+\)",
        [
            "-DDISABLE_LIBJPEG=ON",
            "-DCMAKE_CXX_FLAGS_RELEASE=-O0",
            "-DCMAKE_C_FLAGS_RELEASE=-O0",
            *OPENCV,
        ],
    ),
    Demo(
        "zoo PPOCR-Rec",
        "zoo",
        "examples/PPOCR/PPOCR-Rec/cpp",
        "rknn_ppocr_rec_demo",
        ["{model}", "{src}/../model/test.png"],
        "ppocr_rec",
        False,
        r"regconize result",
        [
            "-DDISABLE_LIBJPEG=ON",
            "-DCMAKE_CXX_FLAGS_RELEASE=-O0",
            "-DCMAKE_C_FLAGS_RELEASE=-O0",
            *OPENCV,
        ],
    ),
]
MATMUL_TYPES = tuple(range(1, 12))  # every type of rknn_matmul_api.h up to INT8_MM_INT4_TO_INT32
for soc in ("rk3588", "rk3576"):  # the types differ per platform (rk3588: 1-4, 9, 10)
    DEMOS.append(Demo(
        f"rknpu2 rknn_matmul_api_demo ({soc})", "toolkit", f"{RK}/rknn_matmul_api_demo",
        "rknn_matmul_api_demo", [], check=r"result is correct", env={"RKNNRT_PLATFORM": soc},
        runs=[[str(t), "4,64,32", str(b), "0", "1", "0"] for t in MATMUL_TYPES for b in (0, 1, 2)],
        note="wrong = TP_NORM with int4 / FLOAT16_MM_INT8 B: the demo packs B wrongly "
        "(docs/matmul.md); cases are type/B_layout",
    ))  # fmt: skip


def sh(cmd: list[str], cwd: Path, log: Path, env: dict | None = None, timeout: int = 1800) -> int:
    with log.open("a") as f:
        f.write(f"$ (cd {cwd} && {' '.join(cmd)})\n")
        f.flush()
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            f.write("TIMEOUT\n")
            return -1


def replay(demo: Demo, repos: dict[str, Path], work: Path, target: str) -> tuple[str, str, str]:
    out = work / re.sub(r"\W+", "_", demo.name)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "replay.log"
    log.write_text("")
    src = repos[demo.repo] / demo.src
    soc = ["-DTARGET_SOC=" + target, "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_BUILD_TYPE=Release"]
    if sh(["cmake", str(src), *soc, *demo.cmake], out, log) != 0:
        return "✗ configure", "–", "–"
    if sh(["make", "-j1" if "PPOCR" in demo.name else "-j2", demo.target], out, log) != 0:
        return "✗", "–", "–"
    exe = next(p for p in out.rglob(demo.target) if p.is_file() and os.access(p, os.X_OK))
    model = ""
    model2 = ""
    if demo.model2:
        model2 = str(work / "models" / f"{demo.model2}_i8.rknnrt")
        if not Path(model2).exists():
            standins.convert(standins.MAKERS[demo.model2](), Path(model2), target=target,
                             quantize=True)  # fmt: skip
    if demo.model and demo.model.startswith("file:"):  # the snapshot's own vendor file
        model = str(src / demo.model[5:])
    elif demo.model:
        model = str(work / "models" / f"{demo.model}_{'i8' if demo.quantize else 'fp'}.rknnrt")
        if not Path(model).exists():
            mean = [[0, 0, 0]] * (2 if demo.model == "multiple_input" else 1)
            standins.convert(standins.MAKERS[demo.model](), Path(model), target=target,
                             quantize=demo.quantize, dynamic_input=demo.dynamic,
                             mean=mean if demo.model == "multiple_input" else None)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    # the rknpu2 demos' rpath is "lib" (their install folder); as their READMEs do on the
    # board, point LD_LIBRARY_PATH at the libraries (here the SDK layout's)
    libs = [repos["toolkit"] / "rknpu2/runtime/Linux/librknn_api/armhf",
            repos["toolkit"] / "rknpu2/examples/3rdparty/rga/libs/Linux/gcc-armhf"]  # fmt: skip
    env["LD_LIBRARY_PATH"] = ":".join(map(str, libs))
    env.update(demo.env)
    runs = demo.runs or [demo.args]
    ok_runs, check_runs = 0, 0
    outcomes: dict[str, list[str]] = {}
    for args in runs:
        argv = [str(exe)] + [a.format(model=model, model2=model2, src=src) for a in args]
        before = log.stat().st_size
        # the demos read ./model/... (labels, anchors) from their install folder: on a PC
        # that is the project's own folder (rknpu2) or the example's (zoo)
        cwd = src if demo.repo == "toolkit" else src.parent
        rc = sh(argv, cwd, log, env, timeout=600)
        text = log.read_text(errors="replace")[before:]
        ok_runs += rc == 0
        hit = bool(demo.check and re.search(demo.check, text))
        check_runs += hit
        if len(runs) > 1:
            outcomes.setdefault(_matmul_outcome(text, hit), []).append("/".join(args[:3:2]))
            with log.open("a") as f:
                f.write(f"REPLAY {' '.join(args)}: rc {rc}, check {'yes' if hit else 'no'}\n")
    n = len(runs)
    run = "✓" if ok_runs == n else f"✗ {n - ok_runs}/{n} failed"
    check = "✓" if check_runs == n else f"{check_runs}/{n}"
    if outcomes:  # type/B_layout per outcome, e.g. "correct 1/0 1/1 ...; wrong 10/2"
        check += " (" + "; ".join(f"{k} {' '.join(v)}" for k, v in outcomes.items()) + ")"
    return "✓", run, check


def _matmul_outcome(text: str, hit: bool) -> str:
    if hit:
        return "correct"
    if "unsupported matmul dtype" in text:
        return "not a type of this platform (rknn_matmul_create -5)"
    if "unsupported data type" in text:
        return "no branch in the demo"
    return "wrong" if "result is wrong" in text else "failed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--toolkit", type=Path, required=True, help="rknn-toolkit2 checkout")
    ap.add_argument("--zoo", type=Path, required=True, help="rknn_model_zoo checkout")
    ap.add_argument("--work", type=Path, required=True, help="build folder (outside the repos)")
    ap.add_argument("--target", default="rk3588")
    ap.add_argument("--only", default="", help="comma-separated substrings of demo names")
    ap.add_argument("--no-sdk", action="store_true", help="the layouts are written already")
    a = ap.parse_args()
    repos = {"toolkit": a.toolkit.resolve(), "zoo": a.zoo.resolve()}
    a.work.mkdir(parents=True, exist_ok=True)
    if not a.no_sdk:
        for layout, dst in (
            ("rknpu2", repos["toolkit"] / "rknpu2"),
            ("zoo", repos["zoo"] / "3rdparty"),
        ):
            subprocess.run([sys.executable, "-m", "rknnrt.cli", "sdk", "--layout", layout, "--out",
                            str(dst)], cwd=ROOT, check=True)  # fmt: skip
    only = [s for s in a.only.split(",") if s]
    rows = []
    for demo in DEMOS:
        if only and not any(s in demo.name for s in only):
            continue
        try:
            row = replay(demo, repos, a.work.resolve(), a.target)
        except Exception as exc:  # a failed stand-in conversion is a row, not the end
            row = ("?", f"✗ {type(exc).__name__}: {exc}"[:60], "–")
        rows.append((demo.name, *row, demo.note))
        print(f"{demo.name:45s} build {row[0]:12s} run {row[1]:16s} check {row[2]}", flush=True)
    print("\n| demo | build | run | own check / output | note |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nlogs: {a.work}/<demo>/replay.log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
