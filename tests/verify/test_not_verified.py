"""verify_numerics: a check that checks nothing is "not verified", not a pass (issue 39).

A float output whose original gives all zeros, one value everywhere, or only NaN/infinities,
and random inputs whose every dynamic dim took the default size, make ``report.ok`` False and
``report.status`` "not verified" (not "mismatch": nothing differs). The oracle: ONNX Runtime
run on the very feeds the check draws (``random_inputs`` with the same seed) says what the
reference is; numpy says whether it is all zero or constant.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper

from rewriter import verify_numerics as public_verify_numerics
from rewriter.verify.numerics import random_inputs, verify_numerics

F = TensorProto.FLOAT


def _model(ops, shape=(4, 5), elem=F, inits=()) -> onnx.ModelProto:
    """y = the chain of ``ops`` (op, extra inputs) applied to x."""
    nodes, prev = [], "x"
    for i, (op, extra) in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(h.make_node(op, [prev, *extra], [out]))
        prev = out
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, list(shape))],
                         [h.make_tensor_value_info("y", elem, list(shape))], list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def _reference(model, seed=0, input_shapes=None):
    feeds = random_inputs(model, seed, input_shapes or {})
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


ZERO = [("Abs", []), ("Neg", []), ("Relu", [])]  # Relu(-|x|): 0 everywhere
TIMES_ZERO = [("Mul", ["zero"])]
CONSTANT = [("Mul", ["zero"]), ("Add", ["three"])]  # 3 everywhere
ALL_NAN = [("Abs", []), ("Neg", []), ("Sqrt", [])]  # sqrt of negatives: NaN everywhere
ALL_INF = [("Div", ["zero"])]  # x / 0: +-inf everywhere
ZERO_WHERE_FINITE = [("Sqrt", []), ("Mul", ["zero"])]  # NaN where x < 0, 0 elsewhere
INITS = (_const("zero", 0.0), _const("three", 3.0))


@pytest.mark.parametrize("ops,why", [
    (ZERO, "the reference is all zeros"), (TIMES_ZERO, "the reference is all zeros"),
    (CONSTANT, "the reference is constant (3 everywhere)"),
    (ALL_NAN, "the reference is all NaN or infinite"), (ALL_INF, "the reference is all NaN or infinite"),
    (ZERO_WHERE_FINITE, "the reference is all zeros where finite"),
], ids=["relu-of-negatives", "times-zero", "constant", "all-nan", "all-inf", "zero-where-finite"])
def test_a_degenerate_reference_is_not_verified(ops, why):
    model = _model(ops, inits=INITS)
    y = _reference(model)
    finite = y[np.isfinite(y)]
    assert finite.size == 0 or np.unique(finite).size == 1  # the premise, by ONNX Runtime and numpy
    for fn in (verify_numerics, public_verify_numerics):
        report = fn(model, model)
        assert not report.ok and report.status == "not verified" and not report.failed
        (out,) = report.outputs
        assert out.degenerate == why and not out.ok and not out.mismatch and out.reason == ""
        assert report.not_verified == [f"y: {why}"]
        line = out.line()
        assert f"NOT VERIFIED: {why}, not a check" in line and "--input-value" in line
        assert not line.endswith(" ok")
        doc = report.to_dict()
        assert doc["ok"] is False and doc["status"] == "not verified"
        assert doc["outputs"][0]["degenerate"] == why and doc["not_verified"] == [f"y: {why}"]
        assert "--input-value" in report.not_verified_text()


def test_the_half_precision_comparison_knows_it_too():
    model = _model(ZERO, inits=INITS)
    report = verify_numerics(model, model, rel_l2=1e-2)
    assert report.status == "not verified" and report.outputs[0].degenerate == "the reference is all zeros"


def test_a_difference_from_a_degenerate_reference_is_a_mismatch():
    """An all-zero original against a rewrite that is not all zero: a finding, not a doubt."""
    zero, other = _model(ZERO, inits=INITS), _model([("Abs", [])])
    assert not _reference(zero).any() and _reference(other).all()
    report = verify_numerics(zero, other)
    assert report.status == "mismatch" and report.failed and not report.ok
    (out,) = report.outputs
    assert out.mismatch and out.degenerate == "" and out.reason == "beyond tolerance"
    assert report.to_dict()["status"] == "mismatch"


@pytest.mark.parametrize("ops,shape,elem,inits", [
    ([("Abs", [])], (4, 5), F, ()),  # varied values
    ([("Sqrt", [])], (4, 5), F, ()),  # NaN where x < 0, varied elsewhere: the finite values judge
    ([("Mul", ["zero"]), ("Add", ["three"])], (1,), F, INITS),  # one value: nothing to be constant with
    ([("Mul", ["zero"])], (4, 5), TensorProto.INT64, (_const("zero", 0, np.int64),)),  # an integer output
], ids=["varied", "partly-nan", "one-element", "integer-zeros"])
def test_a_reference_that_checks_something_is_a_pass(ops, shape, elem, inits):
    model = _model(ops, shape, elem, inits)
    y = _reference(model)
    if elem == F and y.size > 1:
        assert np.unique(y[np.isfinite(y)]).size > 1  # the premise
    report = verify_numerics(model, model)
    assert report.ok and report.status == "ok" and report.not_verified == [], report.summary_lines()
    assert report.outputs[0].degenerate == "" and report.outputs[0].line().endswith(" ok")
    assert report.to_dict()["not_verified"] is None and report.to_dict()["defaulted_dims"] is None


# ---------------------------------------------------------------- every dynamic dim defaulted

def _dynamic(dims_x, dims_z=None) -> onnx.ModelProto:
    """y = Abs(x) (+ z when ``dims_z``), inputs of the dims given (strings symbolic, None unknown)."""
    inputs = [h.make_tensor_value_info("x", F, dims_x)]
    nodes = [h.make_node("Abs", ["x"], ["y"])]
    if dims_z is not None:
        inputs.append(h.make_tensor_value_info("z", F, dims_z))
        nodes = [h.make_node("Abs", ["x"], ["a"]), h.make_node("Add", ["a", "z"], ["y"])]
    graph = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", F, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def test_every_dynamic_dim_defaulted_is_said_and_not_a_pass():
    model = _dynamic(["N", 5])
    assert random_inputs(model)["x"].shape == (2, 5)  # the premise: N took the default 2
    report = verify_numerics(model, model)
    assert report.status == "not verified" and not report.ok and not report.failed
    assert report.defaulted == "x: 'N'" and report.outputs[0].ok  # (the output itself is fine)
    lines = report.summary_lines()
    assert lines[1].startswith("NOT VERIFIED: every dynamic input dim took the default size 2 (x: 'N')")
    assert "--input-shape NAME:DIMS" in lines[1] and "--calibration-data" in lines[1]
    assert lines[2].endswith("within tolerance on the default sizes") and not lines[2].endswith(" ok")
    doc = report.to_dict()
    assert doc["ok"] is False and doc["status"] == "not verified" and doc["defaulted_dims"] == "x: 'N'"
    assert doc["not_verified"][0].startswith("every dynamic input dim took the default size 2 (x: 'N')")


def test_unnamed_and_negative_dims_are_named_by_position():
    x = h.make_tensor_value_info("x", F, [None, 3, "?", 4])
    x.type.tensor_type.shape.dim[3].dim_value = -1
    model = _dynamic(["N"])
    model.graph.input[0].CopyFrom(x)
    assert verify_numerics(model, model).defaulted == "x: dim 0, dim 2, dim 3"


@pytest.mark.parametrize("kwargs", [
    {"input_shapes": {"x": [3, 5]}},
    {"input_values": {"x": list(np.linspace(-1, 1, 10))}},
], ids=["input-shape", "input-value"])
def test_a_size_given_is_a_pass(kwargs):
    model = _dynamic(["N", 5])
    report = verify_numerics(model, model, **kwargs)
    assert report.ok and report.defaulted == "" and not any("NOT VERIFIED" in line for line in report.summary_lines())
    assert report.summary_lines()[-1].endswith(" ok")


def test_feeds_given_are_real_inputs():
    model = _dynamic(["N", 5])
    feeds = {"x": np.linspace(-1, 1, 35, dtype=np.float32).reshape(7, 5)}
    report = verify_numerics(model, model, feeds=feeds, feeds_are="a sample")
    assert report.ok and report.defaulted == ""


def test_a_symbol_bound_by_another_input_is_given():
    """z's N is bound by x's pinned shape: not every dynamic dim was defaulted."""
    model = _dynamic(["N", 5], ["N", 5])
    assert verify_numerics(model, model, input_shapes={"x": [3, 5]}).ok
    assert verify_numerics(model, model).defaulted == "x: 'N'; z: 'N'"


def test_one_input_given_a_size_is_enough():
    """Not *every* dynamic dim was defaulted: z's own M still is, but x's N was given."""
    model = _dynamic(["N", 5], ["M", 5])
    report = verify_numerics(model, model, input_shapes={"x": [2, 5]})
    assert report.ok and report.defaulted == ""


def test_static_inputs_have_nothing_to_default():
    report = verify_numerics(_dynamic([2, 5]), _dynamic([2, 5]))
    assert report.ok and report.defaulted == ""


def test_a_mismatch_on_defaulted_dims_is_still_a_mismatch():
    a, b = _dynamic(["N", 5]), _dynamic(["N", 5])
    b.graph.node[0].op_type = "Neg"
    report = verify_numerics(a, b)
    assert report.status == "mismatch" and report.failed and report.defaulted == "x: 'N'"


def test_an_input_with_an_initializer_is_not_drawn_so_not_defaulted():
    """b is a graph input with an initializer (a default the caller may override): random inputs
    leave it to its initializer, so its dynamic dim is nobody's default."""
    model = _dynamic([2, 5], ["K"])
    model.graph.initializer.append(_const("z", np.linspace(-1, 1, 5)))
    assert set(random_inputs(model)) == {"x"}  # the premise
    report = verify_numerics(model, model)
    assert report.ok and report.defaulted == "", report.summary_lines()
