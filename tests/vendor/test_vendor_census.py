"""tools/vendor_census.py: op types and packings of a set of vendor files, and which decode."""

from __future__ import annotations

from pathlib import Path

from tools import vendor_census

ARCH = Path(__file__).parent / "fixtures_arch"


def test_census_of_two_files() -> None:
    files = [ARCH / "stem_rk3576_i8.rknn", ARCH / "transformer_rk3588_i8.rknn"]
    result = vendor_census.census(files)
    assert result["ops"]["ConvRelu"] == dict(files=1, decoded=True)
    assert result["ops"]["exSDPAttention"] == dict(files=1, decoded=True)
    assert result["ops"]["ConvExGelu"] == dict(files=1, decoded=True)
    stem_key = "RKNPU f2 int8 conv 7x7 ic=3 native=[1, 1, 7, 7, 32, 4]"
    assert result["packings"][stem_key] == dict(files=1, decoded=True)
    assert result["files"][str(files[0])] == "loads"
    assert result["files"][str(files[1])] == "loads"  # (int8 ConvExGelu: its lookup table)
    refused = vendor_census.census([ARCH / "stem_rk3562_i8.rknn"])  # a file that loads
    assert all(row["decoded"] for row in refused["packings"].values())


def test_census_main_prints_the_tables(capsys, tmp_path) -> None:
    out = tmp_path / "census.json"
    assert vendor_census.main([str(ARCH / "pad_rk3562_i8.rknn"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Pad" in printed and "1 of 1 files load" in printed
    assert '"Pad"' in out.read_text()


def test_census_lists_mini_format_files(tmp_path) -> None:
    """rv1103/rv1106 and rv1103b/rv1106b mini files (0x1004) are read too: their ops and
    packings, rv1106's and rv1106b's depthwise pairs among them; a refusal is its one line (a
    copy of hsig whose HardSigmoid ops are renamed to an op type no decoder has)."""
    mini = Path(__file__).parent / "fixtures_mini"
    data = (mini / "hsig_rv1106b_i8.rknn").read_bytes()
    assert data.count(b"HardSigmoid") >= 2
    renamed = tmp_path / "renamed_rv1106b_i8.rknn"
    renamed.write_bytes(data.replace(b"HardSigmoid", b"HardSigmoiX"))
    files = [mini / "residual_rv1106_i8.rknn", mini / "residual_rv1106b_i8.rknn",
             mini / "hsig_rv1106b_i8.rknn", renamed]  # fmt: skip
    result = vendor_census.census(files)
    assert result["ops"]["ConvAdd"] == dict(files=2, decoded=True)
    key = "RKNPU t3 int8 depthwise 3x3 ic=- native=[1, 0, 3, 3, 1, 32, 1, 1, 3, 3, 1, 16]"
    assert result["packings"][key] == dict(files=1, decoded=True)
    key = "RKNPU w1 int8 depthwise 3x3 ic=- native=[1, 1, 3, 3, 1, 8]"
    assert result["packings"][key] == dict(files=1, decoded=True)
    assert {result["files"][str(f)] for f in files[:3]} == {"loads"}
    assert "op HardSigmoiX" in result["files"][str(renamed)]
    assert result["ops"]["HardSigmoid"] == dict(files=1, decoded=True)
    assert result["ops"]["HardSigmoiX"]["decoded"] is False


def test_markdown_tables_per_platform(capsys) -> None:  # type: ignore[no-untyped-def]
    custom = Path(__file__).parent / "fixtures_custom"
    files = [ARCH / "clip_rk3576_fp16.rknn", ARCH / "clip_rk3588_fp16.rknn",
             ARCH / "clip_rk3588_i8.rknn", custom / "custom_rk3566_i8.rknn"]  # fmt: skip
    assert vendor_census.main([*map(str, files), "--markdown"]) == 0
    cells = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    rows = {row[0]: row[1:] for row in cells}
    assert rows["op"] == ["rk3588", "rk3566", "rk3576"]
    # Clip(-1.5, 2.5): rk3588 decodes both dtypes' bounds, rk3576 fp16 (its int8 file not given)
    assert rows["ConvClip"] == ["both", "", "fp16"]
    assert rows["cstDualResidual"] == ["", "custom (registered op)", ""]
    assert rows["int8 conv 3x3"][1].startswith("1/1 layouts")
    result = vendor_census.census(files)
    assert result["ops"]["cstChannelAffine"] == dict(files=1, decoded="custom")
