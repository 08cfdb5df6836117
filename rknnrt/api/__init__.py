"""The C-shaped API: constants, ctypes structures and the functions of rknn_api.h."""

from .constants import *  # noqa: F403
from .matmul_api import *  # noqa: F403
from .memory_api import *  # noqa: F403
from .rknn_api import *  # noqa: F403
from .structs import *  # noqa: F403
