"""Issue 27: calibration streams the dataset. A dataset file's samples are read one at a time
when calibration uses them (memory does not grow with the number of samples), with exactly
the models that reading them all into a list gave, for every algorithm; the file formats
(.npy, images, several inputs per line, relative paths, blank lines, CR/LF endings) and the
other consumers (hybrid quantisation's .data file, accuracy analysis) are unchanged."""

from __future__ import annotations

import gc
import io
import os
import tracemalloc
import weakref

import numpy as np
import pytest

from rknnrt.toolkit import RKNN, builder, hybrid, quantize
from rknnrt.toolkit import dataset as datasets
from rknnrt.toolkit.errors import ConversionError

from ..toolkit2.models import tiny_cnn

ALGORITHMS = ("normal", "mmse", "kl_divergence")
MEAN, STD = [[10, 20, 30]], [[50, 60, 70]]


def _write_npy_dataset(folder, count: int, size: int = 16, seed: int = 3) -> str:
    rng = np.random.RandomState(seed)
    lines = []
    for k in range(count):  # heavy tails, so that mmse and kl clip differently from min/max
        array = (rng.standard_t(2, (1, 3, size, size)) * 40 + 100).astype(np.float32)
        np.save(os.path.join(folder, f"s{k}.npy"), array)
        lines.append(f"s{k}.npy")
    path = os.path.join(folder, "dataset.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")  # a blank line
    return path


def _previous_samples(path: str) -> list[list[np.ndarray]]:
    """The dataset as the loader read it before streaming: every line's array in one list,
    normalised with mean/std (the reference the streamed build must equal)."""
    folder = os.path.dirname(path)
    with open(path) as f:
        names = [line.split() for line in f if line.strip()]
    out = []
    for (name,) in names:
        x = np.load(os.path.join(folder, name), allow_pickle=False).astype(np.float32)
        x = (x - np.float32(MEAN[0]).reshape(1, -1, 1, 1)) / np.float32(STD[0]).reshape(1, -1, 1, 1)
        out.append([x])
    return out


def _rknn(algorithm: str, size: int = 16) -> RKNN:
    rknn = RKNN()
    assert rknn.config(mean_values=MEAN, std_values=STD, quantized_algorithm=algorithm) == 0
    assert rknn.load_onnx(tiny_cnn(size)) == 0
    return rknn


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_streamed_build_equals_the_list_build(tmp_path, algorithm) -> None:
    path = _write_npy_dataset(str(tmp_path), 9)
    streamed = _rknn(algorithm)
    assert streamed.build(dataset=path) == 0, streamed.last_error
    reference = _rknn(algorithm)
    prepared = reference._prepare(True, None)  # noqa: SLF001
    built = builder.compile_model(prepared, reference._config, "tiny_cnn",  # noqa: SLF001
                                  samples=_previous_samples(path))  # fmt: skip
    assert streamed.model_bytes() == built.model_bytes
    # and the streamed samples are the very arrays the list held
    samples = builder.calibration_samples(prepared, reference._config, path)  # noqa: SLF001
    assert isinstance(samples, datasets.Samples) and len(samples) == 9
    for got, want in zip(samples, _previous_samples(path)):
        np.testing.assert_array_equal(got[0], want[0])


def test_a_streamed_pass_keeps_no_sample_alive(tmp_path) -> None:
    path = _write_npy_dataset(str(tmp_path), 6)
    rknn = _rknn("mmse")
    prepared = rknn._prepare(True, None)  # noqa: SLF001
    samples = builder.calibration_samples(prepared, rknn._config, path)  # noqa: SLF001
    refs = []
    for sample in samples:
        refs.append(weakref.ref(sample[0]))
    del sample
    gc.collect()
    assert len(refs) == 6 and [r() for r in refs] == [None] * 6


def _calibration_peak(path: str, count: int) -> int:
    rknn = _rknn("normal", 64)
    prepared = rknn._prepare(True, None)  # noqa: SLF001
    tracemalloc.start()
    try:
        samples = builder.calibration_samples(prepared, rknn._config, path, limit=count)  # noqa: SLF001
        quantize.quantize_model(prepared, samples, progress=lambda done, total: None)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_calibration_memory_does_not_grow_with_the_samples(tmp_path) -> None:
    """'normal' keeps no values, so what could grow is the samples alone: 160 samples of
    48 KB (7.7 MB as a list) must peak within 1 MB of 16 samples."""
    rng = np.random.RandomState(0)
    np.save(tmp_path / "x.npy", rng.rand(1, 3, 64, 64).astype(np.float32))
    (tmp_path / "dataset.txt").write_text("x.npy\n" * 160)  # one file, 160 samples read
    small = _calibration_peak(str(tmp_path / "dataset.txt"), 16)
    large = _calibration_peak(str(tmp_path / "dataset.txt"), 160)
    assert large < small + (1 << 20), (small, large)


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_line_endings_and_blank_lines(tmp_path, ending) -> None:
    spec = [datasets.InputSpec("x", (1, 2))]
    for k in range(3):
        np.save(tmp_path / f"a{k}.npy", np.full((1, 2), k, np.float32))
    text = ending.join(["a0.npy", "", "  a1.npy  ", "a2.npy", ""])
    (tmp_path / "ds.txt").write_bytes(text.encode())
    samples = datasets.open_dataset(str(tmp_path / "ds.txt"), spec)
    assert [float(s[0][0, 0]) for s in samples] == [0.0, 1.0, 2.0]
    assert float(samples[1][0][0, 0]) == 1.0  # random access reads the line again
    (tmp_path / "bad.txt").write_bytes(ending.join(["a0.npy", "", "a1.npy a2.npy"]).encode())
    with pytest.raises(ConversionError, match="dataset line 3 has 2 files for 1 inputs"):
        datasets.open_dataset(str(tmp_path / "bad.txt"), spec)  # counted before any read


def test_a_bad_sample_late_in_the_dataset_gives_one_e_line(tmp_path, capfd) -> None:
    path = _write_npy_dataset(str(tmp_path), 5)
    with open(path, "a") as f:
        f.write("missing.npy\n")
    rknn = _rknn("normal")
    assert rknn.build(dataset=path) == -1
    assert "dataset line 7 (" in rknn.last_error and "'missing.npy' not found" in rknn.last_error
    err = capfd.readouterr().err
    e_lines = [line for line in err.splitlines() if line.startswith("E ")]
    assert len(e_lines) == 1 and "dataset line 7" in e_lines[0]


def test_a_generator_is_read_once_even_for_a_batch_fallback(tmp_path) -> None:
    """A generator can be read once only: it is gathered before the batch-1 fallback retries."""
    rng = np.random.RandomState(1)
    arrays = [rng.rand(1, 3, 16, 16).astype(np.float32) for _ in range(4)]
    rknn = _rknn("normal")
    assert rknn.build(dataset=(a for a in arrays), rknn_batch_size=2) == 0, rknn.last_error
    listed = _rknn("normal")
    assert listed.build(dataset=arrays, rknn_batch_size=2) == 0
    assert rknn.model_bytes() == listed.model_bytes()


def test_hybrid_data_file_is_what_np_savez_wrote_and_reads_lazily(tmp_path) -> None:
    rng = np.random.RandomState(2)
    samples = [[rng.rand(1, 3, 4, 4).astype(np.float32), rng.rand(1, 5).astype(np.float32)]
               for _ in range(3)]  # fmt: skip
    hybrid.write_data(str(tmp_path / "m.data"), datasets.as_samples(samples))
    buffer = io.BytesIO()
    np.savez(buffer, **{f"s{k}_i{i}": x for k, s in enumerate(samples) for i, x in enumerate(s)})
    assert (tmp_path / "m.data").read_bytes() == buffer.getvalue()  # the format is unchanged
    read = hybrid.read_data(str(tmp_path / "m.data"), 2)
    assert isinstance(read, datasets.Samples) and len(read) == 3
    for got, want in zip(read, samples):
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    np.save(tmp_path / "plain.npy", samples[0][0])
    with pytest.raises(ConversionError, match="not a .npz archive"):
        hybrid.read_data(str(tmp_path / "plain.npy"), 2)
    with pytest.raises(ConversionError, match="no array 's0_i2'"):
        hybrid.read_data(str(tmp_path / "m.data"), 3)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_hybrid_steps_on_a_streamed_dataset(tmp_path, monkeypatch, algorithm) -> None:
    path = _write_npy_dataset(str(tmp_path), 5)
    monkeypatch.chdir(tmp_path)
    rknn = _rknn(algorithm)
    assert rknn.hybrid_quantization_step1(dataset=path, proposal=True,
                                          proposal_dataset_size=2) == 0  # fmt: skip
    data = hybrid.read_data("tiny_cnn.data", 1)
    for got, want in zip(data, _previous_samples(path), strict=True):
        np.testing.assert_array_equal(got[0], want[0])
    step2 = RKNN()
    assert step2.hybrid_quantization_step2("tiny_cnn.model", "tiny_cnn.data",
                                           "tiny_cnn.quantization.cfg") == 0, step2.last_error
    layers, overrides = hybrid.read_cfg("tiny_cnn.quantization.cfg")
    reference = _rknn(algorithm)
    prepared = reference._prepare(True, None)  # noqa: SLF001
    built = builder.compile_model(prepared, reference._config, "tiny_cnn",  # noqa: SLF001
                                  samples=_previous_samples(path), float_layers=layers,
                                  overrides=overrides)  # fmt: skip
    assert step2.model_bytes() == built.model_bytes
