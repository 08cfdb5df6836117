"""The library itself: exports, struct layouts and constants against the Python API and the
facts table, error paths, C++ and dlopen hosts, Python hosts, start-up failures, SDK files."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rknnrt as rk
from rknnrt.capi import build
from rknnrt.capi.signatures import functions

from .conftest import CLEAN_PATH, board_env

# rknn_api_facts.md §1: LP64 sizes and offsets measured with gcc on the vendor's V2.3.2 headers.
FACTS = {
    "rknn_input_output_num": (8, {"n_input": 0, "n_output": 4}),
    "rknn_tensor_attr": (
        376,
        {
            "index": 0,
            "n_dims": 4,
            "dims": 8,
            "name": 72,
            "n_elems": 328,
            "size": 332,
            "fmt": 336,
            "type": 340,
            "qnt_type": 344,
            "fl": 348,
            "zp": 352,
            "scale": 356,
            "w_stride": 360,
            "size_with_stride": 364,
            "pass_through": 368,
            "h_stride": 372,
        },
    ),
    "rknn_input_range": (
        33040,
        {"index": 0, "shape_number": 4, "fmt": 8, "name": 12, "dyn_range": 268, "n_dims": 33036},
    ),
    "rknn_perf_detail": (16, {"perf_data": 0, "data_len": 8}),
    "rknn_perf_run": (8, {"run_duration": 0}),
    "rknn_sdk_version": (512, {"api_version": 0, "drv_version": 256}),
    "rknn_mem_size": (
        64,
        {
            "total_weight_size": 0,
            "total_internal_size": 4,
            "total_dma_allocated_size": 8,
            "total_sram_size": 16,
            "free_sram_size": 20,
            "reserved": 24,
        },
    ),
    "rknn_custom_string": (1024, {"string": 0}),
    "rknn_tensor_mem": (
        40,
        {
            "virt_addr": 0,
            "phys_addr": 8,
            "fd": 16,
            "offset": 20,
            "size": 24,
            "flags": 28,
            "priv_data": 32,
        },
    ),
    "rknn_input": (
        32,
        {"index": 0, "buf": 8, "size": 16, "pass_through": 20, "type": 24, "fmt": 28},
    ),
    "rknn_output": (24, {"want_float": 0, "is_prealloc": 1, "index": 4, "buf": 8, "size": 16}),
    "rknn_init_extend": (
        136,
        {
            "ctx": 0,
            "real_model_offset": 8,
            "real_model_size": 12,
            "model_buffer_fd": 16,
            "model_buffer_flags": 20,
            "reserved": 24,
        },
    ),
    "rknn_run_extend": (24, {"frame_id": 0, "non_block": 8, "timeout_ms": 12, "fence_fd": 16}),
    "rknn_output_extend": (8, {"frame_id": 0}),
    "rknn_quant_params": (
        288,
        {"name": 0, "scale": 256, "scale_len": 264, "zp": 272, "zp_len": 280},
    ),
    "rknn_matmul_tensor_attr": (
        332,
        {"name": 0, "n_dims": 256, "dims": 260, "size": 324, "type": 328},
    ),
    "rknn_matmul_io_attr": (996, {"A": 0, "B": 332, "C": 664}),
    "rknn_matmul_shape": (12, {"M": 0, "K": 4, "N": 8}),
    "rknn_matmul_info": (
        64,
        {
            "M": 0,
            "K": 4,
            "N": 8,
            "type": 12,
            "B_layout": 16,
            "B_quant_type": 18,
            "AC_layout": 20,
            "AC_quant_type": 22,
            "iommu_domain_id": 24,
            "group_size": 28,
            "reserved": 30,
        },
    ),
    "rknn_gpu_op_context": (24, {"cl_context": 0, "cl_command_queue": 8, "cl_kernel": 16}),
    "rknn_custom_op_context": (
        48,
        {"target": 0, "internal_ctx": 8, "gpu_ctx": 16, "priv_data": 40},
    ),
    "rknn_custom_op_tensor": (416, {"attr": 0, "mem": 376}),
    "rknn_custom_op_attr": (272, {"name": 0, "dtype": 256, "n_elems": 260, "data": 264}),
    "rknn_custom_op": (
        832,
        {
            "version": 0,
            "target": 4,
            "op_type": 8,
            "cl_kernel_name": 264,
            "cl_kernel_source": 520,
            "cl_source_size": 528,
            "cl_build_options": 536,
            "init": 792,
            "prepare": 800,
            "compute": 808,
            "compute_native": 816,
            "destroy": 824,
        },
    ),
}


def test_struct_layouts_equal_python_structs_and_facts(programs):
    out = programs.run("sizes.c").stdout
    sizes = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+) (\d+)$", out, re.M)}
    offsets = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+\.\w+) (\d+)$", out, re.M)}
    for name, (size, fields) in FACTS.items():
        py = getattr(rk, name)
        assert sizes[name] == size == ctypes.sizeof(py), name
        assert [f[0] for f in py._fields_] == list(fields), name  # same fields, same order
        for field, offset in fields.items():
            assert offsets[f"{name}.{field}"] == offset == getattr(py, field).offset, field
    for scalar in ("rknn_context", "rknn_matmul_ctx", "rknn_custom_op_interal_context"):
        assert sizes[scalar] == 8
    for enum in ("rknn_query_cmd", "rknn_tensor_type", "rknn_core_mask", "rknn_matmul_type"):
        assert sizes[enum] == 4


def test_constants_equal_python_constants(programs):
    out = programs.run("sizes.c").stdout
    constants = {m[1]: int(m[2]) for m in re.finditer(r"^const (\w+) (-?\d+)$", out, re.M)}
    python = {n for n in dir(rk) if n.startswith("RKNN_") and isinstance(getattr(rk, n), int)}
    assert set(constants) == python  # every constant of the Python API, and no other
    for name, value in constants.items():
        assert getattr(rk, name) == value, name
    assert constants["RKNN_NPU_CORE_UNDEFINED"] == 0x10000
    assert "string type BF16 AFFINE NC1HWC2 UNKNOW" in out  # vendor helpers, 15 has no case


def test_exports_are_exactly_the_headers_functions(sdk):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("binutils nm is not installed")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(sdk / "lib/librknnrt.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[1] in "TtDdBbVvWi"}
    assert exported == {f.name for f in functions()}
    assert len(functions()) == 35
    readelf = subprocess.run(
        ["readelf", "-d", str(sdk / "lib/librknnrt.so")], capture_output=True, text=True
    ).stdout
    assert "Library soname: [librknnrt.so]" in readelf


def test_error_paths_return_codes_with_one_line_each(programs, files):
    done = programs.run("errors.c", files["model"])
    assert "ALL OK" in done.stdout
    expected = int(re.search(r"expected_errors (\d+)", done.stdout)[1])
    errors = [line for line in done.stderr.splitlines() if line.startswith("E RKNN:")]
    assert len(errors) == expected, done.stderr
    assert "Traceback" not in done.stderr
    assert any("rknn_create_mem_from_mb_blk: not supported" in e for e in errors)


@pytest.mark.slow  # a C++ build and a host; test_headers_compile_as_strict_c99 is the fast one
def test_cxx_translation_unit(programs, files):
    done = programs.run("cxx_unit.cpp", files["model"])
    assert re.search(r"cxx io 1 1 output probs n_elems 10 sum 1\.0000 C C", done.stdout), (
        done.stdout
    )


def test_headers_compile_as_strict_c99(tmp_path, sdk):
    source = tmp_path / "all.c"
    source.write_text(
        '#include "rknn_api.h"\n#include "rknn_matmul_api.h"\n'
        '#include "rknn_custom_op.h"\nint main(void) { return RKNN_SUCC; }\n'
    )
    done = subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-strict-prototypes",
            "-I",
            str(sdk / "include"),
            "-c",
            str(source),
            "-o",
            str(tmp_path / "all.o"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # a dlopen host process; the fast suite loads the library in-process
def test_dlopen_rtld_local_host(programs, sdk, files):
    programs.build("dlopen_host.c", link=False)
    done = programs.run("dlopen_host.c", sdk / "lib/librknnrt.so", files["model"])
    assert "dlopen io 1 1 weights 15232" in done.stdout


def _python_host(
    python: str, sdk: Path, model: Path, timeout: float = 60
) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import ctypes, sys
        lib = ctypes.CDLL({str(sdk / "lib/librknnrt.so")!r})
        ctx = ctypes.c_uint64()
        ret = lib.rknn_init(ctypes.byref(ctx), {str(model).encode()!r}, 0, 0, None)
        print("init", ret, flush=True)
        if ret == 0:
            import rknnrt as rk  # the host's own rknnrt sees the context the library made
            num = rk.rknn_input_output_num()
            print("python query", rk.rknn_query(ctx.value, rk.RKNN_QUERY_IN_OUT_NUM, num, 8),
                  num.n_input, num.n_output, "embedded" if "_rknnrt_capi" in sys.modules else "")
    """)
    return subprocess.run(
        [python, "-c", script], capture_output=True, text=True, timeout=timeout, env=board_env(sdk)
    )


def test_python_host_uses_its_own_interpreter(sdk, files):
    done = _python_host(sys.executable, sdk, files["model"])
    assert "init 0" in done.stdout, done.stderr
    assert "python query 0 1 1 embedded" in done.stdout, done.stdout + done.stderr


def test_python_host_of_another_minor_version_is_refused(sdk, files):
    other = [f"python3.{m}" for m in (12, 13, 10) if m != sys.version_info[1]]
    found = [
        p
        for name in other
        for p in [_pyenv(name) or shutil.which(name)]
        if p and "/shims/" not in p
    ]
    if not found:
        pytest.skip("no Python of another minor version on this machine")
    done = _python_host(found[0], sdk, files["model"], timeout=30)  # a hang fails here
    assert "init -1" in done.stdout, done.stdout + done.stderr
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 1 and "was built for Python" in errors[0], done.stderr


def _pyenv(name: str) -> str | None:
    root = Path.home() / ".pyenv" / "versions"
    hits = sorted(root.glob(f"{name.replace('python', '')}.*/bin/{name}")) if root.exists() else []
    return str(hits[0]) if hits else None


def test_failed_interpreter_start_never_returns_success(programs, files, tmp_path, sdk):
    # the stdlib cannot be found: Python does not start
    done = programs.run("errors.c", files["model"], expect=1, PYTHONHOME=str(tmp_path))
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert errors and "rknn_init: starting Python" in errors[0], done.stderr
    assert "returned -1, expected -5" in done.stderr  # the first call failed, never 0
    # Python starts but the package cannot load (a broken numpy shadows the real one)
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("raise ImportError('broken numpy')\n")
    done = programs.run("errors.c", files["model"], expect=1, PYTHONPATH=str(tmp_path))
    errors = [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 1 and "failed to load" in errors[0], done.stderr
    assert "broken numpy" in done.stderr and "returned -1, expected -5" in done.stderr


def test_sdk_files_for_pkg_config_and_cmake(sdk, tmp_path, files):
    pc = (sdk / "lib/pkgconfig/rknnrt.pc").read_text()
    assert f"prefix={sdk}" in pc and "-lrknnrt" in pc and "Version: 2.5.0" in pc
    from rknnrt.capi.rga_build import RGA_HEADERS

    assert {p.name for p in (sdk / "include").iterdir()} == {
        "rknn_api.h",
        "rknn_matmul_api.h",
        "rknn_custom_op.h",
        *RGA_HEADERS,  # the librga stand-in's (test_capi_rga.py)
    }
    if shutil.which("pkg-config"):
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "rknnrt"],
            capture_output=True,
            text=True,
            env={"PKG_CONFIG_PATH": str(sdk / "lib/pkgconfig"), "PATH": CLEAN_PATH},
        ).stdout.split()
        assert f"-I{sdk}/include" in flags and "-lrknnrt" in flags
    config = (sdk / "lib/cmake/rknnrt/rknnrtConfig.cmake").read_text()
    for name in ("rknnrt::rknnrt", "RKNN_RT_LIB", "RKNN_API_PATH", "RKNN_API_INCLUDE_PATH"):
        assert name in config


@pytest.mark.slow
def test_cmake_find_package_builds_and_runs(sdk, tmp_path, files):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    src = tmp_path / "app"
    src.mkdir()
    shutil.copy(Path(__file__).parent / "c" / "cxx_unit.cpp", src / "main.cpp")
    (src / "CMakeLists.txt").write_text(
        textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.13)
        project(app CXX)
        find_package(rknnrt 2.5 REQUIRED)
        add_executable(app main.cpp)
        target_link_libraries(app PRIVATE rknnrt::rknnrt)
        add_executable(app_vendor_style main.cpp)  # as vendor demos do it, by variables
        target_include_directories(app_vendor_style PRIVATE ${RKNN_API_INCLUDE_PATH})
        target_link_libraries(app_vendor_style ${RKNN_RT_LIB})
    """)
    )
    build_dir = tmp_path / "build"
    for command in (
        ["cmake", "-S", str(src), "-B", str(build_dir), f"-DCMAKE_PREFIX_PATH={sdk}"],
        ["cmake", "--build", str(build_dir)],
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    for exe in ("app", "app_vendor_style"):
        done = subprocess.run(
            [str(build_dir / exe), str(files["model"])],
            capture_output=True,
            text=True,
            env=board_env(sdk),
        )
        assert done.returncode == 0 and "cxx io 1 1" in done.stdout, done.stderr


def test_missing_requirements_are_named_with_the_fix(monkeypatch, capsys, tmp_path):
    from rknnrt.cli import main

    monkeypatch.setattr(build, "compiler", lambda: None)
    monkeypatch.setattr(build, "_libpython", lambda: None)
    assert main(["sdk", "--out", str(tmp_path / "sdk")]) == 1
    err = capsys.readouterr().err
    assert "a C compiler: e.g. sudo apt install gcc" in err
    assert "shared libpython" in err and "--enable-shared" in err
    assert not (tmp_path / "sdk").exists()


@pytest.mark.slow
def test_installed_package_in_another_environment(tmp_path, files):
    """rknnrt installed in a venv (as pip lays it out), `rknnrt sdk` run there: the C program,
    started with no PATH, PYTHONPATH or venv, runs that venv's interpreter and package."""
    import numpy

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    minor = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = venv / "lib" / minor / "site-packages"
    shutil.copytree(
        Path(rk.__file__).parent, site / "rknnrt", ignore=shutil.ignore_patterns("__pycache__")
    )
    (site / "deps.pth").write_text(f"{Path(numpy.__file__).parent.parent}\n")  # numpy, ort, cffi
    (site / "zz_mark.pth").write_text(
        "import os, sys; m = os.environ.get('RKNNRT_TEST_MARK'); "
        "m and open(m, 'w').write(sys.prefix + ' ' + sys.executable)\n"
    )
    env = {"PATH": CLEAN_PATH, "HOME": str(tmp_path), "RKNNRT_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "rknnrt.cli", "sdk", "--out", str(tmp_path / "sdk")],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sdk = tmp_path / "sdk"
    app = tmp_path / "app"
    source = Path(__file__).parent / "c" / "cxx_unit.cpp"
    subprocess.run(["g++", "-std=c++11", "-I", str(sdk / "include"), str(source), "-o", str(app),
                    "-L", str(sdk / "lib"), "-lrknnrt"], check=True)  # fmt: skip
    mark = tmp_path / "mark"
    board = {"LD_LIBRARY_PATH": str(sdk / "lib"), "RKNNRT_TEST_MARK": str(mark)}  # env -i
    run = subprocess.run([str(app), str(files["model"])], capture_output=True, text=True, env=board)
    assert run.returncode == 0 and "cxx io 1 1" in run.stdout, run.stderr
    assert mark.read_text() == f"{venv} {venv}/bin/python"


@pytest.mark.slow  # C host processes; test_error_paths_return_codes_with_one_line_each is fast
def test_four_threads_racing_the_first_call(programs, files):
    for _ in range(2):
        done = programs.run("first_call_race.c", files["model"])
        assert "results 0 -7 0 -7" in done.stdout, done.stdout + done.stderr
        assert done.stderr.count("E RKNN:") == 2  # the two calls on context 0


def test_unwritable_cache_is_explained(monkeypatch, capsys, tmp_path):
    from rknnrt.cli import main

    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should be
    monkeypatch.setenv("RKNNRT_CACHE_DIR", str(blocked / "cache"))
    assert main(["sdk", "--rebuild", "--out", str(tmp_path / "sdk")]) == 1
    assert "set RKNNRT_CACHE_DIR to a writable folder" in capsys.readouterr().err
