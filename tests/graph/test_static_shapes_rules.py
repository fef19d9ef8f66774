"""Static shapes: which dims are dynamic, symbols replaced
wherever they appear, a symbol given two sizes refused.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracles: the dims as the TensorShapeProto holds them (a dim_value >= 0 is the only static
kind), and ONNX Runtime running the fixed model against the dynamic one.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.errors import RewriterError
from rewriter.graph.static_shapes import fix_shapes, is_dynamic

F = TensorProto.FLOAT


def _dim(**kw) -> onnx.TensorShapeProto.Dimension:
    d = onnx.TensorShapeProto.Dimension()
    for k, v in kw.items():
        setattr(d, k, v)
    return d


def test_which_dims_are_dynamic():
    assert is_dynamic(_dim(dim_param="batch"))
    assert is_dynamic(_dim())  # no value at all
    assert is_dynamic(_dim(dim_value=-1))  # what exporters write
    assert is_dynamic(_dim(dim_value=-7))
    assert not is_dynamic(_dim(dim_value=0))
    assert not is_dynamic(_dim(dim_value=3))


def _two_inputs() -> onnx.ModelProto:
    """z = x + y, x: [batch, 3], y: [batch, 3], z: [batch, 3] with a value_info [batch] too."""
    nodes = [helper.make_node("Add", ["x", "y"], ["z"]),
             helper.make_node("ReduceSum", ["z"], ["s"], keepdims=0, axes=[1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["batch", 3]),
                                           helper.make_tensor_value_info("y", F, ["batch", 3])],
                              [helper.make_tensor_value_info("s", F, ["batch"])],
                              value_info=[helper.make_tensor_value_info("z", F, ["batch", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)
    onnx.checker.check_model(model, full_check=True)
    return model


def _dims(vi):
    return [d.dim_value if d.WhichOneof("value") == "dim_value" else d.dim_param or None
            for d in vi.type.tensor_type.shape.dim]


def test_an_input_shape_fixes_its_symbols_in_every_other_input_output_and_value_info():
    model = _two_inputs()
    fix_shapes(model, {"x": [4, 3]})
    assert _dims(model.graph.input[0]) == [4, 3]
    assert _dims(model.graph.input[1]) == [4, 3]
    assert _dims(model.graph.output[0]) == [4]
    assert _dims(model.graph.value_info[0]) == [4, 3]
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], (2 * x).sum(axis=1))


def test_a_symbol_given_two_sizes_is_refused():
    with pytest.raises(RewriterError, match="'batch', which is 4 elsewhere, not 5"):
        fix_shapes(_two_inputs(), {"x": [4, 3], "y": [5, 3]})


def test_a_declared_minus_one_takes_the_given_size_and_a_static_dim_must_match():
    model = _two_inputs()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    fix_shapes(model, {"x": [2, 3]})
    assert _dims(model.graph.input[0]) == [2, 3]
    with pytest.raises(RewriterError, match="dim 1 is declared 3, not 4"):
        fix_shapes(_two_inputs(), {"x": [2, 4]})
