"""Versions the runtime reports (RKNN_QUERY_SDK_VERSION and the init log lines)."""

RKNNRT_VERSION = "0.1.0"
# The C API this runtime implements, in the vendor's "semver (build)" shape.
API_VERSION = f"2.5.0 (rknnrt {RKNNRT_VERSION})"
# The RKNPU kernel driver version a current board reports; there is no driver here.
DRIVER_VERSION = "0.9.8"
