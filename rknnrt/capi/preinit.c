/* Starting the interpreter behind librknnrt.so (part of the cffi preamble that build.py writes).
 *
 * cffi's own start-up runs Py_InitializeEx with program name "python3", so the stdlib and
 * site-packages it finds depend on $PATH, and a failure there makes every function return 0
 * (RKNN_SUCC). Instead, before cffi runs:
 *   - inside a Python host: use the host interpreter, but only if its minor version is the one
 *     this library was built for (another minor version would hang or crash);
 *   - otherwise: make libpython's symbols global (dlopen(RTLD_LOCAL) hosts), then start the
 *     interpreter of the environment rknnrt was built in (RKNNRT_PYTHON_EXECUTABLE: its venv
 *     and site-packages, whatever $PATH says), without signal handlers, and release the GIL
 *     as cffi expects.
 * Every exported function checks rknnrt_ready() first and fails with one `E RKNN:` line.
 * RKNNRT_PYTHON_EXECUTABLE and RKNNRT_PY_MINOR are defined by the build. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t rknnrt_once = PTHREAD_ONCE_INIT;
static int rknnrt_preinit_failed = 0;
static int rknnrt_in_python_host = 0;
static char rknnrt_reason[1024];

static void rknnrt_log_error(const char* function, const char* message)
{
    struct timeval now;
    struct tm parts;
    char stamp[16];
    gettimeofday(&now, NULL);
    localtime_r(&now.tv_sec, &parts);
    strftime(stamp, sizeof stamp, "%H:%M:%S", &parts);
    fprintf(stderr, "E RKNN: [%s.%03d] %s: %s\n", stamp, (int)(now.tv_usec / 1000), function,
            message);
    fflush(stderr);
}

static int rknnrt_capi_in_python_host(void) { return rknnrt_in_python_host; }

static void rknnrt_preinit(void)
{
    if (Py_IsInitialized()) {
        /* The host's interpreter; Py_GetVersion is "3.11.7 (main, ...)". */
        const char* host = Py_GetVersion();
        size_t n = strlen(RKNNRT_PY_MINOR);
        rknnrt_in_python_host = 1;
        if (strncmp(host, RKNNRT_PY_MINOR, n) != 0 || (host[n] != '.' && host[n] != ' ')) {
            snprintf(rknnrt_reason, sizeof rknnrt_reason,
                     "this process runs Python %.20s but librknnrt.so was built for Python %s; "
                     "run `rknnrt sdk` with this Python to build a matching library",
                     host, RKNNRT_PY_MINOR);
            rknnrt_preinit_failed = 1;
        }
        return;
    }
    if (access(RKNNRT_PYTHON_EXECUTABLE, X_OK) != 0) {
        snprintf(rknnrt_reason, sizeof rknnrt_reason,
                 "the Python environment librknnrt.so was built for is gone (%s not found); "
                 "run `rknnrt sdk` again in the environment where rknnrt is installed",
                 RKNNRT_PYTHON_EXECUTABLE);
        rknnrt_preinit_failed = 1;
        return;
    }
    {
        /* numpy and _cffi_backend need libpython's symbols in the global scope. */
        Dl_info info;
        if (dladdr((void*)&Py_InitializeFromConfig, &info) && info.dli_fname)
            dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    }
    {
        PyConfig config;
        PyStatus status;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;
        config.parse_argv = 0;
        status = PyConfig_SetBytesString(&config, &config.program_name, RKNNRT_PYTHON_EXECUTABLE);
        if (!PyStatus_Exception(status))
            status = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        if (PyStatus_Exception(status)) {
            snprintf(rknnrt_reason, sizeof rknnrt_reason, "starting Python %s failed: %s%s%s",
                     RKNNRT_PYTHON_EXECUTABLE, status.func ? status.func : "",
                     status.func ? ": " : "", status.err_msg ? status.err_msg : "unknown error");
            rknnrt_preinit_failed = 1;
            return;
        }
    }
    PyEval_SaveThread(); /* cffi takes the GIL per call */
}

/* cffi_start_python, made safe where the interpreter has already looked up an attribute of a
 * capsule object (torch's import does; so does `getattr(datetime.datetime_CAPI, "x", None)`).
 * On Python 3.11 cffi's start-up uses PyCapsule_Type.tp_version_tag as a spin lock and expects
 * it to be 0, but such a lookup gives the type a version tag: cffi then aborts on its assert,
 * or spins forever without asserts. PyType_Modified is the public way to drop a type's tag (it
 * sets it to 0; the next lookup assigns a fresh one), and holding the GIL from there into cffi's
 * start-up means no Python code can look up a capsule attribute in between. Our own mutex,
 * taken before the GIL, makes threads racing the first call wait without holding the GIL. */
static pthread_mutex_t rknnrt_start_lock = PTHREAD_MUTEX_INITIALIZER;
static int rknnrt_cffi_started = 0;

static int rknnrt_start_cffi(void)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (!__atomic_load_n(&rknnrt_cffi_started, __ATOMIC_ACQUIRE)) {
        int status;
        pthread_mutex_lock(&rknnrt_start_lock);
        if (!__atomic_load_n(&rknnrt_cffi_started, __ATOMIC_ACQUIRE)) {
            PyGILState_STATE gil = PyGILState_Ensure();
            PyType_Modified(&PyCapsule_Type);
            status = cffi_start_python();
            PyGILState_Release(gil);
            __atomic_store_n(&rknnrt_cffi_started, 1, __ATOMIC_RELEASE);
        } else {
            status = cffi_start_python();
        }
        pthread_mutex_unlock(&rknnrt_start_lock);
        return status;
    }
#endif
    return cffi_start_python();
}

/* 0 when the Python runtime is up and bound; else one `E RKNN:` line and -1. */
static int rknnrt_ready(const char* function)
{
    pthread_once(&rknnrt_once, rknnrt_preinit);
    if (rknnrt_preinit_failed) {
        rknnrt_log_error(function, rknnrt_reason);
        return -1;
    }
    if (rknnrt_start_cffi() != 0) {
        rknnrt_log_error(function, "the rknnrt Python package failed to load in the embedded "
                                   "interpreter (traceback above); check the environment "
                                   "`rknnrt sdk` was run in");
        return -1;
    }
    return 0;
}
