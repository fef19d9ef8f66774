"""Static shapes (--input-shape / --fix-dim as a rewrite): the dims fixed everywhere their
symbol appears, contradictions refused, and the shape arithmetic they decide folded.

Oracles: the declared shapes of the written model, ONNX Runtime running it against the
dynamic original on inputs of the fixed shape, the node count after optimize."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli
from rewriter.errors import RewriterError
from rewriter.graph.static_shapes import fix_shapes

F = TensorProto.FLOAT


def _dynamic_reshape(first_dim="batch"):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape with a symbolic batch, as exporters write it."""
    x = helper.make_tensor_value_info("x", F, [first_dim, 4])
    y = helper.make_tensor_value_info("y", F, [first_dim, 2, 2])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]), helper.make_node("Concat", ["bu", "two"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([2, 2], np.int64), "two")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)])


def _dims(vi):
    return [d.dim_value if d.WhichOneof("value") == "dim_value" else d.dim_param or None
            for d in vi.type.tensor_type.shape.dim]


def test_a_fixed_symbol_is_fixed_everywhere_it_appears():
    model = _dynamic_reshape()
    lines = fix_shapes(model, fixed={"batch": 3})
    assert _dims(model.graph.input[0]) == [3, 4] and _dims(model.graph.output[0]) == [3, 2, 2]
    assert lines[-1] == "2 dim(s) made static"


def test_an_input_shape_gives_its_symbols_their_sizes():
    model = _dynamic_reshape()
    fix_shapes(model, {"x": [5, 4]})
    assert _dims(model.graph.output[0]) == [5, 2, 2]


def test_a_declared_minus_one_is_dynamic_and_can_be_fixed():
    model = _dynamic_reshape()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    fix_shapes(model, {"x": [1, 4]})
    assert _dims(model.graph.input[0]) == [1, 4]


@pytest.mark.parametrize("shapes, fixed, words", [
    ({"x": [2, 5]}, {}, "dim 1 is declared 4, not 5"),
    ({"x": [2]}, {}, "1 dim(s) given, the input has rank 2"),
    ({"nope": [1]}, {}, "no graph input 'nope'"),
    ({"x": [2, 4]}, {"batch": 3}, "'batch', which is 3 elsewhere, not 2"),
    ({}, {"seq": 3}, "no declared shape uses the symbol(s) 'seq'"),
])
def test_contradictions_are_refused(shapes, fixed, words):
    with pytest.raises(RewriterError) as e:
        fix_shapes(_dynamic_reshape(), shapes, fixed)
    assert words in str(e.value)


def _scaled_by_batch():
    """y = x * batch, the batch read with Shape -> Gather -> Cast."""
    x = helper.make_tensor_value_info("x", F, ["batch", 4])
    y = helper.make_tensor_value_info("y", F, ["batch", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Cast", ["b"], ["bf"], to=F), helper.make_node("Mul", ["x", "bf"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)])


def test_optimize_with_fixed_dims_folds_the_shape_chain_and_computes_the_same(tmp_path):
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(_scaled_by_batch(), src)
    assert cli.main(["optimize", src, "-o", out, "--fix-dim", "batch=3", "--verify"]) == 0
    result = onnx.load(out)
    assert [n.op_type for n in result.graph.node] == ["Mul"]
    assert _dims(result.graph.input[0]) == [3, 4]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    run = lambda m: ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]  # noqa: E731
    np.testing.assert_array_equal(run(out), run(src))
    np.testing.assert_array_equal(run(out), 3 * x)
    # without the fix the chain stays: the batch is not known
    assert cli.main(["optimize", src, "-o", out]) == 0
    assert len(onnx.load(out).graph.node) == 4


def test_convert_with_an_input_shape_writes_static_inputs(tmp_path):
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(_dynamic_reshape(), src)
    assert cli.main(["convert", src, "--opset", "11", "-o", out, "--input-shape", "x:2,4"]) == 0
    result = onnx.load(out)
    assert _dims(result.graph.input[0]) == [2, 4] and result.opset_import[0].version == 11


def test_a_question_mark_symbol_names_no_dim():
    """Paddle exports write dim_param "?" for every unknown dim: two of them are not the same size."""
    x = helper.make_tensor_value_info("x", F, ["?", 3, "?", "?"])
    y = helper.make_tensor_value_info("y", F, ["?", 3, "?", "?"])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    fix_shapes(model, {"x": [1, 3, 48, 192]})
    assert _dims(model.graph.input[0]) == [1, 3, 48, 192]
    assert _dims(model.graph.output[0]) == ["?", 3, "?", "?"]  # nothing says they are x's dims

    from rewriter.verify.numerics.random_inputs import random_inputs

    two = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g",
                                              [helper.make_tensor_value_info("a", F, ["?", 4]),
                                               helper.make_tensor_value_info("b", F, ["?", "?"])],
                                              [helper.make_tensor_value_info("c", F, None)]),
                            opset_imports=[helper.make_opsetid("", 13)])
    feeds = random_inputs(two, input_shapes={"a": [5, 4]})
    assert feeds["a"].shape == (5, 4) and feeds["b"].shape == (2, 2)
