"""Issue 27 items 2-4: special files are refused wherever a path is read (a FIFO would hang
build() forever), every file the project writes is written atomically, and export_rknn after a
failed build or load never writes the previous build's model."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.lite import RKNNLite
from rknnrt.model import files
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_model

TIMEOUT_S = 60  # every refusal is immediate; this only keeps a regression from hanging CI


def _no_hang(call, *args):
    """call(*args) in a thread; fail (instead of hanging) when it does not return."""
    result: list = []

    def target() -> None:
        try:
            result.append((call(*args), None))
        except Exception as exc:  # re-raised in the caller's thread
            result.append((None, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S)
    assert not thread.is_alive(), f"{call} hung on a FIFO"
    value, error = result[0]
    if error is not None:
        raise error
    return value


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.npy"
    os.mkfifo(path)
    return path


def _build(dataset) -> tuple[int, RKNN]:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", mean_values=[[0, 0, 0]], std_values=[[1, 1, 1]])
    assert rknn.load_onnx(default_model()) == 0
    return rknn.build(do_quantization=True, dataset=dataset), rknn


@pytest.mark.parametrize("name", ["pipe.npy", "pipe.png"])
def test_build_refuses_a_fifo_in_the_dataset(tmp_path, name, capfd) -> None:
    os.mkfifo(tmp_path / name)
    (tmp_path / "dataset.txt").write_text(f"{name}\n")
    rc, rknn = _no_hang(_build, str(tmp_path / "dataset.txt"))
    assert rc == -1 and "FIFO" in rknn.last_error
    assert sum(line.startswith("E build") for line in capfd.readouterr().err.splitlines()) == 1


def test_build_refuses_a_fifo_as_dataset(fifo, capfd) -> None:
    rc, rknn = _no_hang(_build, str(fifo))
    assert rc == -1 and "FIFO" in rknn.last_error


def test_every_reader_refuses_special_files(fifo, tmp_path) -> None:
    rknn = RKNN()
    assert _no_hang(rknn.load_onnx, str(fifo)) == -1 and "FIFO" in rknn.last_error
    assert _no_hang(rknn.load_rknn, str(fifo)) == -1 and "FIFO" in rknn.last_error
    assert _no_hang(rknn.load_rknn, "/dev/zero") == -1 and "device" in rknn.last_error
    assert _no_hang(RKNNLite().load_rknn, str(fifo)) == -1
    assert _no_hang(RKNNLite().load_rknn, str(tmp_path)) == -1
    ctx = rk.rknn_context()
    assert _no_hang(rk.rknn_init, ctypes.byref(ctx), str(fifo), 0, 0, None) == (
        rk.RKNN_ERR_PARAM_INVALID
    )
    with pytest.raises(files.NotRegularFile, match="a folder"):
        files.read_bytes(tmp_path)
    from rknnrt.evaluation.data import DatasetError, read_labels
    from rknnrt.toolkit import hybrid
    from rknnrt.toolkit.errors import ConversionError

    with pytest.raises(DatasetError, match="FIFO"):
        _no_hang(read_labels, str(fifo))
    with pytest.raises(ConversionError, match="FIFO"):
        _no_hang(hybrid.read_data, str(fifo), 1)


def test_accuracy_analysis_refuses_a_fifo_input(tmp_path, fifo) -> None:
    rc, rknn = _build([np.zeros((1, 3, 64, 64), np.float32)])
    assert rc == 0, rknn.last_error
    rc = _no_hang(rknn.accuracy_analysis, [str(fifo)], str(tmp_path / "snapshot"))
    assert rc == -1 and "FIFO" in rknn.last_error


def test_write_atomic_keeps_the_previous_file_when_writing_fails(tmp_path, monkeypatch) -> None:
    target = tmp_path / "model.rknn"
    target.write_bytes(b"previous")

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        files.write_atomic(target, b"new model")
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.rknn"]  # no temporary left
    monkeypatch.undo()
    files.write_atomic(target, b"new model")
    assert target.read_bytes() == b"new model"
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_export_failure_keeps_the_previous_model(tmp_path, monkeypatch) -> None:
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    assert rknn.load_onnx(default_model()) == 0 and rknn.build(do_quantization=False) == 0
    target = tmp_path / "model.rknn"
    assert rknn.export_rknn(str(target)) == 0
    before = target.read_bytes()
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
    assert rknn.export_rknn(str(target)) == -1
    assert target.read_bytes() == before  # whole, not truncated
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), str(target), 0, 0, None) == rk.RKNN_SUCC
    rk.rknn_destroy(ctx)


def test_a_killed_export_never_leaves_an_empty_file(tmp_path) -> None:
    """SIGKILL in the middle of writing: the target is the old file or the new one, whole."""
    target = tmp_path / "model.rknn"
    target.write_bytes(b"old" * 1000)
    script = (
        "import os, signal, sys\n"
        "from rknnrt.model import files\n"
        "real = os.fsync\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"files.write_atomic({str(target)!r}, b'new' * 100000)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", script], cwd=root, timeout=60)
    assert proc.returncode == -9
    assert target.read_bytes() == b"old" * 1000


def test_export_after_a_failed_build_or_load_fails(tmp_path, capfd) -> None:
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    assert rknn.load_onnx(default_model()) == 0 and rknn.build(do_quantization=False) == 0
    assert rknn.build(do_quantization=True, dataset=str(tmp_path / "missing.txt")) == -1
    capfd.readouterr()
    target = tmp_path / "int8.rknn"
    assert rknn.export_rknn(str(target)) == -1 and not target.exists()
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("E export_rknn")
    assert rknn.build(do_quantization=False) == 0  # the loaded model stays for a new build
    assert rknn.export_rknn(str(target)) == 0
    assert rknn.load_onnx(str(tmp_path / "missing.onnx")) == -1
    assert rknn.export_rknn(str(tmp_path / "other.rknn")) == -1
    assert rknn.build(do_quantization=False) == -1  # nothing loaded


def test_no_plain_writes_remain() -> None:
    """Every file the package writes goes through files.write_atomic (or is marked as a file of
    the process's own build folder, "# atomic: ..."): no open(..., "w"/"wb"), write_bytes,
    write_text, tofile, np.save or onnx.save in rknnrt/ (model/files.py itself aside)."""
    import re

    root = Path(rk.__file__).resolve().parent
    pattern = re.compile(  # saves into an in-memory buffer (then write_atomic) are fine
        r"""open\(.*["'](w|wb|a|ab|w\+|x|xb)["']|\.write_bytes\(|\.write_text\(|\.tofile\("""
        r"""|onnx\.save\(|\.save[z]?(txt)?\((?!encoded|buffer|npy|text)"""
    )
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "files.py"
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line) and "# atomic:" not in line]  # fmt: skip
    assert not found, found
