"""The folder layouts `rknnrt sdk --layout` writes besides its own (docs/c-library.md):

- `zoo`: DIR is an rknn_model_zoo checkout's `3rdparty/` folder, laid out as the zoo's CMake
  expects it (`rknpu2/include`, `rknpu2/Linux/aarch64/librknnrt.so`, `librga/include`,
  `librga/Linux/aarch64/librga.a` and `.so`). On a 64-bit PC the zoo's CMake picks `aarch64`
  (it tests the pointer size only), so the x86-64 libraries go there.
- `rknpu2`: DIR is rknn-toolkit2's `rknpu2/` folder, laid out as its examples' CMake expects
  (`runtime/Linux/librknn_api/{include,aarch64,armhf}`, `examples/3rdparty/rga/{include,
  libs/Linux/gcc-aarch64,gcc-armhf}`); the examples pick `armhf` for any compiler whose name
  lacks "aarch64", so both folders get the x86-64 libraries.
"""

from __future__ import annotations

import shutil
from pathlib import Path

LAYOUTS = ("sdk", "zoo", "rknpu2")


def _copy(src: Path, dst: Path, mode: int = 0o644) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    staged = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, staged)
    staged.chmod(mode)
    staged.replace(dst)  # a running program keeps its mapped old copy


def _headers(folder: Path, headers: list[Path]) -> None:
    for header in headers:
        _copy(header, folder / header.name)


def write_layout(
    layout: str, root: Path, rknn_headers: list[Path], rknnrt_lib: Path, rga_headers: list[Path],
    rga_shared: Path, rga_static: Path,
) -> list[Path]:  # fmt: skip
    """Write `layout` under `root`; returns the folders written (for the command's summary)."""
    if layout == "zoo":
        rknpu2, librga = root / "rknpu2", root / "librga"
        _headers(rknpu2 / "include", rknn_headers)
        _copy(rknnrt_lib, rknpu2 / "Linux" / "aarch64" / rknnrt_lib.name, 0o755)
        _headers(librga / "include", rga_headers)
        _copy(rga_static, librga / "Linux" / "aarch64" / rga_static.name)
        _copy(rga_shared, librga / "Linux" / "aarch64" / rga_shared.name, 0o755)
        return [rknpu2, librga]
    if layout == "rknpu2":
        api, rga = (
            root / "runtime" / "Linux" / "librknn_api",
            root / "examples" / "3rdparty" / "rga",
        )
        _headers(api / "include", rknn_headers)
        _headers(rga / "include", rga_headers)
        for arch in ("aarch64", "armhf"):
            _copy(rknnrt_lib, api / arch / rknnrt_lib.name, 0o755)
            _copy(rga_shared, rga / "libs" / "Linux" / f"gcc-{arch}" / rga_shared.name, 0o755)
            _copy(rga_static, rga / "libs" / "Linux" / f"gcc-{arch}" / rga_static.name)
        return [api, rga]
    raise ValueError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
