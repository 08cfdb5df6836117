"""`rknnrt sdk` writes librga beside librknnrt (pkg-config, CMake) and the vendor projects'
layouts (`--layout zoo|rknpu2`), with the libraries where those CMake files look."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rknnrt.capi.sdk import write_sdk

EXPORTED = {  # what the demos and the zoo's utils call (C names; C++ overloads are mangled)
    "wrapbuffer_virtualaddr_t", "wrapbuffer_fd_t", "wrapbuffer_handle_t", "importbuffer_fd",
    "importbuffer_virtualaddr", "importbuffer_physicaladdr", "releasebuffer_handle", "imcheck_t",
    "imresize_t", "imcvtcolor_t", "imcopy_t", "imcrop_t", "imtranslate_t", "imrectangle_t",
    "imfill_t", "imflip_t", "imrotate_t", "improcess", "imStrError_t", "querystring",
    "c_RkRgaInit", "c_RkRgaBlit", "c_RkRgaColorFill", "get_bpp_from_format",
}  # fmt: skip


def symbols(library: Path) -> set[str]:
    done = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return {line.split()[-1] for line in done.stdout.splitlines()}


def test_sdk_has_librga_with_the_demo_calls(sdk):
    names = symbols(sdk / "lib" / "librga.so")
    assert EXPORTED <= names
    assert "_Z8imresize12rga_buffer_tS_ddiiPi" in names  # imresize(src, dst, fx, fy, ...) in C++
    assert not {n for n in names if n.startswith("rga_")} - {"rga_check_perpare"}  # no internals
    assert (sdk / "lib" / "librga.a").stat().st_size > 0
    pc = (sdk / "lib/pkgconfig/librga.pc").read_text()
    assert "Libs: -L${libdir} -lrga" in pc and f"prefix={sdk}" in pc
    assert (
        "add_library(${_rga_target} SHARED IMPORTED)"
        in (sdk / "lib/cmake/rga/rgaConfig.cmake").read_text()
    )
    for header in ("im2d.h", "im2d.hpp", "rga.h", "RgaApi.h", "RgaUtils.h", "drmrga.h"):
        assert (sdk / "include" / header).exists()


def test_zoo_and_rknpu2_layouts(tmp_path):
    zoo = write_sdk(tmp_path / "zoo" / "3rdparty", layout="zoo")
    for path in ("rknpu2/include/rknn_api.h", "rknpu2/Linux/aarch64/librknnrt.so",
                 "librga/include/im2d.h", "librga/Linux/aarch64/librga.a",
                 "librga/Linux/aarch64/librga.so"):  # fmt: skip
        assert (zoo / path).is_file(), path
    rknpu2 = write_sdk(tmp_path / "rknpu2", layout="rknpu2")
    for arch in ("aarch64", "armhf"):
        assert (rknpu2 / f"runtime/Linux/librknn_api/{arch}/librknnrt.so").is_file()
        assert (rknpu2 / f"examples/3rdparty/rga/libs/Linux/gcc-{arch}/librga.so").is_file()
    assert (rknpu2 / "runtime/Linux/librknn_api/include/rknn_matmul_api.h").is_file()
    assert (rknpu2 / "examples/3rdparty/rga/include/im2d.hpp").is_file()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_project_linking_rga_configures_and_runs(sdk, tmp_path):
    """An unchanged `target_link_libraries(app rga)` project finds the SDK's package."""
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.10)\nproject(app C)\nfind_package(rga REQUIRED)\n"
        "add_executable(app main.c)\ntarget_link_libraries(app rga)\n"
    )
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "im2d.h"\nint main(void) {\n'
        "    unsigned char a[16 * 16 * 3] = {0}, b[8 * 8 * 3];\n"
        "    rga_buffer_t s = wrapbuffer_virtualaddr(a, 16, 16, RK_FORMAT_RGB_888);\n"
        "    rga_buffer_t d = wrapbuffer_virtualaddr(b, 8, 8, RK_FORMAT_RGB_888);\n"
        '    printf("%d\\n", (int)imresize(s, d));\n    return 0;\n}\n'
    )
    build = tmp_path / "build"
    for command in (["cmake", "-S", str(tmp_path), "-B", str(build),
                     f"-DCMAKE_PREFIX_PATH={sdk}"], ["cmake", "--build", str(build)]):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([str(build / "app")], capture_output=True, text=True,
                          env={"LD_LIBRARY_PATH": str(sdk / "lib")})  # fmt: skip
    assert done.stdout.strip() == "1", done.stderr
