"""C tests: the SDK is built once per session (`rknnrt sdk` into a temporary folder), each C
program is compiled with the system compiler against it, and runs as a board application
would: LD_LIBRARY_PATH=DIR/lib, a PATH with no virtual environment in it, no PYTHONPATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rknnrt.capi.build import missing_requirements
from rknnrt.capi.sdk import write_sdk

C_DIR = Path(__file__).parent / "c"
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"  # no venv, no pyenv shims
_MISSING = missing_requirements()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if _MISSING:
        skip = pytest.mark.skip(reason="cannot build librknnrt.so here: " + "; ".join(_MISSING))
        for item in items:
            if Path(str(item.fspath)).parent == Path(__file__).parent:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sdk(tmp_path_factory.mktemp("sdk"))


def board_env(sdk: Path, **extra: str) -> dict[str, str]:
    """The environment of a board application: only what a C program needs."""
    env = {
        "PATH": CLEAN_PATH,
        "LD_LIBRARY_PATH": str(sdk / "lib"),
        "HOME": os.environ.get("HOME", "/"),
    }
    for key in ("RKNNRT_KEEP_PRIORITY", "TMPDIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra)
    return env


class Programs:
    """Compiles tests/capi/c/<name> once per session; runs the binaries in a board environment."""

    def __init__(self, sdk: Path, out: Path) -> None:
        self.sdk, self.out, self.built = sdk, out, {}

    def build(self, source: str, *flags: str, link: bool = True) -> Path:
        if source in self.built:
            return self.built[source]
        cxx = source.endswith(".cpp")
        compiler = shutil.which("g++" if cxx else "gcc") or shutil.which("c++" if cxx else "cc")
        assert compiler, "no C/C++ compiler"
        binary = self.out / Path(source).stem
        std = ["-std=c++11"] if cxx else ["-std=c99", "-D_GNU_SOURCE"]
        command = [
            compiler,
            *std,
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
            str(self.sdk / "include"),
            "-I",
            str(C_DIR),
            str(C_DIR / source),
            "-o",
            str(binary),
            *flags,
        ]
        if link:
            command += ["-L", str(self.sdk / "lib"), "-lrknnrt"]
        command += ["-lpthread", "-ldl", "-lm"]
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
        self.built[source] = binary
        return binary

    def run(
        self,
        source: str,
        *args: str,
        expect: int = 0,
        timeout: float = 60,
        env: dict[str, str] | None = None,
        **extra_env: str,
    ) -> subprocess.CompletedProcess:
        binary = self.build(source)
        done = subprocess.run(
            [str(binary), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env or board_env(self.sdk, **extra_env),
        )
        assert done.returncode == expect, (
            f"{source} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
        return done


@pytest.fixture(scope="session")
def programs(sdk: Path, tmp_path_factory: pytest.TempPathFactory) -> Programs:
    return Programs(sdk, tmp_path_factory.mktemp("bin"))


def _second_model(convert: Callable[..., bytes]) -> bytes:
    """Conv 3->8 -> Relu -> GlobalAveragePool -> Flatten: other weights, other internal size."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(7)
    nodes = [
        helper.make_node("Conv", ["images", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "second",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8])],
        [
            numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32), "w"),
            numpy_helper.from_array(rng.randn(8).astype(np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return convert(model, mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]])


@pytest.fixture(scope="session")
def files(
    tmp_path_factory: pytest.TempPathFactory, default_model_bytes: bytes, default_onnx, convert
) -> dict[str, Path]:
    """Model and input files the C programs read."""
    from rknnrt.toolkit.samples import default_input
    from tests.conftest import DEFAULT_CONFIG  # the default model's conversion

    folder = tmp_path_factory.mktemp("files")
    paths = {name: folder / f"{name}.rknnrt" for name in ("model", "second", "weightless")}
    paths["image"] = folder / "image.u8"
    paths["model"].write_bytes(default_model_bytes)
    paths["second"].write_bytes(_second_model(convert))
    paths["weightless"].write_bytes(convert(default_onnx, **DEFAULT_CONFIG, remove_weight=True))
    paths["image"].write_bytes(np.ascontiguousarray(default_input(seed=11)).tobytes())
    return paths


def parse_floats(stdout: str) -> dict[str, np.ndarray]:
    """Lines `label v0 v1 ...` printed by rt_print_floats."""
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 1:
            try:
                found[parts[0]] = np.array([float(v) for v in parts[1:]], np.float32)
            except ValueError:
                continue
    return found


@pytest.fixture(scope="session")
def floats() -> Callable[[str], dict[str, np.ndarray]]:
    return parse_floats
