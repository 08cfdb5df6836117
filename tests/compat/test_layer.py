"""`rknnrt compat`: the forwarding modules import as the vendor's names, uninstall leaves the
site directory exactly as it was, and the vendor's own packages are never shadowed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from rknnrt import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = """
import rknnrt.lite, rknnrt.toolkit, rknnrt.toolkit.custom_ops, rknnrt.toolkit.onnx_edit
from rknn.api import RKNN
from rknn.api.custom_op import get_node_attr
from rknn.utils import onnx_edit
from rknnlite.api import RKNNLite
assert RKNN is rknnrt.toolkit.RKNN and RKNNLite is rknnrt.lite.RKNNLite
assert get_node_attr is rknnrt.toolkit.custom_ops.get_node_attr
assert onnx_edit is rknnrt.toolkit.onnx_edit.onnx_edit
print(RKNN.__module__, RKNNLite.__module__)
"""


def _tree(folder: str) -> dict[str, str]:
    """Every file and directory under `folder` with its content's digest."""
    out = {}
    for base, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(base, d), folder) + "/"] = ""
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys):
    """`rknnrt compat ...` in this process (the CLI's own code path, without the start-up)."""

    def run(*args: str) -> Done:
        code = cli.main(["compat", *args])
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return run


def _cli(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([python, "-m", "rknnrt.cli", "compat", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def _import_check(site: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, ROOT]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-code is what uninstall must clean up too
    return subprocess.run([python, "-c", CHECK], cwd=site, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_install_import_uninstall_leaves_the_directory_as_it_was(tmp_path, run_cli) -> None:
    site = tmp_path / "site"
    (site / "other").mkdir(parents=True)
    (site / "other" / "keep.py").write_text("x = 1\n")
    (site / "rknnrt_notes.txt").write_text("unrelated\n")
    before = _tree(str(site))
    nothing = subprocess.run(
        [sys.executable, "-c", "import rknn"],
        cwd=str(site),
        env=dict(os.environ, PYTHONPATH=str(site)),
        capture_output=True,
    )
    assert nothing.returncode != 0  # nothing named rknn before

    done = run_cli("install", "--target", str(site))
    assert done.returncode == 0, done.stderr
    assert "installed rknn.api, rknn.api.custom_op, rknn.utils, rknnlite.api" in done.stdout
    ran = _import_check(str(site))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["rknnrt.toolkit.rknn", "rknnrt.lite"]
    assert any("__pycache__" in p for p in _tree(str(site)))  # importing compiled them
    state = run_cli("status", "--target", str(site))
    assert state.returncode == 0 and "compat: active in" in state.stdout
    assert run_cli("install", "--target", str(site)).stdout.startswith("I compat: already")

    done = run_cli("uninstall", "--target", str(site))
    assert done.returncode == 0 and "removed 6 files" in done.stdout, done.stdout + done.stderr
    assert _tree(str(site)) == before
    assert "not installed" in run_cli("status", "--target", str(site)).stdout
    assert "not installed" in run_cli("uninstall", "--target", str(site)).stdout


def test_refuses_where_the_vendor_package_is_installed(tmp_path, run_cli) -> None:
    info = tmp_path / "rknn_toolkit2-2.3.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rknn-toolkit2\nVersion: 2.3.2\n")
    before = _tree(str(tmp_path))
    done = run_cli("install", "--target", str(tmp_path))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("E compat: the vendor's rknn-toolkit2 2.3.2")
    assert _tree(str(tmp_path)) == before
    assert "the vendor's rknn-toolkit2 2.3.2 (" in run_cli(
        "status", "--target", str(tmp_path)).stdout  # fmt: skip


def test_refuses_over_an_existing_package_of_that_name(tmp_path, run_cli) -> None:
    (tmp_path / "rknnlite").mkdir()
    (tmp_path / "rknnlite" / "__init__.py").write_text("")
    before = _tree(str(tmp_path))
    done = run_cli("install", "--target", str(tmp_path))
    assert done.returncode == 1 and "rknnlite exists and was not written by" in done.stderr
    assert _tree(str(tmp_path)) == before


def test_a_changed_file_is_kept_and_named(tmp_path, run_cli) -> None:
    assert run_cli("install", "--target", str(tmp_path)).returncode == 0
    (tmp_path / "rknn" / "api" / "__init__.py").write_text("# mine now\n")
    done = run_cli("uninstall", "--target", str(tmp_path))
    assert done.returncode == 0 and "kept (changed since install): rknn/api/__init__.py" in \
        done.stderr  # fmt: skip
    assert sorted(_tree(str(tmp_path))) == ["rknn/", "rknn/api/", "rknn/api/__init__.py"]


@pytest.mark.slow
def test_a_virtual_environment_is_left_as_it_was(tmp_path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)  # fmt: skip
    python = str(venv / "bin" / "python")
    before = _tree(str(venv))
    done = _cli("install", python=python)
    assert done.returncode == 0, done.stderr
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()
    assert site.startswith(str(venv)) and os.path.isfile(os.path.join(site, "rknn/api/__init__.py"))
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    ran = subprocess.run([python, "-c", CHECK], cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert _cli("uninstall", python=python).returncode == 0
    assert _tree(str(venv)) == before
