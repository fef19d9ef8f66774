"""The IR version follows the target: each IR feature found, the lowest IR chosen, a pinned IR
reached by exact rewrites or refused naming the feature.

Oracles: the IR version each feature came with, as onnx.proto's ``Version`` enum lists it
(written out here, not read from the code under test); ``onnx.checker`` (full check) on the
result at its IR version; ONNX Runtime running the result against the original."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from rewriter.convert.ir_version import MOVED_METADATA
from rewriter.errors import ConversionError

F = TensorProto.FLOAT


def _relu_model(opset=13, ir=7, **graph_kw):
    nodes = graph_kw.pop("nodes", [helper.make_node("Relu", ["x"], ["y"], name="relu")])
    graph = helper.make_graph(nodes, "g", graph_kw.pop("inputs", [helper.make_tensor_value_info("x", F, [2, 3])]),
                              graph_kw.pop("outputs", [helper.make_tensor_value_info("y", F, [2, 3])]), **graph_kw)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _refused_below(model, opset, ir, words):
    """Converting to ``ir`` - 1 fails naming the feature and ``ir`` as the lowest that works."""
    with pytest.raises(ConversionError) as e:
        convert_model(model, opset, ir_version=ir - 1)
    message = str(e.value)
    assert all(w in message for w in words), message
    assert f"the lowest IR version that works is {ir}" in message, message


# ------------------------------------------------------------ the automatic choice

def test_going_down_gives_the_lowest_ir_the_result_needs():
    # a dynamo export carries IR 10 at opset 18; ONNX Runtime 1.15 loads up to IR 9
    model = _relu_model(opset=18, ir=10)
    result, _ = convert_model(model, 17)
    assert result.ir_version == 8  # opset 17 came with IR 8 (onnx 1.12)
    result, _ = convert_model(model, 11)
    assert result.ir_version == 6
    onnx.checker.check_model(result, full_check=True)


def test_going_up_keeps_the_ir_unless_the_target_needs_more():
    model = _relu_model(opset=13, ir=9)
    assert convert_model(model, 18)[0].ir_version == 9
    assert convert_model(_relu_model(opset=13, ir=7), 21)[0].ir_version == 10


def test_a_pinned_ir_below_what_the_opset_imports_need_is_refused():
    with pytest.raises(ConversionError, match=r"opset imports \(ai.onnx 18\) need IR 8"):
        convert_model(_relu_model(opset=13), 18, ir_version=7)
    assert convert_model(_relu_model(opset=13), 18, ir_version=8)[0].ir_version == 8


def test_ir_versions_outside_what_onnx_knows_are_refused():
    for bad in (1, 2, onnx.IR_VERSION + 1):
        with pytest.raises(Exception, match="ir-version must be in 3"):
            convert_model(_relu_model(), 11, ir_version=bad)


# ------------------------------------------------------------ features rewritten exactly

def test_initializers_outside_the_inputs_become_inputs_for_ir_3():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    model = _relu_model(opset=8, ir=4, nodes=[helper.make_node("Add", ["x", "w"], ["s"]),
                                              helper.make_node("Relu", ["s"], ["y"])], initializer=[w])
    result, report = convert_model(model, 8, ir_version=3)
    assert result.ir_version == 3 and "w" in [i.name for i in result.graph.input]
    assert any("graph inputs" in c for c in report.ir_changes)
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run(result, {"x": x})[0], _run(model, {"x": x})[0])


def test_a_subgraph_initializer_moves_to_the_main_graph_for_ir_3():
    c = numpy_helper.from_array(np.array([5.0], dtype=np.float32), "c")
    then = helper.make_graph([helper.make_node("Add", ["x", "c"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2, 3])], [c])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [2, 3])])
    model = _relu_model(opset=8, ir=4, nodes=[helper.make_node("If", ["b"], ["y"], then_branch=then,
                                                               else_branch=other)],
                        inputs=[helper.make_tensor_value_info("x", F, [2, 3]),
                                helper.make_tensor_value_info("b", TensorProto.BOOL, [])])
    result, _ = convert_model(model, 8, ir_version=3)
    assert not result.graph.node[0].attribute[0].g.initializer or \
        not any(a.g.initializer for a in result.graph.node[0].attribute)
    assert "c" in [t.name for t in result.graph.initializer] and "c" in [i.name for i in result.graph.input]
    onnx.checker.check_model(result, full_check=True)
    x = np.ones((2, 3), np.float32)
    for b in (True, False):
        feeds = {"x": x, "b": np.array(b)}
        np.testing.assert_array_equal(_run(result, feeds)[0], _run(model, feeds)[0])


def test_sparse_initializers_become_dense_below_ir_6():
    values = numpy_helper.from_array(np.array([1.5, -2.0], dtype=np.float32), "w")
    indices = numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "w_idx")
    sparse = helper.make_sparse_tensor(values, indices, [2, 3])
    model = _relu_model(opset=10, ir=6, nodes=[helper.make_node("Add", ["x", "w"], ["s"]),
                                               helper.make_node("Relu", ["s"], ["y"])], sparse_initializer=[sparse])
    _refused_below_dense = convert_model(model, 10, ir_version=5)[0]
    assert not _refused_below_dense.graph.sparse_initializer
    dense = numpy_helper.to_array(_refused_below_dense.graph.initializer[0])
    np.testing.assert_array_equal(dense, np.array([[0, 1.5, 0], [0, -2.0, 0]], np.float32))
    onnx.checker.check_model(_refused_below_dense, full_check=True)


def _function_model(ir=10, **fn_kw):
    fn = helper.make_function("local", "twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 18)], **fn_kw)
    graph = helper.make_graph([helper.make_node("twice", ["x"], ["y"], domain="local", name="call")], "g",
                              [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
                             functions=[fn], ir_version=ir)


def test_model_local_functions_are_inlined_below_ir_8():
    model = _function_model(ir=8)
    result, report = convert_model(model, 13, ir_version=7)
    assert not result.functions and [n.op_type for n in result.graph.node] == ["Add"]
    assert any("inlined 1 model-local function" in c for c in report.ir_changes)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_run(result, {"x": x})[0], 2 * x)
    # without a pin, going down keeps the functions (IR 8 holds them)
    assert convert_model(model, 15)[0].functions


def test_node_metadata_moves_to_the_model_below_ir_10():
    model = _relu_model(opset=18, ir=10)
    entry = model.graph.node[0].metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.stack_trace", "File model.py, line 3"
    result, report = convert_model(model, 18, ir_version=9)
    assert not result.graph.node[0].metadata_props
    moved = {p.key: p.value for p in result.metadata_props}[MOVED_METADATA]
    assert "File model.py, line 3" in moved and "relu" in moved
    assert result.ir_version == 9 and report.ir_changes
    onnx.checker.check_model(result, full_check=True)


# ------------------------------------------------------------ features no older IR can hold

def _typed_model(elem, opset=21, ir=10):
    return helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="id")], "g",
        [helper.make_tensor_value_info("x", elem, [4])], [helper.make_tensor_value_info("y", elem, [4])]),
        opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


# (element type, the IR version that added it, per onnx.proto)
TYPES = [(TensorProto.BFLOAT16, 4), (TensorProto.FLOAT8E4M3FN, 9), (TensorProto.FLOAT8E5M2FNUZ, 9),
         (TensorProto.INT4, 10), (TensorProto.UINT4, 10), (TensorProto.FLOAT4E2M1, 11),
         (TensorProto.FLOAT8E8M0, 12), (TensorProto.INT2, 13)]


@pytest.mark.parametrize("elem, ir", TYPES, ids=[TensorProto.DataType.Name(t) for t, _ in TYPES])
def test_a_type_is_refused_below_the_ir_that_added_it(elem, ir):
    opset = {4: 13, 9: 19, 10: 21, 11: 23, 12: 24, 13: 25}[ir]
    model = _typed_model(elem, opset=opset, ir=max(ir, 10))
    name = TensorProto.DataType.Name(elem).lower()
    with pytest.raises(ConversionError) as e:
        convert_model(model, opset, ir_version=ir - 1)
    assert f"a {name} tensor type of value 'x'" in str(e.value)
    assert convert_model(model, opset, ir_version=max(ir, onnx.helper.find_min_ir_version_for(
        [helper.make_opsetid("", opset)])))[0]


def test_training_info_needs_ir_7():
    model = _relu_model(opset=12, ir=7)
    model.training_info.add()
    _refused_below(model, 12, 7, ["training info"])


def test_quantization_annotations_need_ir_5():
    model = _relu_model(opset=9, ir=5)
    ann = model.graph.quantization_annotation.add()
    ann.tensor_name = "x"
    _refused_below(model, 9, 5, ["quantization annotations"])


def test_optional_types_need_ir_8():
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))
    model = _relu_model(opset=15, ir=8)
    model.graph.value_info.append(opt)
    with pytest.raises(ConversionError, match="an optional type of value 'o'"):
        convert_model(model, 15, ir_version=7)


def test_device_configurations_need_ir_11():
    model = _relu_model(opset=21, ir=11)
    model.configuration.add().name = "two devices"
    _refused_below(model, 21, 11, ["multi-device configurations"])


def test_every_feature_is_named_with_where_it_is():
    model = _relu_model(opset=21, ir=11)
    model.configuration.add().name = "d"
    model.training_info.add()
    with pytest.raises(ConversionError) as e:
        convert_model(model, 21, ir_version=10)
    assert "multi-device configurations in the model (needs IR 11)" in str(e.value)
