"""Issue 27 items 5-6: a calibration sample with inf or NaN is refused at build with one E
line (never an Infinity scale, never a silent 1/255); calibration statistics keep a bounded
number of values per tensor, with exactly the previous implementation's results on datasets
whose values fit."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from rknnrt.toolkit import RKNN
from rknnrt.toolkit.quantize.calibrate import _Histogram, asymmetric
from rknnrt.toolkit.samples import default_model

calibration = importlib.import_module("rknnrt.toolkit.quantize.calibrate")


class _Previous:
    """The statistics as they were before issue 27 (every sample's subset kept, unbounded):
    the reference that the bounded implementation must equal on datasets that fit."""

    def __init__(self) -> None:
        self.lo, self.hi = np.inf, -np.inf
        self.samples: list[np.ndarray] = []

    def add(self, values: np.ndarray) -> None:
        flat = values.astype(np.float32, copy=False).ravel()
        if flat.size:
            self.lo, self.hi = min(self.lo, float(flat.min())), max(self.hi, float(flat.max()))
            step = max(1, flat.size // 65536)
            self.samples.append(flat[::step].copy())

    kl_divergence = _Histogram.kl_divergence
    mmse = _Histogram.mmse
    BINS = _Histogram.BINS


def _stream(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.RandomState(seed)
    sizes = [100_000, 4096, 65_537, 300_000]
    return [rng.laplace(0.3, 2.0, sizes[k % len(sizes)]).astype(np.float32) for k in range(count)]


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_bounded_statistics_equal_the_previous_ones(seed) -> None:
    arrays = _stream(seed, 12)  # 12 samples: ~460k kept values, under the cap
    new, old = _Histogram(), _Previous()
    for a in arrays:
        new.add(a)
        old.add(a)
    assert new.kept <= _Histogram.CAP and new.thinning == 1
    assert (new.lo, new.hi) == (old.lo, old.hi)
    assert asymmetric(new.lo, new.hi) == asymmetric(old.lo, old.hi)
    assert new.mmse() == old.mmse()
    assert new.kl_divergence() == old.kl_divergence()


def test_calibrate_equals_the_previous_statistics_on_a_model() -> None:
    """calibrate() on the default CNN and 3 samples: every tensor's parameters for the three
    algorithms equal those of the previous statistics fed the same tensors."""
    model = default_model()
    rng = np.random.RandomState(0)
    samples = [[rng.rand(1, 3, 64, 64).astype(np.float32) * 4 - 2] for _ in range(3)]
    tensors = [model.graph.input[0].name, *[n.output[0] for n in model.graph.node]]
    from rknnrt.toolkit.probe import probe_session

    session = probe_session(model, tensors)
    reference = {t: _Previous() for t in tensors}
    for sample in samples:
        reference[tensors[0]].add(sample[0])
        for t, v in zip(tensors[1:], session.run(tensors[1:], {tensors[0]: sample[0]})):
            reference[t].add(v)
    quiet = lambda done, total: None  # noqa: E731
    assert calibration.calibrate(model, samples, tensors, "normal", quiet) == {
        t: asymmetric(h.lo, h.hi) for t, h in reference.items()
    }
    assert calibration.calibrate(model, samples, tensors, "mmse", quiet) == {
        t: h.mmse() for t, h in reference.items()
    }
    assert calibration.calibrate(model, samples, tensors, "kl_divergence", quiet) == {
        t: h.kl_divergence() for t, h in reference.items()
    }


def test_memory_is_independent_of_the_sample_count() -> None:
    cap = 1 << 18
    for count in (10, 100, 400):
        h = _Histogram(cap=cap)
        for _ in range(count):
            h.add(np.ones(65536, np.float32))
        assert h.kept <= cap and sum(v.size for v in h.samples) == h.kept
    normal = _Histogram(keep_values=False)
    normal.add(np.arange(10.0))
    assert normal.samples == [] and (normal.lo, normal.hi) == (0.0, 9.0)


@pytest.mark.slow  # 2^22+ values per tensor
def test_thinned_statistics_stay_close() -> None:
    """Past the cap the kept values are a uniform thinning: the parameters barely move."""
    arrays = _stream(3, 40)
    small, full = _Histogram(cap=1 << 18), _Previous()
    for a in arrays:
        small.add(a)
        full.add(a)
    assert small.thinning > 1 and small.kept <= 1 << 18
    # (one step of the searches' grids is ~10 %: a thinned subset may land one step away)
    assert small.mmse().scale == pytest.approx(full.mmse().scale, rel=0.15)
    assert small.kl_divergence().scale == pytest.approx(full.kl_divergence().scale, rel=0.15)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("algorithm", ["normal", "mmse"])
def test_inf_or_nan_sample_is_refused_at_build(bad, algorithm, capfd) -> None:
    rng = np.random.RandomState(0)
    samples = [[rng.randint(0, 256, [1, 3, 64, 64]).astype(np.float32)] for _ in range(3)]
    samples[1][0][0, 1, 2, 3] = bad
    rknn = RKNN()
    rknn.config(target_platform="rk3588", quantized_algorithm=algorithm)
    assert rknn.load_onnx(default_model()) == 0
    capfd.readouterr()
    assert rknn.build(do_quantization=True, dataset=samples) == -1
    assert "calibration sample 2" in rknn.last_error and "NaN" in rknn.last_error
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("E ")]
    assert len(errors) == 1 and errors[0].startswith("E build")
    assert rknn.export_rknn("/nonexistent/never.rknn") == -1  # no model was made
