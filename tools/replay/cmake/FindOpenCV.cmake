# Module-mode redirect for find_package(OpenCV) (tools/replay_demos.py, docs/c-library.md).
# The vendor's example CMakeLists `set(OpenCV_DIR <snapshot's ARM-only OpenCV>)` before
# find_package(OpenCV), which shadows a -DOpenCV_DIR given on the command line. CMake looks
# for a FindOpenCV.cmake on CMAKE_MODULE_PATH before it tries config mode, so this file,
# put there with -DCMAKE_MODULE_PATH, points OpenCV_DIR at the host's OpenCV (the cache
# variable RKNNRT_HOST_OPENCV_DIR, default Debian's) and then loads that real OpenCVConfig.
# It changes nothing else: the demo links the host's real OpenCV libraries.
set(RKNNRT_HOST_OPENCV_DIR "/usr/lib/x86_64-linux-gnu/cmake/opencv4"
    CACHE PATH "folder of the host's OpenCVConfig.cmake")
set(OpenCV_DIR "${RKNNRT_HOST_OPENCV_DIR}")
find_package(OpenCV CONFIG PATHS "${RKNNRT_HOST_OPENCV_DIR}" NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenCV CONFIG_MODE)
