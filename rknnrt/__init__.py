"""rknnrt: the Rockchip RKNN Runtime C API (RKNPU2 2.5.0) on any computer.

`import rknnrt as rk` gives every function, constant and structure of rknn_api.h with the same
names; `rknnrt.lite.RKNNLite` is the Python layer; `rknnrt.toolkit.RKNN` converts ONNX models.
"""

from .api import *  # noqa: F403
from .core.version import RKNNRT_VERSION as __version__

__all__ = [
    "__version__",
    *(name for name in dir() if name.startswith(("rknn_", "RKNN_", "get_"))),
]
