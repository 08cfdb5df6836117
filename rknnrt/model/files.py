"""Reading and writing files safely: the one helper every reader and writer of the package uses.

Reading: a path given by a user or listed in a dataset may name a FIFO (reading it blocks
forever), a device (/dev/zero never ends) or a folder. `open_regular` opens without blocking,
checks that the file is a regular one and only then hands out a file object; anything else
raises NotRegularFile (an OSError, so existing `except OSError` handlers report it).

Writing: `write_atomic` writes to a temporary file in the target's folder and renames it over
the target (os.replace), so a failing or killed write leaves the previous file whole and never
a truncated or empty one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from typing import IO, Any

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a folder."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike | bytes, mode: str = "rb", **kwargs: Any) -> IO[Any]:
    """open(path, mode) for reading, refusing anything but a regular file before a byte is
    read (O_NONBLOCK: opening a FIFO without a writer must not wait)."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular reads only (mode {mode!r})")
    name = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
    fd = os.open(name, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{name!r} is {_kind(info.st_mode)}, not a regular file")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def check_regular(path: str | os.PathLike) -> None:
    """Raise NotRegularFile unless `path` is a regular file (for readers that open by name)."""
    with open_regular(path):
        pass


def read_bytes(path: str | os.PathLike | bytes) -> bytes:
    with open_regular(path, "rb") as f:
        return f.read()


def read_text(path: str | os.PathLike, encoding: str | None = None) -> str:
    with open_regular(path, "r", encoding=encoding) as f:
        return f.read()


def write_atomic(path: str | os.PathLike, data: bytes | str | list,
                 encoding: str = "utf-8") -> None:  # fmt: skip
    """Write `data` to `path` all or nothing: a temporary file in the same folder, flushed to
    disk, then renamed over `path`. The new file gets the mode a plain open() would give.
    `data` may be a list of bytes-like parts, written one after the other (no joined copy)."""
    parts = data if isinstance(data, list) else [data]
    parts = [p.encode(encoding) if isinstance(p, str) else p for p in parts]

    def write(f: IO[bytes]) -> None:
        for part in parts:
            f.write(part)

    write_atomic_with(path, write)


def write_atomic_with(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """write_atomic for a file written piece by piece: `write(f)` fills the temporary file
    (a file too large to hold in memory at once)."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.",
                                     suffix=".tmp")  # fmt: skip
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
