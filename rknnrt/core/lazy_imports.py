"""onnx and onnxruntime, imported on first use rather than by `import rknnrt`.

Importing them costs ~75 ms, which every process pays before its first rknn_* call (the C
library's first call included) although querying, registering custom operators or reading
constants needs neither. `from .lazy_imports import onnx, ort` gives a stand-in whose first
attribute access imports the real module; later reads are
attribute reads of the real module, so a test that patches it patches what the code uses.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class DeferredModule:
    """Stands for the module `name`; importing it is left to the first attribute read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            # import_module, not sys.modules: while another thread is still importing the
            # module it is already in sys.modules, half initialised; import_module waits.
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


onnx: Any = DeferredModule("onnx")
ort: Any = DeferredModule("onnxruntime")
