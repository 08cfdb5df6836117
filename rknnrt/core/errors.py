"""The one error type of the runtime: a vendor status plus a message that names the fix.

The core speaks status *names* from rknn_api.h; the API layer maps them to their numbers.
"""

from __future__ import annotations

FAIL = "RKNN_ERR_FAIL"
TIMEOUT = "RKNN_ERR_TIMEOUT"
DEVICE_UNAVAILABLE = "RKNN_ERR_DEVICE_UNAVAILABLE"
MALLOC_FAIL = "RKNN_ERR_MALLOC_FAIL"
PARAM_INVALID = "RKNN_ERR_PARAM_INVALID"
MODEL_INVALID = "RKNN_ERR_MODEL_INVALID"
CTX_INVALID = "RKNN_ERR_CTX_INVALID"
INPUT_INVALID = "RKNN_ERR_INPUT_INVALID"
OUTPUT_INVALID = "RKNN_ERR_OUTPUT_INVALID"
DEVICE_UNMATCH = "RKNN_ERR_DEVICE_UNMATCH"
TARGET_PLATFORM_UNMATCH = "RKNN_ERR_TARGET_PLATFORM_UNMATCH"


class RknnError(Exception):
    """Raised where a fault is seen; the API boundary turns it into a status code and one
    `E RKNN:` line."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
