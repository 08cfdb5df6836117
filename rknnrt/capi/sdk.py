"""`rknnrt sdk`: an SDK folder laid out as users lay out the vendor's runtime.

    DIR/include/rknn_api.h, rknn_matmul_api.h, rknn_custom_op.h
    DIR/lib/librknnrt.so                      (SONAME librknnrt.so)
    DIR/lib/pkgconfig/rknnrt.pc               (pkg-config --cflags --libs rknnrt)
    DIR/lib/cmake/rknnrt/rknnrtConfig.cmake   (find_package(rknnrt) -> rknnrt::rknnrt,
                                               RKNN_RT_LIB, RKNN_API_PATH, RKNN_API_INCLUDE_PATH)
    DIR/include/im2d.h, im2d.hpp, rga.h, RgaApi.h, ... and DIR/lib/librga.so, librga.a: the CPU
        stand-in for Rockchip's RGA library (pkgconfig/librga.pc, cmake/rga/rgaConfig.cmake)

`--layout zoo|rknpu2` writes the same files where rknn_model_zoo's or rknn-toolkit2's examples
look for them (sdk_layouts.py).

The library runs rknnrt in the Python environment this command runs in, whatever PATH says
when the C program starts; run the command again after moving or recreating that environment.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..model import files
from .build import LIBRARY, BuildError, build_library, missing_requirements
from .rga_build import RGA_HEADERS, RGA_INCLUDE, SHARED, STATIC, build_rga
from .sdk_layouts import LAYOUTS, write_layout
from .signatures import HEADERS, INCLUDE_DIR

API_VERSION = "2.5.0"  # the librknnrt API this library stands in for

NEEDS = (
    "Needs, once: a C compiler (gcc/clang, or $CC), the headers of this Python (python3.X-dev) "
    "and a shared libpython (Debian's, uv's, conda's, or pyenv with --enable-shared), plus the "
    "cffi package (pip install 'rknnrt[capi]'). The library is built on first use and cached "
    "per Python and rknnrt version."
)

_PC = """\
prefix={prefix}
libdir=${{prefix}}/lib
includedir=${{prefix}}/include

Name: rknnrt
Description: RKNN Runtime C API (librknnrt.so) implemented by rknnrt {version} in Python
Version: {api}
Libs: -L${{libdir}} -lrknnrt -Wl,-rpath,${{libdir}}
Cflags: -I${{includedir}}
"""

_CONFIG = """\
# find_package(rknnrt): the rknnrt drop-in librknnrt.so, written by `rknnrt sdk`.
# Gives the imported target rknnrt::rknnrt and the variables vendor-style projects set by hand.
get_filename_component(_rknnrt_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
set(RKNN_API_PATH "${{_rknnrt_prefix}}")
set(RKNN_API_INCLUDE_PATH "${{_rknnrt_prefix}}/include")
set(RKNN_RT_LIB "${{_rknnrt_prefix}}/lib/{library}")
set(rknnrt_INCLUDE_DIRS "${{RKNN_API_INCLUDE_PATH}}")
set(rknnrt_LIBRARIES "${{RKNN_RT_LIB}}")
set(rknnrt_VERSION "{api}")
if(NOT TARGET rknnrt::rknnrt)
  add_library(rknnrt::rknnrt SHARED IMPORTED)
  set_target_properties(rknnrt::rknnrt PROPERTIES
    IMPORTED_LOCATION "${{RKNN_RT_LIB}}"
    IMPORTED_SONAME "{library}"
    INTERFACE_INCLUDE_DIRECTORIES "${{RKNN_API_INCLUDE_PATH}}")
endif()
unset(_rknnrt_prefix)
"""

_RGA_PC = """\
prefix={prefix}
libdir=${{prefix}}/lib
includedir=${{prefix}}/include

Name: librga
Description: RGA 2D image API (im2d) on the CPU, a stand-in written by rknnrt {version}
Version: {rga_api}
Libs: -L${{libdir}} -lrga -Wl,-rpath,${{libdir}}
Cflags: -I${{includedir}}
"""

_RGA_CONFIG = """\
# find_package(rga): rknnrt's CPU stand-in for librga, written by `rknnrt sdk`. Gives the
# imported targets rga (so `target_link_libraries(app rga)` works unchanged) and rga::rga, and
# LIBRGA / LIBRGA_INCLUDES / RGA_LIB as vendor-style projects set them by hand.
get_filename_component(_rga_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
set(LIBRGA "${{_rga_prefix}}/lib/{shared}")
set(RGA_LIB "${{LIBRGA}}")
set(LIBRGA_INCLUDES "${{_rga_prefix}}/include")
set(rga_INCLUDE_DIRS "${{LIBRGA_INCLUDES}}")
set(rga_LIBRARIES "${{LIBRGA}}")
set(rga_VERSION "{rga_api}")
foreach(_rga_target rga rga::rga)
  if(NOT TARGET ${{_rga_target}})
    add_library(${{_rga_target}} SHARED IMPORTED)
    set_target_properties(${{_rga_target}} PROPERTIES
      IMPORTED_LOCATION "${{LIBRGA}}"
      IMPORTED_SONAME "{shared}"
      INTERFACE_INCLUDE_DIRECTORIES "${{LIBRGA_INCLUDES}}")
  endif()
endforeach()
unset(_rga_target)
unset(_rga_prefix)
"""

RGA_API_VERSION = "1.10.3"  # the im2d headers' version

_CONFIG_VERSION = """\
set(PACKAGE_VERSION "{api}")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"""


def write_sdk(out: Path | str, force_build: bool = False, layout: str = "sdk") -> Path:
    """Build (or reuse) the libraries and write the SDK folder; returns its absolute path."""
    from .. import __version__

    library = build_library(force=force_build)
    rga_shared, rga_static = build_rga(force=force_build)
    root = Path(out).resolve()
    if layout != "sdk":
        write_layout(layout, root, [INCLUDE_DIR / h for h in HEADERS], library,
                     [RGA_INCLUDE / h for h in RGA_HEADERS], rga_shared, rga_static)  # fmt: skip
        return root
    for sub in ("include", "lib/pkgconfig", "lib/cmake/rknnrt", "lib/cmake/rga"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for folder, headers in ((INCLUDE_DIR, HEADERS), (RGA_INCLUDE, RGA_HEADERS)):
        for header in headers:
            shutil.copyfile(folder / header, root / "include" / header)
    for built, name, mode in ((library, LIBRARY, 0o755), (rga_shared, SHARED, 0o755),
                              (rga_static, STATIC, 0o644)):  # fmt: skip
        staged = root / "lib" / f".{name}.tmp"
        shutil.copyfile(built, staged)
        staged.chmod(mode)
        staged.replace(root / "lib" / name)  # a running program keeps its mapped old copy
    values = {"prefix": root, "version": __version__, "api": API_VERSION, "library": LIBRARY,
              "rga_api": RGA_API_VERSION, "shared": SHARED}  # fmt: skip
    files.write_atomic(root / "lib/pkgconfig/rknnrt.pc", _PC.format(**values))
    files.write_atomic(root / "lib/pkgconfig/librga.pc", _RGA_PC.format(**values))
    files.write_atomic(root / "lib/cmake/rknnrt/rknnrtConfig.cmake", _CONFIG.format(**values))
    files.write_atomic(root / "lib/cmake/rknnrt/rknnrtConfigVersion.cmake",
        _CONFIG_VERSION.format(**values)
    )
    files.write_atomic(root / "lib/cmake/rga/rgaConfig.cmake", _RGA_CONFIG.format(**values))
    files.write_atomic(root / "lib/cmake/rga/rgaConfigVersion.cmake",
        _CONFIG_VERSION.format(**{**values, "api": RGA_API_VERSION})
    )
    return root


def cmd_sdk(args: argparse.Namespace) -> int:
    if args.check:
        problems = missing_requirements()
        for p in problems:
            print(f"missing: {p}")
        print("ready to build librknnrt.so" if not problems else NEEDS)
        return 1 if problems else 0
    try:
        root = write_sdk(args.out, force_build=args.rebuild, layout=args.layout)
    except BuildError as exc:
        print(f"rknnrt sdk: {exc}\n{NEEDS}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rknnrt sdk: cannot write the SDK folder {args.out}: {exc}", file=sys.stderr)
        return 1
    if args.layout != "sdk":
        print(f"rknnrt SDK in the {args.layout} layout under {root} (x86-64 librknnrt.so, librga)")
        return 0
    print(f"rknnrt SDK in {root}")
    print(f"  include/  {' '.join(HEADERS)} + the RGA headers (im2d.h, rga.h, RgaApi.h, ...)")
    print(f"  lib/      {LIBRARY}, {SHARED}, {STATIC}, pkgconfig/, cmake/rknnrt/, cmake/rga/")
    print(f"  Python:   {sys.executable} (the library runs rknnrt there)")
    print("build and run a program:")
    print(f"  gcc app.c -I{root}/include -L{root}/lib -lrknnrt -o app")
    print(f"  LD_LIBRARY_PATH={root}/lib ./app")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `sdk` subcommand to the rknnrt command line."""
    p = sub.add_parser(
        "sdk",
        help="write the C SDK: headers and a drop-in librknnrt.so for C/C++ programs",
        description=__doc__.splitlines()[0] + " " + NEEDS,
    )
    p.add_argument("--out", default="rknnrt-sdk", help="SDK folder (default: ./rknnrt-sdk)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the cached library")
    p.add_argument("--check", action="store_true", help="only report what the build needs")
    p.add_argument(
        "--layout", choices=LAYOUTS, default="sdk",
        help="sdk (default): include/ and lib/; zoo: OUT is rknn_model_zoo's 3rdparty/; "
        "rknpu2: OUT is rknn-toolkit2's rknpu2/",
    )  # fmt: skip
    p.set_defaults(func=cmd_sdk)
