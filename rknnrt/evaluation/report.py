"""From per-sample records to the report: distributions, agreement, metrics, worst samples;
as JSON, as a table for people, and as plots when matplotlib is installed."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .engine import Record
from .metrics import Metric

WORST = 5


def _distribution(values: np.ndarray, low_is_bad: bool) -> dict[str, float]:
    p = [1, 5, 50] if low_is_bad else [50, 95, 99]
    q = np.percentile(values, p)
    stats = {
        "mean": float(np.mean(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
    }
    stats.update({f"p{k}": float(v) for k, v in zip(p, q)})
    return stats


def summarize(
    records: Sequence[Record], metrics: Sequence[Metric], output_names: Sequence[str]
) -> dict[str, Any]:
    """The report of one evaluation (records in sample order)."""
    report: dict[str, Any] = {
        "samples": len(records),
        "outputs": {},
        "agreement": None,
        "metrics": {},
        "worst": [],
    }
    if records and records[0]["cosine"] is not None:
        cos = np.asarray([r["cosine"] for r in records], np.float64)
        err = np.asarray([r["max_abs"] for r in records], np.float64)
        for k, name in enumerate(output_names):
            report["outputs"][name] = {
                "cosine": _distribution(cos[:, k], True),
                "max_abs": _distribution(err[:, k], False),
            }
        top1 = np.mean([r["top5"][0] == r["ref_top5"][0] for r in records])
        top5 = np.mean([r["ref_top5"][0] in r["top5"] for r in records])
        report["agreement"] = {"top1": float(top1), "top5": float(top5)}
        # worst first: lowest cosine of output 0, ties by sample order (a stable sort)
        order = np.argsort(cos[:, 0], kind="stable")[:WORST]
        report["worst"] = [
            {
                "index": records[k]["index"],
                "name": records[k]["name"],
                "cosine": records[k]["cosine"],
                "max_abs": records[k]["max_abs"],
            }
            for k in order
        ]
    for metric in metrics:
        report["metrics"][metric.name] = metric.summarize(
            [r["metrics"][metric.name] for r in records]
        )
    return report


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False)


def table(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    lines = [f"samples: {report['samples']}"]
    if report.get("outputs"):
        lines.append(
            f"{'output':<20} {'cos mean':>9} {'cos p1':>9} {'cos p5':>9} "
            f"{'cos min':>9} {'maxabs mean':>12} {'maxabs max':>11}"
        )
        for name, stats in report["outputs"].items():
            c, m = stats["cosine"], stats["max_abs"]
            lines.append(
                f"{name[:20]:<20} {c['mean']:>9.6f} {c['p1']:>9.6f} {c['p5']:>9.6f} "
                f"{c['min']:>9.6f} {m['mean']:>12.6g} {m['max']:>11.6g}"
            )
    if report.get("agreement"):
        a = report["agreement"]
        lines.append(f"agreement with the reference: top-1 {a['top1']:.2%}, top-5 {a['top5']:.2%}")
    for name, values in report.get("metrics", {}).items():
        text = ", ".join(
            f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items()
        )
        lines.append(f"{name}: {text or 'no labelled samples'}")
    if report.get("worst"):
        lines.append(
            "worst samples (cosine of output 0): "
            + ", ".join(f"{w['name']} {w['cosine'][0]:.6f}" for w in report["worst"])
        )
    drift = report.get("drift")
    if drift:
        lines.append(
            f"per-layer drift on {len(drift['samples'])} worst samples (lowest cosine "
            f"first; first tensor below 0.99: {drift['first_below_0.99']}):"
        )
        for layer in sorted(drift["layers"], key=lambda x: x["cosine"])[:8]:
            lines.append(f"  {layer['tensor'][:40]:<40} cosine {layer['cosine']:.6f}")
    return "\n".join(lines)


def plot(records: Sequence[Record], output_names: Sequence[str], path: str | os.PathLike) -> bool:
    """Histograms of per-sample cosine per output into `path` (PNG); False without matplotlib
    or without a reference."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not records or records[0]["cosine"] is None:
        return False
    cos = np.asarray([r["cosine"] for r in records], np.float64)
    fig, axes = plt.subplots(
        1, len(output_names), figsize=(4 * len(output_names), 3), squeeze=False
    )
    for k, name in enumerate(output_names):
        axes[0][k].hist(cos[:, k], bins=50)
        axes[0][k].set_title(f"{name}: cosine vs reference")
    fig.tight_layout()
    fig.savefig(os.fspath(path))
    plt.close(fig)
    return True
