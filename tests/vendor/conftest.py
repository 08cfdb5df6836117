"""Per-platform cases of the vendor tests: the quick loop keeps one platform of each rule family.

rk3566 and rk3562 files follow rk3588's rules (weight zero points in registers, the same task
layout), rv1126b files rk3576's (named zero-point constants). A case parametrised on one of those
three platforms, by name or by a fixture stem naming it, is marked slow: the full suite runs it,
`pytest -m "not slow"` leaves it to the rk3588 or rk3576 case beside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

_HERE = Path(__file__).parent

COVERED_BY_ANOTHER_PLATFORM = ("rk3566", "rk3562", "rv1126b")
_PLATFORM_TOKEN = re.compile(r"(?:^|[_\-\[])(" + "|".join(COVERED_BY_ANOTHER_PLATFORM) +
                             r")(?:$|[_\-\]])")  # fmt: skip


def covered_platform(case_id: str) -> str | None:
    """The covered platform a parametrisation id names, if any."""
    found = _PLATFORM_TOKEN.search(case_id)
    return found.group(1) if found else None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # a conftest's collection hook sees the whole session's items: only this folder's are marked
    for item in items:
        if _HERE not in Path(item.path).parents:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and covered_platform(callspec.id):
            item.add_marker(pytest.mark.slow)
