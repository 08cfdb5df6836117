"""Runs INSIDE the vendor's environment: the simulator's own int8 value of every tensor of an
int8 real-architecture fixture (tests/vendor/fixtures_arch), on its first test input, for the
per-layer comparison of vendor files (tools/vendor_diff/vendor_file.py).

    /work/vendor_env/bin/python tools/vendor_diff/arch_layers.py OUT_DIR STEM [STEM ...]
    /work/vendor_env/bin/python tools/vendor_diff/arch_layers.py OUT_DIR --probe NAME PLATFORM ...
    /work/vendor_env/bin/python tools/vendor_diff/arch_layers.py OUT_DIR --fp16 STEM ...

Each STEM (`<model>_<platform>_i8`, or a model name: all its platforms) is rebuilt from
make_arch_fixtures.make_onnx with the calibration set make_fixtures.build_one uses (so the
parameters equal the committed file's; vendor_file.py checks that), then `accuracy_analysis`
dumps every tensor. Writes
OUT_DIR/STEM.npz: `meta` (JSON as uint8: per tensor its scale, zero point, shape and whether
the simulator rounds it to its int8 grid) and `q/<name>` (int8) for each rounded tensor. The
simulator's values do not depend on the platform where the compiled graphs have the same
tensors: files equal to the model's most common one are then kept once, as `<model>_i8.npz`
(rk3566's exMatMul transformer keeps its own). --probe builds a lookup-table probe
(probes.PROBES[NAME]) or an attention probe (attention_probes.PROBES[NAME]) instead and also
exports the file, OUT_DIR/NAME_<platform>_i8.rknn (the committed probes.PROBE:
lutprobe_<platform>_i8.rknn) beside its dump.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "vendor"))
sys.path.insert(0, HERE)  # (probes.py: run as a script, no package)
import make_arch_fixtures as maf  # noqa: E402
import make_fixtures as mf  # noqa: E402
from snapshot import dump_files, on_grid  # noqa: E402


@contextlib.contextmanager
def _work_folder(prefix: str):
    """A temporary folder made the current one (the toolkit writes its files there), removed
    afterwards unless KEEP is set."""
    work = tempfile.mkdtemp(prefix=prefix)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        yield work
    finally:
        os.chdir(cwd)
        if not os.environ.get("KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def dump(stem: str, out_dir: str, model=None, export: bool = False) -> None:
    """`model` (an onnx.ModelProto; default make_arch_fixtures.make_onnx of the stem's model)
    built for the stem's platform; `export` also writes OUT_DIR/STEM.rknn (a probe's file)."""
    from rknn.api import RKNN  # the vendor toolkit: only in its own environment
    from ruamel.yaml import YAML

    name, platform, dtype = stem.rsplit("_", 2)
    assert dtype == "i8", "per-layer values are for int8 files"
    model = maf.make_onnx(name) if model is None else model
    with _work_folder("rknnrt_layers_") as work:
        import onnx

        onnx.save(model, "m.onnx")
        rng = np.random.default_rng(7)  # make_fixtures.build_one's calibration set
        lines = []
        for k in range(4):
            paths = []
            for i, shape in enumerate(mf._shapes(model)):
                path = os.path.join(work, f"calib{k}_{i}.npy")
                np.save(path, rng.standard_normal(shape).astype(np.float32))
                paths.append(path)
            lines.append(" ".join(paths))
        with open("dataset.txt", "w") as f:
            f.write("\n".join(lines) + "\n")
        with open("vendor.log", "w") as log, contextlib.redirect_stdout(log), \
                contextlib.redirect_stderr(log):  # fmt: skip
            rknn = RKNN(verbose=False)
            rknn.config(target_platform=platform, custom_string=mf.CUSTOM)
            assert rknn.load_onnx("m.onnx") == 0
            assert rknn.hybrid_quantization_step1(dataset="dataset.txt", proposal=False) == 0
            cfg = glob.glob("*.quantization.cfg")[0]
            rknn.release()
            rknn = RKNN(verbose=False)
            rknn.config(target_platform=platform, custom_string=mf.CUSTOM)
            assert rknn.load_onnx("m.onnx") == 0
            assert rknn.build(do_quantization=True, dataset="dataset.txt") == 0
            if export:
                assert rknn.export_rknn(os.path.join(out_dir, f"{stem}.rknn")) == 0
            assert rknn.accuracy_analysis(inputs=lines[0].split(" "), output_dir="snap") == 0
            rknn.release()
        params = YAML(typ="safe").load(open(cfg))["quantize_parameters"]
        files = dump_files("snap")
        meta, arrays = {}, {}
        for tensor, p in params.items():
            if not p.get("scale"):
                continue
            scale, zp = float(p["scale"][0]), int(p["zero_point"][0])
            entry = {"scale": scale, "zp": zp}
            if tensor in files and os.path.exists(files[tensor]):
                entry["rounded"], q = on_grid(files[tensor], scale, zp)
                entry["shape"] = list(q.shape)
                if entry["rounded"]:
                    arrays[f"q/{tensor}"] = q
            meta[tensor] = entry
        header = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
        np.savez_compressed(os.path.join(out_dir, f"{stem}.npz"), meta=header, **arrays)


def dump_float16(stem: str, out_dir: str) -> None:
    """The simulator's value of every tensor of the float16 fixture `<model>_<platform>_fp16`
    on its first test input (tests/vendor/fixtures_arch/<stem>.npz's in0[0]): OUT_DIR/STEM.npz,
    `t/<name>` per tensor, float16 where the value is float16's (the model input stays
    float32: the simulator feeds it unrounded), for tests/vendor/test_vendor_fp16_layers.py."""
    from rknn.api import RKNN  # the vendor toolkit: only in its own environment

    name, platform, _ = stem.rsplit("_", 2)
    with np.load(os.path.join(HERE, "..", "..", "tests", "vendor", "fixtures_arch",
                              f"{stem}.npz")) as data:  # fmt: skip
        first = data["in0"][0]
    with _work_folder("rknnrt_layers16_"):
        import onnx

        onnx.save(maf.make_onnx(name), "m.onnx")
        np.save("in0.npy", first)
        with open("vendor.log", "w") as log, contextlib.redirect_stdout(log), \
                contextlib.redirect_stderr(log):  # fmt: skip
            rknn = RKNN(verbose=False)
            rknn.config(target_platform=platform, custom_string=mf.CUSTOM)
            assert rknn.load_onnx("m.onnx") == 0
            assert rknn.build(do_quantization=False) == 0
            assert rknn.accuracy_analysis(inputs=["in0.npy"], output_dir="snap") == 0
            rknn.release()
        arrays = {}
        for tensor, path in dump_files("snap").items():
            if os.path.exists(path):
                value = np.load(path)
                half = value.astype(np.float16)
                arrays[f"t/{tensor}"] = half if np.array_equal(half, value) else value
        np.savez_compressed(os.path.join(out_dir, f"{stem}.npz"), **arrays)


def collapse(out_dir: str, stems: list[str]) -> None:
    """Keep each model's most common dump once as `<model>_i8.npz`."""
    by_model = collections.defaultdict(list)
    for stem in stems:
        path = os.path.join(out_dir, f"{stem}.npz")
        if os.path.exists(path):
            by_model[stem.rsplit("_", 2)[0]].append(path)
    for model, paths in by_model.items():
        # (npz members carry no time stamp: equal contents give equal bytes)
        digests = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths}
        common = collections.Counter(digests.values()).most_common(1)[0][0]
        keep = next(p for p in paths if digests[p] == common)
        os.replace(keep, os.path.join(out_dir, f"{model}_i8.npz"))
        for p in paths:
            if p != keep and digests[p] == common:
                os.remove(p)


def main() -> int:
    out_dir = os.path.abspath(sys.argv[1])
    os.makedirs(out_dir, exist_ok=True)
    if sys.argv[2] == "--probe":  # a lookup-table (probes.py) or attention probe, per PLATFORM
        import attention_probes
        from probes import PROBE, PROBES, make

        name = sys.argv[3]
        for platform in sys.argv[4:]:
            stem = f"{'lutprobe' if name == PROBE else name}_{platform}_i8"
            model = attention_probes.make(*attention_probes.PROBES[name]) \
                if name in attention_probes.PROBES else make(*PROBES[name])  # fmt: skip
            dump(stem, out_dir, model, export=True)
            print("dumped", stem, flush=True)
        return 0
    if sys.argv[2] == "--fp16":  # float16 fixtures' tensors (dump_float16)
        for stem in sys.argv[3:]:
            dump_float16(stem, out_dir)
            print("dumped", stem, flush=True)
        return 0
    stems = [s for a in sys.argv[2:] for s in
             ([a] if a.endswith("_i8") else [f"{a}_{p}_i8" for p in maf.PLATFORMS])]
    for stem in stems:
        try:
            dump(stem, out_dir)
            print("dumped", stem, flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on with the others
            print("FAILED", stem, repr(e)[:300], flush=True)
    collapse(out_dir, stems)
    return 0


if __name__ == "__main__":
    sys.exit(main())
