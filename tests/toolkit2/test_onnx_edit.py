"""rknn.utils.onnx_edit: the edited model computes the same values on transformed tensors,
the dataset is transformed with it, and bad equations fail with one line."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rknnrt.toolkit import onnx_edit as oe

from .models import Graph, run_onnx


def _kv_model() -> onnx.ModelProto:
    """concat_block's interface: k_cache.1 [4,48,1,8] and feature [1,1,48,8] -> k_cache
    [4,8,48,1] (transposed, scaled, plus a broadcast feature)."""
    g = Graph(3)
    t = g.node("Transpose", ["k_cache.1"], "kt", perm=[0, 3, 1, 2])
    s = g.node("Mul", [t, g.const("two", np.array(2.0, np.float32))], "ks")
    f = g.node("Transpose", ["feature"], "ft", perm=[0, 3, 2, 1])
    g.node("Add", [s, f], "k_cache")
    return g.model([("k_cache.1", [4, 48, 1, 8]), ("feature", [1, 1, 48, 8])], ["k_cache"])


def _shape(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_the_vendor_example_equations_keep_the_values(tmp_path) -> None:
    model = _kv_model()
    path, out = tmp_path / "kv.onnx", tmp_path / "kv_edited.onnx"
    onnx.save(model, path)
    ret = oe.onnx_edit(model=str(path), export_path=str(out),
                       inputs_transform={"k_cache.1": "a,b,c,d->1,ad,b,c"},
                       outputs_transform={"k_cache": "a,b,c,d->1,ab,c,d"})  # fmt: skip
    assert ret == 0
    edited = onnx.load(out)
    assert _shape(edited.graph.input[0]) == [1, 32, 48, 1]
    assert _shape(edited.graph.output[0]) == [1, 32, 48, 1]
    ops = [n.op_type for n in edited.graph.node]
    assert ops[:2] == ["Reshape", "Transpose"] and ops[-1] == "Reshape"  # as the vendor logs
    rng = np.random.RandomState(0)
    k, f = rng.randn(4, 48, 1, 8).astype(np.float32), rng.randn(1, 1, 48, 8).astype(np.float32)
    (ref,) = run_onnx(model, {"k_cache.1": k, "feature": f})
    new_k = k.transpose(0, 3, 1, 2).reshape(1, 32, 48, 1)  # a,b,c,d -> 1,ad,b,c
    (got,) = run_onnx(edited, {"k_cache.1": new_k, "feature": f})
    np.testing.assert_array_equal(got, ref.reshape(1, 32, 48, 1))


def test_split_with_assignments_and_inferred_letters() -> None:
    plan = oe.parse("ab,c,d,qk[a=2,k=8]->aq,cd,1,kb", [32, 4, 1, 64], "x")
    assert plan.split == [2, 16, 4, 1, 8, 8] and plan.new == [16, 4, 1, 128]
    x = np.arange(32 * 4 * 64, dtype=np.float32).reshape(32, 4, 1, 64)
    expected = x.reshape(2, 16, 4, 1, 8, 8).transpose(0, 4, 2, 3, 5, 1).reshape(16, 4, 1, 128)
    np.testing.assert_array_equal(plan.forward(x), expected)
    g = Graph(0)
    g.node("Identity", ["x"], "y")
    model = g.model([("x", [32, 4, 1, 64])], ["y"])
    edited, _ = oe.edit(model, {"x": "ab,c,d,qk[a=2,k=8]->aq,cd,1,kb"}, {})
    (back,) = run_onnx(edited, {"x": expected})
    np.testing.assert_array_equal(back, x)  # the inserted nodes undo the transform
    assert oe.parse("a,b,c->a,1,cb,1,1", [2, 3, 5], "z").new == [2, 1, 15, 1, 1]


@pytest.mark.parametrize("equation, words", [
    ("a,b,c,d->1,ad,b", "every letter must appear once"),
    ("ab,c,d,e[a=5]->a,b,c,d,e", "not divisible by 5"),
    ("ab,c,d,e->a,b,c,d,e", "2 unassigned letters"),
    ("a,b,c->a,b,c", "has 4 dims"),
    ("a,b,c,d", "needs one '->'"),
    ("a,B,c,d->a,B,c,d", "letters a-z"),
])  # fmt: skip
def test_bad_equations_fail_with_one_line(tmp_path, capsys, equation, words) -> None:
    path = tmp_path / "kv.onnx"
    onnx.save(_kv_model(), path)
    ret = oe.onnx_edit(str(path), str(tmp_path / "o.onnx"), {"k_cache.1": equation})
    err = capsys.readouterr().err.strip().splitlines()
    assert ret == -1 and len(err) == 1 and err[0].startswith("E onnx_edit:") and words in err[0]
    assert not (tmp_path / "o.onnx").exists()


def test_unknown_tensor_names_the_model_inputs(tmp_path, capsys) -> None:
    path = tmp_path / "kv.onnx"
    onnx.save(_kv_model(), path)
    assert oe.onnx_edit(str(path), str(tmp_path / "o.onnx"), {"nope": "a->a"}) == -1
    assert "no input named 'nope' (k_cache.1, feature)" in capsys.readouterr().err


def test_the_dataset_is_transformed_beside_the_export(tmp_path) -> None:
    src, out_dir = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out_dir.mkdir()
    onnx.save(_kv_model(), src / "kv.onnx")
    rng = np.random.RandomState(1)
    k, f = rng.randn(4, 48, 1, 8).astype(np.float32), rng.randn(1, 1, 48, 8).astype(np.float32)
    np.save(src / "k0.npy", k)
    np.save(src / "f0.npy", f)
    (src / "dataset.txt").write_text("k0.npy f0.npy\n")
    ret = oe.onnx_edit(
        str(src / "kv.onnx"),
        str(out_dir / "kv_edited.onnx"),
        {"k_cache.1": "a,b,c,d->1,ad,b,c"},
        dataset=str(src / "dataset.txt"),
    )
    assert ret == 0
    line = (out_dir / "dataset_for_kv_edited.txt").read_text().split()
    assert line == ["kv_edited_k0.npy", "../src/f0.npy"]
    np.testing.assert_array_equal(np.load(out_dir / line[0]),
                                  k.transpose(0, 3, 1, 2).reshape(1, 32, 48, 1))  # fmt: skip
