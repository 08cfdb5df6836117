"""Calibration: run the float model on the samples and choose int8 parameters per tensor
('normal' = min/max, 'mmse' = least squared error, 'kl_divergence' = least KL divergence)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from ...model import numerics
from ..errors import ConversionError, engine_words
from ..probe import probe_session

# Activation calibration algorithms, the vendor's names.
ALGORITHMS = ("normal", "mmse", "kl_divergence")


@dataclass(frozen=True)
class QParams:
    scale: float
    zp: int


def asymmetric(lo: float, hi: float) -> QParams:
    """The vendor's 'normal' formula: scale = (max - min) / 255, zp = -128 - round(min / scale),
    over a range widened to hold 0."""
    lo, hi = numerics.widened(lo, hi)
    if hi - lo < 1e-12:
        return QParams(1.0 / 255, -128)
    return QParams(*numerics.affine_params(lo, hi))


class _Histogram:
    """Value range and a bounded subset of one tensor's values over every calibration sample.

    Each sample contributes every `step`-th value (at most 65,536); the kept values are
    capped at `cap` in total: when they would exceed it, every stored part is thinned to its
    even positions and later samples keep half as many. Memory is therefore independent of
    the number of samples, and a dataset whose subset fits the cap gives exactly the values
    (and parameters) of keeping them all. 'normal' keeps none: it needs the range only.
    """

    BINS = 2048
    PER_SAMPLE = 65536
    CAP = 1 << 22  # values kept per tensor at most (16 MB of float32)

    def __init__(self, keep_values: bool = True, cap: int = CAP) -> None:
        self.lo, self.hi = np.inf, -np.inf
        self.samples: list[np.ndarray] = []
        self.keep_values, self.cap = keep_values, max(int(cap), self.PER_SAMPLE)
        self.kept, self.thinning = 0, 1  # values stored; extra decimation of later samples

    def add(self, values: np.ndarray) -> None:
        flat = values.astype(np.float32, copy=False).ravel()
        if not flat.size:
            return
        low, high = float(flat.min()), float(flat.max())
        if not (np.isfinite(low) and np.isfinite(high)):  # NaN propagates through min/max
            raise ValueError("has infinite or NaN values")
        self.lo, self.hi = min(self.lo, low), max(self.hi, high)
        if not self.keep_values:
            return
        step = max(1, flat.size // self.PER_SAMPLE) * self.thinning  # a bounded subset
        part = flat[::step].copy()
        while self.kept + part.size > self.cap and self.kept:
            self.samples = [v[::2].copy() for v in self.samples]
            self.kept = sum(v.size for v in self.samples)
            self.thinning *= 2
            part = part[::2].copy()
        self.samples.append(part)
        self.kept += part.size

    def kl_divergence(self) -> QParams:
        """The clipping range whose 255-level quantised histogram is closest (least KL
        divergence) to the observed one: the entropy calibration of TensorRT, searched over
        ranges [lo, hi] shrunk from both ends in the same proportion (rknnrt's own search:
        the vendor's exact one is not documented)."""
        values = np.concatenate(self.samples) if self.samples else np.zeros(1, np.float32)
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)
        if hi - lo < 1e-12:
            return asymmetric(lo, hi)
        hist, _ = np.histogram(values, bins=self.BINS, range=(lo, hi))
        hist = hist.astype(np.float64)
        zero_bin = int(np.clip(round(-lo / (hi - lo) * self.BINS), 0, self.BINS))
        best, best_range = np.inf, (lo, hi)
        for keep in np.linspace(1.0, 0.3, 36):  # fraction of each side kept
            a = zero_bin - int(round(zero_bin * keep))
            b = zero_bin + int(round((self.BINS - zero_bin) * keep))
            if b - a < 256:
                break
            p = hist[a:b].copy()
            p[0] += hist[:a].sum()  # the clipped tails land on the range's ends
            p[-1] += hist[b:].sum()
            divergence = _kl(p, _requantised(hist[a:b]))
            if divergence < best:
                best = divergence
                best_range = (lo + (hi - lo) * a / self.BINS, lo + (hi - lo) * b / self.BINS)
        return asymmetric(*best_range)

    def mmse(self) -> QParams:
        """The clipping range (each end shrunk from min/max in turn) whose
        quantise-dequantise error is least."""
        values = np.concatenate(self.samples) if self.samples else np.zeros(1, np.float32)
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)

        def error(a: float, b: float) -> float:
            qp = asymmetric(a, b)
            on_grid = numerics.fake_quantize(values, qp.scale, qp.zp)
            return float(np.mean((on_grid - values) ** 2))

        ratios = np.geomspace(1.0, 0.01, 48)
        best = error(lo, hi)
        for _ in range(2):  # coordinate descent: the top end, then the bottom end
            for side in ("hi", "lo"):
                for r in ratios:
                    a, b = (lo, self.hi * r) if side == "hi" else (min(self.lo, 0) * r, hi)
                    e = error(a, b)
                    if e < best - 1e-15:
                        best, lo, hi = e, min(a, 0.0), max(b, 0.0)
        return asymmetric(lo, hi)


def _requantised(counts: np.ndarray, levels: int = 255) -> np.ndarray:
    """`counts` merged into `levels` equal groups and spread back uniformly over each group's
    non-empty bins: the distribution int8 can represent."""
    starts = np.linspace(0, counts.size, levels + 1).astype(np.intp)[:-1]
    sums = np.add.reduceat(counts, starts)
    filled = np.add.reduceat((counts > 0).astype(np.float64), starts)
    per_bin = np.repeat(sums / np.maximum(filled, 1), np.diff(np.append(starts, counts.size)))
    return np.where(counts > 0, per_bin, 0.0)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / max(p.sum(), 1e-12)
    q = q / max(q.sum(), 1e-12)
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\rI calibrating [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")


def calibrate(
    model: onnx.ModelProto,
    samples: Sequence[list[np.ndarray]],
    tensors: list[str],
    algorithm: str,
    progress: Callable[[int, int], None] = _progress,
    bounds: dict[str, tuple[float, float]] | None = None,
) -> dict[str, QParams]:
    """Run the float model on every sample and choose int8 parameters for `tensors`."""
    try:
        session = probe_session(model, tensors)
    except Exception as exc:  # onnxruntime's errors come in several types
        raise ConversionError(f"calibration model cannot be loaded: {engine_words(exc)}") from None
    names = [i.name for i in model.graph.input]
    keep = algorithm != "normal"  # min/max need no values
    hists = {t: _Histogram(keep, _Histogram.CAP) for t in tensors}
    probed = [t for t in tensors if t not in names]
    total, done = len(samples), 0
    try:  # the samples are read as they are iterated (a streamed dataset file)
        for k, sample in enumerate(samples):
            feed = dict(zip(names, sample))
            # graph inputs are outputs of the probe too
            values = [*((n, feed[n]) for n in names if n in hists),
                      *zip(probed, session.run(probed, feed))]  # fmt: skip
            for t, v in values:
                try:
                    hists[t].add(v)
                except ValueError as exc:
                    what = "input" if t in names else "tensor"
                    raise ConversionError(
                        f"calibration sample {k + 1}: {what} '{t}' {exc}; a scale cannot be "
                        "chosen from it (check the dataset and mean/std)"
                    ) from None
            done = k + 1
            progress(done, total)
    except ConversionError:
        if progress is _progress and 0 < done < total:
            sys.stderr.write("\n")  # the E line starts a line of its own
        raise
    for t, (lo, hi) in (bounds or {}).items():
        if t in hists:
            h = hists[t]
            h.lo, h.hi = max(h.lo, lo), min(h.hi, hi)
            h.samples = [np.clip(v, lo, hi) for v in h.samples]
    if algorithm == "normal":
        return {t: asymmetric(h.lo, h.hi) for t, h in hists.items()}
    if algorithm == "kl_divergence":
        return {t: h.kl_divergence() for t, h in hists.items()}
    return {t: h.mmse() for t, h in hists.items()}
