"""The C-shaped API: constants, ctypes structures and the functions of rknn_api.h."""

from .constants import *  # noqa: F403
from .custom_op_api import *  # noqa: F403  (custom-ops hook, issue 17)
from .inference_api import *  # noqa: F403  (rknnrt_inference: RKNNLite's one call)
from .matmul_api import *  # noqa: F403
from .memory_api import *  # noqa: F403
from .rknn_api import *  # noqa: F403
from .structs import *  # noqa: F403
