"""The op and packing tables of docs/vendor-rknn.md, from a census (tools/vendor_census.py).

Per op type and platform: the dtypes in which a file holding the op loads, "refused" for a dtype
where only refusals naming the op were seen ("partly refused" where some files load and others'
refusals name it), "(not reached)" where the files holding it were
refused for something else. Per weight packing kind (dtype, depthwise or not, kernel) and
platform: how many of the distinct stored layouts seen decode.
"""

from __future__ import annotations

import collections
import re

PLATFORMS = ("rk3588", "rk3566", "rk3568", "rk3576", "rk3562", "rv1126b")
DTYPES = ("float16", "int8")
SHORT = {"float16": "fp16", "int8": "int8"}


def _names(op: str, error: str) -> bool:
    """Whether a refusal line is about op type `op` (its words name the op)."""
    return re.search(rf"(?<![\w]){re.escape(op)}(?![\w])", error) is not None


def _op_cell(seen: dict[str, set[str]], custom: bool) -> str:
    """seen: dtype -> outcomes ("loads", "refused", "unreached")."""
    if custom and seen:
        return "custom (registered op)"
    ok = [d for d in DTYPES if "loads" in seen.get(d, ())]
    parts = []
    if len(ok) == 2:
        parts.append("both")
    elif ok:
        parts.append(SHORT[ok[0]])
    for d in DTYPES:
        if d not in seen:
            continue
        if d in ok:
            if "refused" in seen[d]:  # decoded in some files, refused by name in others
                parts.append(f"{SHORT[d]} partly refused")
            continue
        parts.append(f"{SHORT[d]} refused" if "refused" in seen[d] else f"{SHORT[d]} (not reached)")
    return ", ".join(parts)


def markdown(result: dict) -> str:
    info: dict[str, dict] = result["info"]
    platforms = [p for p in PLATFORMS if any(f["platform"] == p for f in info.values())]
    platforms += sorted({f["platform"] for f in info.values()} - set(platforms))
    ops: dict[str, dict[str, dict[str, set[str]]]] = collections.defaultdict(
        lambda: collections.defaultdict(lambda: collections.defaultdict(set)))
    for f in info.values():
        for op in f["ops"]:
            if op in ("InputOperator", "OutputOperator"):
                continue
            outcome = ("loads" if not f["error"] else
                       "refused" if _names(op, f["error"]) else "unreached")  # fmt: skip
            ops[op][f["platform"]][f["dtype"]].add(outcome)
    head = "| op | " + " | ".join(platforms) + " |"
    lines = [f"{len(info)} files; per platform, the dtypes in which a file holding the op loads.",
             "", head, "|---" * (len(platforms) + 1) + "|"]  # fmt: skip
    for op in sorted(ops, key=str.lower):
        custom = result["ops"].get(op, {}).get("decoded") == "custom"
        cells = [_op_cell(ops[op].get(p, {}), custom) for p in platforms]
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    # packings: (dtype, kind, kernel) per platform, distinct stored layouts decoded / seen
    kinds: dict[str, dict[str, list[bool]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for key, row in result["packings"].items():
        dtype, kind, kernel = key.split(" ")[2:5]  # "RKNPU v2 int8 conv 3x3 ic=... native=..."
        platform = next(f["platform"] for f in info.values() if key in f["packings"])
        kinds[f"{dtype} {kind} {kernel}"][platform].append(row["decoded"])
    lines += ["", "| weight packing | " + " | ".join(platforms) + " |",
              "|---" * (len(platforms) + 1) + "|"]  # fmt: skip
    for kind in sorted(kinds):
        cells = []
        for p in platforms:
            seen = kinds[kind].get(p, [])
            cells.append("" if not seen else
                         f"{sum(seen)}/{len(seen)} layouts" + ("" if all(seen) else " (refused)"))
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
