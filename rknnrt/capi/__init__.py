"""The C library: a drop-in librknnrt.so whose functions are rknnrt's C-shaped Python API.

`rknnrt sdk --out DIR` writes DIR/include (rknn_api.h, rknn_matmul_api.h, rknn_custom_op.h),
DIR/lib/librknnrt.so, a pkg-config file and a CMake package. build.py makes the library (cffi
embedding, cached), bridge.py binds its functions to `rknnrt.<name>`, callbacks.py calls C
callbacks (custom operators) from Python. docs/c-library.md is the user's guide.
"""
