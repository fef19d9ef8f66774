"""Graph inputs with an initializer (a default a caller may override): what refusals and skipped
folds say about them, and freezing them into constants (rewriter.graph.input_defaults; the
converter, the fold and the optimizer on the frozen model). Oracles: ONNX Runtime on the original
(it takes the default when the input is not fed), onnx.reference below opset 7, the checker."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.convert import convert_model
from rewriter.errors import RewriterError
from rewriter.fold import fold_model
from rewriter.graph.input_defaults import (check_kept, default_note, explain, freeze_input_defaults, freeze_in_place,
                                           input_defaults)
from rewriter.optimize import OptimizeOptions, optimize_proto
from rewriter.optimize.pipeline import OptimizePass
from tests.graph.input_default_models import (IR3_FEEDS, REDUCE_OPS, X, ir3_model, ort_run, reduce_model,
                                              reference_run, upsample_model)
from tests.oracle import assert_same_outputs, assert_valid

NOTE_B = ("'b' is a graph input; its initializer is only a default that a caller may override "
          "(--freeze-input-defaults b makes it a constant)")


def _inputs(model) -> list[str]:
    return [i.name for i in model.graph.input]


# ---------------------------------------------------------------- the module


def test_the_note_says_why_and_how():
    assert default_note("b") == NOTE_B


def test_input_defaults_are_the_main_graph_inputs_with_an_initializer_in_input_order():
    m = ir3_model()
    assert input_defaults(m) == ["W", "s", "B"]
    assert input_defaults(reduce_model()) == ["b"]
    no_inputs = reduce_model()
    del no_inputs.graph.input[1:]  # 'b' a plain initializer: a constant already
    assert input_defaults(no_inputs) == []


def test_freezing_copies_the_model_and_keeps_the_initializer():
    m = reduce_model()
    before = m.SerializeToString()
    frozen, names = freeze_input_defaults(m)
    assert names == ["b"] and m.SerializeToString() == before  # the argument is not changed
    assert _inputs(frozen) == ["x"] and [t.name for t in frozen.graph.initializer] == ["b"]
    assert frozen.ir_version == m.ir_version
    assert_valid(frozen)


@pytest.mark.parametrize("freeze", [None, False, [], ()])
def test_nothing_asked_nothing_frozen(freeze):
    m = reduce_model()
    frozen, names = freeze_input_defaults(m, freeze)
    assert names == [] and frozen is m


def test_names_choose_which_and_keep_input_order():
    m = ir3_model()
    frozen, names = freeze_input_defaults(m, ["B", "W"])
    assert names == ["B", "W"] and _inputs(frozen) == ["x", "s"]
    assert freeze_input_defaults(m, "s")[1] == ["s"]  # one name as a string


def test_an_ir3_model_needs_ir4_once_frozen():
    frozen, _ = freeze_input_defaults(ir3_model())
    assert frozen.ir_version == 4
    assert_valid(frozen)
    assert_same_outputs(ort_run(ir3_model(), IR3_FEEDS), ort_run(frozen, IR3_FEEDS))


@pytest.mark.parametrize("names, named", [(["c"], "'c' is not a graph input"),
                                          (["x"], "'x' is not a graph input"),  # an input without a default
                                          (["b", "c", "d"], "'c', 'd' are not graph inputs")])
def test_a_name_that_is_not_an_input_default_is_an_error_naming_it_and_the_valid_ones(names, named):
    with pytest.raises(RewriterError) as info:
        freeze_input_defaults(reduce_model(), names)
    assert named in str(info.value) and "(those with one: 'b')" in str(info.value)


def test_a_name_in_a_model_without_defaults():
    m = reduce_model()
    del m.graph.input[1:]
    with pytest.raises(RewriterError, match="no graph input has an initializer"):
        freeze_input_defaults(m, ["b"])
    assert freeze_input_defaults(m, True)[1] == []


def test_names_must_be_strings():
    with pytest.raises(TypeError):
        freeze_input_defaults(reduce_model(), [1])


def test_an_inputs_doc_string_moves_to_value_info():
    m = reduce_model()
    m.graph.input[1].doc_string = "the axes"
    names = freeze_in_place(m, True)
    assert names == ["b"] and [(v.name, v.doc_string) for v in m.graph.value_info if v.name == "b"] == [("b", "the axes")]
    assert_valid(m)


def test_explain_notes_only_defaults_called_not_constant():
    reason = "axes input 'b' is not a constant, so it cannot become the axes attribute"
    assert explain(reason, ["b"]) == f"{reason}; {NOTE_B}"
    assert explain(reason, ["c"]) == reason
    assert explain("data input 'b' has type bfloat16", ["b"]) == "data input 'b' has type bfloat16"
    assert explain("nearest mode with scales 'b' not a constant: ...", ["b"]).endswith(NOTE_B)
    both = explain("'a' is not a constant and 'b' is not a constant", ["a", "b"])
    assert both.count("is a graph input; its initializer") == 2


def test_check_kept_refuses_a_frozen_default_that_is_an_input_again():
    m = reduce_model()
    check_kept(m, ["x2"])
    m.ir_version = 3
    with pytest.raises(RewriterError, match=r"IR 3 has no initializers outside the graph inputs, so 'b'"):
        check_kept(m, ["b"])


# ---------------------------------------------------------------- the converter


def _down(op: str) -> int:
    return 11 if op == "ReduceSum" else 13  # ReduceSum took its axes as an input from 13


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_axes_from_an_input_default_is_refused_saying_why(op):
    with pytest.raises(RewriterError) as info:
        convert_model(reduce_model(op), _down(op))
    assert f"axes input 'b' is not a constant" in str(info.value) and NOTE_B in str(info.value)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_axes_from_a_frozen_default_converts(op):
    m = reduce_model(op)
    frozen, _ = freeze_input_defaults(m)
    result, _ = convert_model(frozen, _down(op))
    assert_valid(result)
    assert _inputs(result) == ["x"] and [a.ints for n in result.graph.node for a in n.attribute if a.name == "axes"] == [[1]]
    assert_same_outputs(ort_run(m, {"x": X}), ort_run(result, {"x": X}))


def test_upsample_scales_from_an_input_default():
    m = upsample_model()
    with pytest.raises(RewriterError) as info:
        convert_model(m, 8)
    assert "Upsample 9 -> 7: scales input 's' is not a constant" in str(info.value)
    assert default_note("s") in str(info.value)
    result, _ = convert_model(freeze_input_defaults(m, ["s"])[0], 8)
    assert_valid(result)
    assert _inputs(result) == ["x"] and result.graph.node[0].op_type == "Upsample"
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    assert_same_outputs(ort_run(m, {"x": x}), ort_run(result, {"x": x}))


def test_a_default_a_subgraph_reads_is_noted_too():
    then = h.make_graph([h.make_node("ReduceMean", ["x", "b"], ["t"], keepdims=0)], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, [2, 4])])
    other = h.make_graph([h.make_node("ReduceMax", ["x", "k"], ["e"], keepdims=0)], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [2, 4])])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                     [h.make_tensor_value_info("c", T.BOOL, []), h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]),
                      h.make_tensor_value_info("b", T.INT64, [1])], [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                     initializer=[nh.from_array(np.array([1], np.int64), "b"), nh.from_array(np.array([1], np.int64), "k")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    with pytest.raises(RewriterError, match=r"ReduceMean 18 -> 13: axes input 'b' is not a constant.*"
                                            r"'b' is a graph input; its initializer"):
        convert_model(m, 13)
    result, _ = convert_model(freeze_input_defaults(m)[0], 13)
    assert_valid(result)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": X}
        assert_same_outputs(ort_run(m, feeds), ort_run(result, feeds))


def test_an_ir3_model_converted_down():
    m = ir3_model()
    with pytest.raises(RewriterError) as info:
        convert_model(m, 4)
    assert "Reshape 5 -> 1: shape input 's' is not a constant" in str(info.value)
    assert default_note("s") in str(info.value)
    assert default_note("W") not in str(info.value)  # W blocks nothing
    expected = ort_run(m, IR3_FEEDS)
    result, _ = convert_model(freeze_input_defaults(m)[0], 4)
    assert_valid(result)
    assert result.ir_version == 4 and _inputs(result) == ["x"]
    assert_same_outputs(expected, reference_run(result, IR3_FEEDS))
    # freezing only what blocks keeps IR 3 and the other defaults
    only, _ = convert_model(freeze_input_defaults(m, ["s"])[0], 4)
    assert_valid(only)
    assert only.ir_version == 3 and _inputs(only) == ["x", "W", "B"]
    assert_same_outputs(expected, reference_run(only, IR3_FEEDS))


def test_ir3_pinned_cannot_keep_them_constant():
    result, _ = convert_model(freeze_input_defaults(ir3_model())[0], 4, ir_version=3)
    assert _inputs(result) == ["x", "W", "B"]  # IR 3's form: initializers are inputs again
    with pytest.raises(RewriterError, match=r"IR 3 has no initializers outside the graph inputs, so 'W', 'B'"):
        check_kept(result, ["W", "s", "B"])


# ---------------------------------------------------------------- fold and optimize


def _constant_data_model():
    m = reduce_model()
    m.graph.initializer.append(nh.from_array(X, "c"))
    m.graph.node[0].input[0] = "c"
    del m.graph.input[0]
    return m


def test_fold_skip_says_why_and_freezing_folds():
    m = _constant_data_model()
    folded, report = fold_model(m)
    assert not report.folded and report.skipped[0].reason == f"axes 'b' is not a constant: {NOTE_B}"
    assert _inputs(folded) == ["b"]
    expected = ort_run(m, {})
    folded, report = fold_model(freeze_input_defaults(m)[0])
    assert len(report.folded) == 1 and not folded.graph.node and _inputs(folded) == []
    assert_same_outputs(expected, ort_run(folded, {}))


def test_optimize_an_ir3_model_with_and_without_freezing():
    m = ir3_model()
    expected = ort_run(m, IR3_FEEDS)
    kept, report = optimize_proto(m)
    assert kept.ir_version == 3 and _inputs(kept) == ["x", "W", "s", "B"]
    assert [n.op_type for n in kept.graph.node] == ["Transpose", "MatMul", "Reshape", "Add"]
    assert ("node 't' (Transpose)", f"input 'W' is not a constant: {default_note('W')}") in report.skipped
    result, report = optimize_proto(m, OptimizeOptions(freeze_input_defaults=True))
    assert_valid(result)
    assert result.ir_version == 4 and _inputs(result) == ["x"]
    assert [n.op_type for n in result.graph.node] == ["MatMul", "Reshape", "Add"]  # W's Transpose folded
    assert_same_outputs(expected, ort_run(result, IR3_FEEDS))


def test_optimize_notes_only_nodes_that_defaults_alone_keep_from_folding():
    _, report = optimize_proto(ir3_model())
    assert [label for label, _ in report.skipped] == ["node 't' (Transpose)"]  # MatMul reads x as well


def test_optimize_pass_freezes_on_onnx_ir():
    m = ir3_model()
    model = ir.from_proto(m)
    result = OptimizePass(freeze_input_defaults=["W"])(model)
    assert result.modified and result.model.ir_version == 4
    assert [v.name for v in result.model.graph.inputs] == ["x", "s", "B"]
    assert [n.op_type for n in result.model.graph] == ["MatMul", "Reshape", "Add"]
    assert_same_outputs(ort_run(m, IR3_FEEDS), ort_run(ir.to_proto(result.model), IR3_FEEDS))
    with pytest.raises(RewriterError, match="'Q' is not a graph input with an initializer"):
        OptimizePass(freeze_input_defaults=["Q"])(ir.from_proto(m))
