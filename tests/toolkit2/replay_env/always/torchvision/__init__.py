"""torchvision stand-in for the replayed scripts (see ../../README.md)."""

from . import models, ops

__all__ = ["models", "ops"]
