"""The runtime's model contexts (docs/architecture.md): facade.Context and its parts."""

from .facade import Context
from .frames import OutputRequest
from .lifecycle import create, destroy, dup, init, lookup
from .model import InitExtend, Model
from .options import InitOptions

__all__ = ["Context", "InitExtend", "InitOptions", "Model", "OutputRequest", "create",
           "destroy", "dup", "init", "lookup"]  # fmt: skip
