"""Verdicts below an op version (rewriter/targets/measured_verdicts.py), read from LiteRT's data:
per element type (int8 Mul-14 computes wrongly, float Mul-14 runs), per named form (a broadcasting
Where with a NaN in the branch not taken), versions no node test reaches (Elu-6, measured by the
probe's generated forms).  The rules run without the runtime; with the litert venv
(tools/runtime_venvs.py; skipped when absent) the converted models run there."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter import RewriterError
from rewriter.targets import parse_target
from tests.targets.runtime_runs import ROOT, run_in, tool

DATA = json.loads((ROOT / "rewriter" / "targets" / "data" / "litert.json").read_text())["releases"]["2.6"]


def _binary(op: str, elem: int, opset: int = 14) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node(op, ["a", "b"], ["c"], name="the_node")], "g",
                              [vi("a", elem, [2, 3]), vi("b", elem, [2, 3])], [vi("c", elem, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _imputer() -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    node = helper.make_node("Imputer", ["x"], ["y"], name="imp", domain="ai.onnx.ml",
                            imputed_value_floats=[10.0, 20.0, 30.0, 40.0], replaced_value_float=float("nan"))
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["n", 4])], [vi("y", TensorProto.FLOAT, ["n", 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8)


def _isnan_where(fill_shape, rows="n") -> onnx.ModelProto:
    """Where(IsNaN(x), fill, x), x of [rows, 4]: with ``rows`` symbolic, no constant is written at the
    output's shape for LiteRT (``constant_branch_broadcast``, tests/targets/test_nan_fill.py)."""
    vi = helper.make_tensor_value_info
    fill = numpy_helper.from_array(np.full(fill_shape, 7.0, np.float32), "fill")
    nodes = [helper.make_node("IsNaN", ["x"], ["c"], name="isnan"),
             helper.make_node("Where", ["c", "fill", "x"], ["y"], name="the_where")]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [rows, 4])],
                              [vi("y", TensorProto.FLOAT, [rows, 4])], [fill])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def test_the_data_keeps_mul_and_div_14_wrong_only_on_8_bit_integers():
    for op in ("Mul", "Div"):
        assert 14 not in DATA["wrong"][""].get(op, [])
        verdicts = DATA["type_verdicts"][""][op]["14"]
        assert verdicts["int8"].startswith("wrong") and verdicts["uint8"].startswith("wrong")
        assert "float" not in verdicts and "int32" not in verdicts


def test_a_float_mul_14_converts_for_litert_unchanged():
    model = _binary("Mul", TensorProto.FLOAT)
    result = rewriter.convert_opset(model, target="litert")
    assert [(n.op_type, n.name) for n in result.graph.node] == [("Mul", "the_node")]
    assert result.opset_import[0].version == 14


@pytest.mark.parametrize("op,elem", [("Mul", TensorProto.INT8), ("Div", TensorProto.UINT8)])
def test_an_8_bit_mul_or_div_14_is_refused_naming_the_node(op, elem):
    with pytest.raises(RewriterError, match=r"the_node.*computes wrongly .*-14 on u?int8"):
        rewriter.convert_opset(_binary(op, elem), target="litert")


def test_an_int32_mul_converts_for_litert():
    result = rewriter.convert_opset(_binary("Mul", TensorProto.INT32), target="litert")
    assert [n.op_type for n in result.graph.node] == ["Mul"]


def test_elu_6_was_measured_and_alpha_2_is_not_written_as_elu_6():
    """No node test reaches Elu-6; the probe's generated form with alpha not 1 computed wrongly."""
    assert 6 in DATA["wrong"][""]["Elu"]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Elu", ["x"], ["y"], name="elu", alpha=2.0)], "g",
                              [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    try:
        result = rewriter.convert_opset(model, target="litert")
    except RewriterError as e:
        assert "elu" in str(e)
        return
    assert "Elu" not in {n.op_type for n in result.graph.node}


def test_the_data_marks_a_broadcasting_where_with_a_nan_not_taken():
    for version in ("9", "16"):
        assert DATA["form_verdicts"][""]["Where"][version]["nan_in_untaken_branch"].startswith("wrong")
    assert 16 not in DATA["wrong"][""].get("Where", [])


def test_isnan_then_a_broadcasting_where_is_refused_naming_the_where():
    with pytest.raises(RewriterError, match=r"the_where.*IsNaN"):
        rewriter.convert_opset(_isnan_where([4]), target="litert")


def test_a_condition_through_not_from_an_isnan_is_followed():
    model = _isnan_where([4])
    model.graph.node[0].output[0] = "nan"
    model.graph.node.insert(1, helper.make_node("Not", ["nan"], ["c0"], name="not"))
    model.graph.node.insert(2, helper.make_node("Not", ["c0"], ["c"], name="not_again"))
    with pytest.raises(RewriterError, match=r"the_where.*IsNaN"):
        rewriter.convert_opset(model, target="litert")


def test_isnan_then_a_where_of_one_shape_converts():
    result = rewriter.convert_opset(_isnan_where([2, 4], rows=2), target="litert")
    assert [n.op_type for n in result.graph.node] == ["IsNaN", "Where"]
    assert "fill" in result.graph.node[1].input  # (left as it is)


def test_with_static_dims_the_constant_is_written_at_the_output_shape():
    result = rewriter.convert_opset(_isnan_where([4], rows=2), target="litert")
    inits = {t.name: list(t.dims) for t in result.graph.initializer}
    assert [inits.get(n) for n in result.graph.node[1].input[1:]] == [[2, 4], None]


def test_the_where_is_refused_only_for_the_runtime_whose_data_says_so():
    rewriter.convert_opset(_isnan_where([4]), target="onnxruntime==1.20")


def test_an_imputer_for_litert_is_refused_naming_the_imputer():
    """Its lowering is IsNaN, then a Where with the imputed values per feature (broadcast): LiteRT
    returns the NaN.  Expanding the values to the input's shape first does not help (measured:
    onnx2tf still writes the broadcast), so no formulation without a broadcasting Where is known."""
    with pytest.raises(RewriterError, match=r"'imp' \(Imputer\)"):
        rewriter.convert_opset(_imputer(), target="litert")


def test_an_imputer_converts_for_onnxruntime():
    rewriter.convert_opset(_imputer(), target="onnxruntime==1.20")


def test_the_blocker_names_the_where_and_reads_the_form_verdict():
    from rewriter.targets import measured_verdicts as verdicts

    target = parse_target("litert")
    model = _isnan_where([4])
    found = verdicts.untaken_nan_blockers(model, target.form_verdicts, target.name)
    assert len(found) == 1 and "'the_where'" in found[0][0]
    assert verdicts.untaken_nan_blockers(model, {}, target.name) == []


def test_the_probe_splits_by_type_only_when_the_failures_follow_a_type():
    gen = tool("runtime_probe_forms")
    rows = [("a", {"verdict": "ok", "types": ["float"], "detail": ""}),
            ("b", {"verdict": "wrong", "types": ["int8"], "detail": ""}),
            ("c", {"verdict": "refused", "types": ["uint64"], "detail": "no uint64"})]
    split = gen.type_split(rows)
    assert set(split) == {"int8", "uint64"} and split["int8"].startswith("wrong in 1 of 1")
    assert split["uint64"].startswith("refused")
    # a wrong case on a type that also ran right: the op version is wrong, not a type
    assert gen.type_split(rows + [("d", {"verdict": "wrong", "types": ["float"], "detail": ""})]) is None
    # no element types recorded (older raw files): as before
    assert gen.type_split([(c, {k: v for k, v in r.items() if k != "types"}) for c, r in rows]) is None


def test_litert_returns_the_nan_the_imputer_s_where_does_not_take():
    """What the data and the refusal say, in the runtime: the lowered Imputer runs and gives NaN."""
    from rewriter.convert.lower_ops import lower_ops

    lowered, _ = lower_ops(_imputer(), {("ai.onnx.ml", "Imputer")})
    x = np.array([[1, np.nan, 3, 4], [np.nan, 2, np.nan, 5]], np.float32)
    result = run_in("litert", "2.6", lowered, {"x": x})
    assert result["ok"], result
    assert np.isnan(result["values"][0]).sum() == 3
