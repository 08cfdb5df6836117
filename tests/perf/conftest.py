"""Fixtures of the speed rewrites' tests."""

from __future__ import annotations

import ctypes

import pytest

from rknnrt.core import switches
from rknnrt.sessions import kernels


@pytest.fixture(scope="module")
def library():
    """(path, ctypes handle) of rknnrt's compiled kernel library of this source, built once into
    the cache folder (later runs find it); the handle is the object onnxruntime registers, so
    its path setters (rknnrt_dw_max_level, rknnrt_f16round_max_level, rknnrt_affine_max_level,
    rknnrt_qconv_max_level)
    reach the sessions. All are back at their widest afterwards."""
    path = kernels.library(switches.cache_root())
    handle = ctypes.CDLL(str(path))
    yield path, handle
    handle.rknnrt_dw_max_level(2)
    handle.rknnrt_f16round_max_level(1)
    handle.rknnrt_affine_max_level(1)
    handle.rknnrt_qconv_max_level(1)
