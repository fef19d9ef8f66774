"""``Where`` / ``constant_branch_broadcast`` (rewriter/targets/nan_fill.py, LiteRT's ``rewrite_forms``):
the Imputer's Where(IsNaN(x), fill, x), fill one value per feature, gives x itself (NaN and all) in
LiteRT; with static shapes the constant is written at the output's shape and LiteRT computes it
right.  ONNX Runtime's run of the model as it was is the oracle; LiteRT where its venv is."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.for_target import convert_for
from rewriter.convert.planner import ConversionBlocked
from rewriter.targets import nan_fill, parse_target
from rewriter.targets.measured_verdicts import untaken_nan_blockers
from rewriter.targets.nan_fill import constant_branch_broadcast
from tests.convert.quant_models import ort_run, quant_model

FILL = np.array([10.0, 20.0, 30.0, 40.0], np.float32)


def _imputer(rows=2, condition="IsNaN", fill=FILL, swapped=False):
    nodes = [helper.make_node(condition, ["x"], ["c"]) if condition == "IsNaN"
             else helper.make_node(condition, ["x", "zero"], ["c"])]
    if swapped:
        nodes += [helper.make_node("Not", ["c"], ["nc"]), helper.make_node("Where", ["nc", "x", "fill"], ["y"], name="where")]
    else:
        nodes.append(helper.make_node("Where", ["c", "fill", "x"], ["y"], name="where"))
    return quant_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [rows, 4])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [rows, 4])],
                       [("fill", fill), ("zero", np.float32(0))], opset=13)


def _feeds(rows=2):
    x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    x[0, 0] = x[-1, 2] = np.nan
    return {"x": x}


def _where_inputs(model):
    return list(next(n for n in model.graph.node if n.op_type == "Where").input)


@pytest.mark.parametrize("swapped", [False, True])
def test_the_constant_is_written_at_the_static_shape(swapped):
    model = _imputer(swapped=swapped)
    want = ort_run(model, _feeds())
    notes = constant_branch_broadcast(model, "R 1.0")
    assert len(notes) == 1 and "'where'" in notes[0]
    inits = {t.name: t for t in model.graph.initializer}
    wide = [n for n in _where_inputs(model) if n in inits and n != "fill"]
    assert len(wide) == 1 and list(inits[wide[0]].dims) == [2, 4]
    np.testing.assert_array_equal(ort_run(model, _feeds()), want)
    table = parse_target("litert==2.6").form_verdicts
    assert untaken_nan_blockers(model, table, "litert 2.6") == []
    assert len(untaken_nan_blockers(_imputer(swapped=swapped), table, "litert 2.6")) == 1


def test_what_is_left():
    symbolic = _imputer()
    symbolic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    symbolic.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    assert constant_branch_broadcast(symbolic, "R 1.0") == []  # no static shape
    assert constant_branch_broadcast(_imputer(condition="Greater"), "R 1.0") == []  # no IsNaN: no NaN there
    full = _imputer(fill=np.broadcast_to(FILL, (2, 4)).copy())
    assert constant_branch_broadcast(full, "R 1.0") == []  # one shape already
    declared = _imputer()
    for v in (declared.graph.input[0], declared.graph.output[0]):  # Paddle's exports declare -1
        v.type.tensor_type.shape.dim[0].dim_value = -1
    assert constant_branch_broadcast(declared, "R 1.0", inferred=declared) == []
    narrow = quant_model([helper.make_node("IsNaN", ["z"], ["c"]), helper.make_node("Where", ["c", "fill", "x"], ["y"])],
                         [helper.make_tensor_value_info("z", T.FLOAT, [2, 4]),
                          helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                         [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], [("fill", FILL)], opset=13)
    assert constant_branch_broadcast(narrow, "R 1.0") == []  # the other branch broadcasts too: no use


def test_a_constant_above_the_limit_is_left(monkeypatch):
    monkeypatch.setattr(nan_fill, "LIMIT", 7)
    assert constant_branch_broadcast(_imputer(), "R 1.0") == []
    monkeypatch.setattr(nan_fill, "LIMIT", 8)
    assert len(constant_branch_broadcast(_imputer(), "R 1.0")) == 1


def test_convert_for_litert_writes_it_and_names_it_without_static_shapes():
    result, report = convert_for(_imputer(), runtime="litert==2.6")
    assert any("Where node(s) of an IsNaN" in n for n in report.target_notes)
    np.testing.assert_array_equal(ort_run(result, _feeds()), ort_run(_imputer(), _feeds()))
    symbolic = _imputer()
    symbolic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    symbolic.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    with pytest.raises(ConversionBlocked, match="--input-shape"):
        convert_for(symbolic, runtime="litert==2.6")
    result, _ = convert_for(_imputer(), runtime="tract==0.23")  # (tract computes it right: left)
    assert "fill" in _where_inputs(result)


def test_litert_runs_the_written_form():
    from tests.targets.runtime_runs import run_in

    model, feeds = _imputer(rows=3), _feeds(rows=3)
    want = ort_run(model, feeds)
    as_is = run_in("litert", "2.6", model, feeds)
    assert as_is["ok"] and np.isnan(as_is["values"][0]).any()  # (x itself)
    result, _ = convert_for(model, runtime="litert==2.6")
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0], want)
