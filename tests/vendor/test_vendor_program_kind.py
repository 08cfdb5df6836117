"""A vendor file's metadata says which kind of program it is: the runtime chooses its int8
kernels and the float16 blocked layout from `float_dtype`, never from the graph's bytes."""

from __future__ import annotations

import json

import pytest

from rknnrt.model import container

from .vendor_data import STEMS, model_bytes


@pytest.mark.parametrize("stem", STEMS)
def test_int8_files_are_int8_programs_and_fp16_files_float16_ones(stem: str) -> None:
    sections = container.read(memoryview(model_bytes(stem)))
    meta = json.loads(bytes(sections.metadata))
    assert meta["float_dtype"] == ("int8" if stem.endswith("_i8") else "float16")
