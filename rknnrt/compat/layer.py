"""Install, uninstall and report the forwarding modules.

`install` writes a handful of modules (`rknn/api/__init__.py`, ...) into one site directory and
a record (`rknnrt_compat.json`) of exactly what it wrote: the files with their SHA-256, and the
directories it created. `uninstall` removes those files (and the byte-code Python compiled from
them), then the directories it created once they are empty, then the record; so the directory
is left as it was. Nothing is written where the vendor's own distributions are installed, or
where a file of the same name already exists.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig
from dataclasses import dataclass

from ..model import files as model_files

RECORD = "rknnrt_compat.json"
VENDOR_DISTRIBUTIONS = ("rknn-toolkit2", "rknn-toolkit-lite2")

_HEADER = '"""rknnrt compatibility layer (written by `rknnrt compat install`): forwards to {}."""\n'

# relative path -> the module's source; each forwards to one public rknnrt name
MODULES: dict[str, str] = {
    "rknn/__init__.py": _HEADER.format("rknnrt"),
    "rknn/api/__init__.py": _HEADER.format("rknnrt.toolkit")
    + "from rknnrt.toolkit import RKNN\n\n__all__ = ['RKNN']\n",
    "rknn/api/custom_op.py": _HEADER.format("rknnrt.toolkit.custom_ops")
    + "from rknnrt.toolkit.custom_ops import get_node_attr\n\n__all__ = ['get_node_attr']\n",
    "rknn/utils/__init__.py": _HEADER.format("rknnrt.toolkit.onnx_edit")
    + "from rknnrt.toolkit.onnx_edit import onnx_edit\n\n__all__ = ['onnx_edit']\n",
    "rknnlite/__init__.py": _HEADER.format("rknnrt"),
    "rknnlite/api/__init__.py": _HEADER.format("rknnrt.lite")
    + "from rknnrt.lite import RKNNLite\n\n__all__ = ['RKNNLite']\n",
}

IMPORT_NAMES = ("rknn.api", "rknn.api.custom_op", "rknn.utils", "rknnlite.api")


class CompatError(Exception):
    """Install or uninstall cannot go ahead; the message says why (one line)."""


@dataclass
class Status:
    site: str
    installed: bool
    vendor: list[str]  # the vendor's distributions visible from this interpreter
    modified: list[str]  # recorded files changed since install


def default_site(user: bool = False) -> str:
    if user:
        import site

        return site.getusersitepackages()
    return sysconfig.get_paths()["purelib"]


def _write_new(path: str, data: bytes) -> None:
    """A file that must not exist yet, written all or nothing (model/files.write_atomic)."""
    if os.path.lexists(path):
        raise FileExistsError(f"{path} exists")
    model_files.write_atomic(path, data)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vendor_installed(site: str) -> list[str]:
    """'name version (location)' of the vendor's distributions in `site` or on sys.path."""
    found = []
    seen = set()
    for path in ([site], None):
        dists = importlib.metadata.distributions(path=path) if path else \
            importlib.metadata.distributions()  # fmt: skip
        for dist in dists:
            name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            if name in VENDOR_DISTRIBUTIONS and name not in seen:
                seen.add(name)
                location = str(getattr(dist, "_path", "") or "")
                found.append(f"{name} {dist.version} ({os.path.dirname(location) or '?'})")
    return found


def _read_record(site: str) -> dict | None:
    path = os.path.join(site, RECORD)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            record = json.load(f)
        if not isinstance(record.get("files"), dict) or not isinstance(record.get("dirs"), list):
            raise ValueError("missing files/dirs")
        return record
    except (OSError, ValueError) as exc:
        raise CompatError(f"{path} is not a record written by rknnrt compat: {exc}") from None


def status(site: str) -> Status:
    record = _read_record(site)
    modified = []
    for rel, digest in (record or {}).get("files", {}).items():
        path = os.path.join(site, rel)
        try:
            with open(path, "rb") as f:
                if _sha(f.read()) != digest:
                    modified.append(rel)
        except OSError:
            modified.append(rel)
    return Status(site, record is not None, vendor_installed(site), modified)


def install(site: str) -> list[str]:
    """Write the modules into `site`; returns the files written (nothing if already there)."""
    vendor = vendor_installed(site)
    if vendor:
        raise CompatError(
            f"the vendor's {', '.join(vendor)} is installed: rknnrt will not "
            "shadow it (uninstall it, or use another virtual environment)"
        )
    if _read_record(site) is not None:
        return []
    clashes = [rel for rel in ("rknn", "rknnlite") if os.path.lexists(os.path.join(site, rel))]
    if clashes:
        raise CompatError(f"{os.path.join(site, clashes[0])} exists and was not written by "
                          "rknnrt compat: nothing installed")  # fmt: skip
    if not os.path.isdir(site):
        raise CompatError(f"{site} is not a directory")
    created: list[str] = []
    files: dict[str, str] = {}
    try:
        for rel, source in MODULES.items():
            folder = os.path.dirname(rel)
            parts = folder.split("/")
            for k in range(1, len(parts) + 1):
                sub = "/".join(parts[:k])
                if not os.path.isdir(os.path.join(site, sub)):
                    os.mkdir(os.path.join(site, sub))
                    created.append(sub)
            data = source.encode()
            _write_new(os.path.join(site, rel), data)
            files[rel] = _sha(data)
        record = {"files": files, "dirs": created, "forwards_to": _rknnrt_location()}
        _write_new(os.path.join(site, RECORD), json.dumps(record, indent=1).encode())
    except OSError as exc:  # undo what was written, then say why
        _remove(site, files, created)
        raise CompatError(f"cannot write into {site}: {exc}") from None
    return list(files)


def _rknnrt_location() -> str:
    package = sys.modules[__name__.rsplit(".", 2)[0]]
    return os.path.dirname(os.path.abspath(package.__file__ or ""))


def _remove(site: str, files: dict[str, str], dirs: list[str]) -> list[str]:
    """Remove the files, their byte-code and the created directories; what had to stay."""
    kept = []
    for rel, digest in files.items():
        path = os.path.join(site, rel)
        try:
            with open(path, "rb") as f:
                same = _sha(f.read()) == digest
        except FileNotFoundError:
            continue
        if not same:
            kept.append(rel)
            continue
        os.remove(path)
        cache = os.path.join(os.path.dirname(path), "__pycache__")
        stem = os.path.splitext(os.path.basename(rel))[0] + "."
        if os.path.isdir(cache):
            for name in os.listdir(cache):
                if name.startswith(stem) and name.endswith(".pyc"):
                    os.remove(os.path.join(cache, name))
            if not os.listdir(cache):
                os.rmdir(cache)
    for rel in sorted(dirs, key=lambda d: -d.count("/")):
        path = os.path.join(site, rel)
        if os.path.isdir(path):
            if os.listdir(path):
                kept.append(rel + "/")
            else:
                os.rmdir(path)
    return kept


def uninstall(site: str) -> tuple[list[str], list[str]]:
    """(files removed, paths kept because they changed or gained other files)."""
    record = _read_record(site)
    if record is None:
        return [], []
    kept = _remove(site, record["files"], record["dirs"])
    os.remove(os.path.join(site, RECORD))
    return [rel for rel in record["files"] if rel not in kept], kept
