"""toolkit/config.py: a frozen, typed configuration; the default platform is one constant."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import rknnrt
from rknnrt import cli
from rknnrt.core import switches
from rknnrt.core.matmul import spec as matmul_spec
from rknnrt.model import targets
from rknnrt.toolkit import RKNN
from rknnrt.toolkit import config as configuration

ROOT = Path(rknnrt.__file__).parent


def test_config_is_a_frozen_dataclass_with_the_vendors_keywords() -> None:
    rknn = RKNN()
    assert rknn.config(mean_values=[0, 0, 0], std_values=[[1, 2, 4]], target_platform="RK3588S",
                       quantized_hybrid_level=2) == 0  # fmt: skip
    config = rknn._config  # noqa: SLF001
    assert isinstance(config, configuration.Config)
    assert config.mean_values == [[0.0, 0.0, 0.0]] and config.std_values == [[1.0, 2.0, 4.0]]
    assert all(isinstance(v, float) for v in config.mean_values[0])
    assert config.target_platform == "rk3588"  # the canonical name, not the alias
    assert config.quantized_hybrid_level == 2 and config.custom_string == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.target_platform = "rk3566"  # type: ignore[misc]
    vendor = set(inspect.signature(RKNN.config).parameters) - {"self", "kwargs"}
    assert configuration.KEYWORDS == vendor


def test_each_call_makes_a_new_config_and_a_bad_one_keeps_the_old() -> None:
    rknn = RKNN()
    assert rknn.config(target_platform="rk3566") == 0
    first = rknn._config  # noqa: SLF001
    assert rknn.config(float_dtype="float32") == 0  # target_platform=None keeps rk3566
    second = rknn._config  # noqa: SLF001
    assert second is not first and first.float_dtype == "float16"
    assert (second.target_platform, second.float_dtype) == ("rk3566", "float32")
    assert rknn.config(std_values=[[1, 0, 1]]) == -1
    assert rknn._config is second  # noqa: SLF001


def test_unknown_keywords_are_recorded_and_the_dict_form_round_trips(capsys) -> None:
    rknn = RKNN()
    assert rknn.config(quant_img_RGB2BGR=[True, False], no_such_option=5) == 0
    config = rknn._config  # noqa: SLF001
    assert config.unknown_options == {"no_such_option": 5}
    assert "no_such_option" in capsys.readouterr().err
    assert [config.rgb2bgr_for(k) for k in range(3)] == [True, False, False]
    again, named = configuration.updated(configuration.DEFAULTS, config.as_dict())
    assert again == config and named == ["no_such_option"]
    assert "unknown_options" not in configuration.DEFAULTS.as_dict()


def test_the_default_platform_is_one_constant() -> None:
    assert targets.DEFAULT_PLATFORM == "rk3588"
    assert configuration.DEFAULTS.target_platform == targets.DEFAULT_PLATFORM
    assert switches.PLATFORM.default == targets.DEFAULT_PLATFORM
    assert matmul_spec.DEFAULT_PLATFORM == targets.DEFAULT_PLATFORM
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")  # noqa: SLF001
    commands = ("convert", "info", "run", "bench", "perf")
    for name in commands:
        target = next(a for a in sub.choices[name]._actions if a.dest == "target")  # noqa: SLF001
        assert target.default == targets.DEFAULT_PLATFORM, name


# Tables keyed by chip name (runtime-only facts, the vendor file format): they name every chip,
# the default one too; no other module may spell a platform name as a literal.
CHIP_TABLES = {"model/targets.py", "core/platforms.py", "core/board/soc_costs.py",
               "model/vendor_rknn/fileformat.py"}  # fmt: skip


def test_no_platform_literal_outside_the_chip_tables() -> None:
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in CHIP_TABLES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in targets.TARGETS:
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert found == []
