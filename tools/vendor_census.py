"""python -m tools.vendor_census FILE_OR_DIR ... [--json OUT.json] [--markdown]

The op census of a set of vendor .rknn files: every vendor op type and every convolution weight
packing found, how many files hold each, and whether rknnrt decodes it. An op type is decoded
when the vendor reader registers a decoder for it ("custom" for a file's custom op types, which
run through the ops the application registers); a packing is decoded when every file holding
it loads, or the file's one refusal line does not name it. Each file's own result (loads, or
the refusal line rknn_init would log) is listed at the end.

`--markdown` prints instead the op and packing tables of docs/vendor-rknn.md, per platform and
dtype, from what the files show: an op is "fp16"/"int8"/"both" where a file holding it loads,
"refused" where a file's refusal names it (and not loaded anywhere else for that dtype),
"(not reached)" where the files holding it are refused for another reason.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from rknnrt.model.errors import ModelFormatError
from rknnrt.model.vendor_rknn import fileformat, mini_format, program_kind, registry, to_sections

CONV_GROUP = 2  # Conv attribute slot (vendor_rknn/conv_ops.py)


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out.extend(sorted(p.rglob("*.rknn")) if p.is_dir() else [p])
    return out


def packings(m: fileformat.VendorModel) -> list[tuple[str, str]]:
    """(packing key, weight tensor name) per convolution of `m`. The key names the NPU format,
    the weight type, depthwise or not, the kernel, the input channels and the stored native
    shape (one or more 6-tuples [OC1, IC1, KH, KW, OC2, IC2])."""
    found = []
    for n in m.nodes:
        if not n.op_type.startswith("Conv") or len(n.inputs) < 2:
            continue
        w = m.tensors[n.inputs[1]]
        if len(w.shape) != 4:
            continue
        oc, ic, kh, kw = w.shape
        group = n.attr_int(CONV_GROUP, 1) or 1
        kind = "depthwise" if group > 1 and oc == 1 and ic == group else (
            f"group{group}" if group > 1 else "conv")  # fmt: skip
        key = (f"{m.npu_format} {w.dtype} {kind} {kh}x{kw} ic={ic if kind == 'conv' else '-'} "
               f"native={w.native_shape}")  # fmt: skip
        found.append((key, w.name))
    return found


def census(files: list[Path]) -> dict:
    ops: dict[str, set[str]] = collections.defaultdict(set)
    custom: set[str] = set()
    packs: dict[str, set[str]] = collections.defaultdict(set)
    refused_packs: set[str] = set()
    results: dict[str, str] = {}
    info: dict[str, dict] = {}  # per file: platform, dtype, op types, packings (for --markdown)
    for path in files:
        data = memoryview(path.read_bytes())
        try:
            m = mini_format.read(data)  # either container (v6 or rv1106's mini format)
        except ModelFormatError as exc:
            results[str(path)] = f"refused: {exc}"
            continue
        for n in m.nodes:
            ops[n.op_type].add(str(path))
        custom.update(m.custom_op_types)
        try:
            to_sections(data)
            results[str(path)] = "loads"
            error = ""
        except ModelFormatError as exc:
            error = str(exc)
            results[str(path)] = f"refused: {error}"
        keys = []
        for key, weight in packings(m):
            packs[key].add(str(path))
            keys.append(key)
            if error and (f"'{weight}'" in error or f"'{m.npu_format}'" in error):
                refused_packs.add(key)
        info[str(path)] = dict(platform=m.platform, dtype=program_kind(m), error=error,
                               ops=sorted({n.op_type for n in m.nodes}), packings=keys)
    return dict(
        ops={op: dict(files=len(f), decoded="custom" if op in custom else
                      op in registry.DECODERS or op in registry.BOUNDARY)
             for op, f in sorted(ops.items())},
        packings={k: dict(files=len(f), decoded=k not in refused_packs)
                  for k, f in sorted(packs.items())},
        files=results, info=info,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help=".rknn files or folders searched for them")
    ap.add_argument("--json", help="also write the census as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the docs' tables instead")
    args = ap.parse_args(argv)
    result = census(_files(args.paths))
    if args.markdown:
        from tools.vendor_census_md import markdown  # noqa: PLC0415

        print(markdown(result))
        return 0
    print("op type                          files  decoded")
    for op, row in result["ops"].items():
        decoded = row["decoded"] if isinstance(row["decoded"], str) else (
            "yes" if row["decoded"] else "NO")  # fmt: skip
        print(f"{op:32s} {row['files']:5d}  {decoded}")
    print("\npacking                                                      files  decoded")
    for key, row in result["packings"].items():
        print(f"{key:60s} {row['files']:5d}  {'yes' if row['decoded'] else 'NO'}")
    loads = sum(r == "loads" for r in result["files"].values())
    print(f"\n{loads} of {len(result['files'])} files load")
    for path, r in result["files"].items():
        print(f"  {Path(path).name}: {r}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
