"""Lowering the IR version: sparse tensors made dense, the features
a pinned IR holds, the IR each element type came with.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracles: ONNX Runtime running the original (which reads its sparse initializers itself) against
the lowered result; dense arrays written out by hand from the spec's index formats; the
checker with full_check; the IR numbers of onnx.proto's ``Version`` enum, written out here.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.convert import convert_model
from rewriter.convert.ir_version import features, needed
from rewriter.errors import ConversionError

F = TensorProto.FLOAT


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _add_sparse(sparse: onnx.SparseTensorProto, dims, opset=10, ir=6) -> onnx.ModelProto:
    graph = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "g", [h.make_tensor_value_info("x", F, dims)],
                         [h.make_tensor_value_info("y", F, dims)], sparse_initializer=[sparse])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)
    onnx.checker.check_model(model)  # (onnx's shape inference does not type a sparse initializer)
    return model


def _dense_after_lowering(model, ir_version=5) -> tuple[onnx.ModelProto, np.ndarray]:
    result, _ = convert_model(model, 10, ir_version=ir_version)  # opset 10 needs IR 5
    assert result.ir_version == ir_version
    assert not result.graph.sparse_initializer
    onnx.checker.check_model(result, full_check=True)
    (w,) = [t for t in result.graph.initializer if t.name == "w"]
    return result, nh.to_array(w)


def test_coo_sparse_initializer_becomes_the_right_dense_tensor():
    """Indices of shape [NNZ, rank]: row i is the coordinates of value i."""
    values = nh.from_array(np.array([1.5, -2.0, 4.0], np.float32), "w")
    indices = nh.from_array(np.array([[0, 1], [1, 0], [1, 2]], np.int64), "w_idx")
    model = _add_sparse(h.make_sparse_tensor(values, indices, [2, 3]), [2, 3])
    result, dense = _dense_after_lowering(model)
    np.testing.assert_array_equal(dense, np.array([[0, 1.5, 0], [-2.0, 0, 4.0]], np.float32))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])


def test_coo_sparse_initializer_of_rank_3():
    values = nh.from_array(np.array([7.0, 8.0], np.float32), "w")
    indices = nh.from_array(np.array([[0, 1, 2], [1, 0, 1]], np.int64), "w_idx")
    model = _add_sparse(h.make_sparse_tensor(values, indices, [2, 2, 3]), [2, 2, 3])
    result, dense = _dense_after_lowering(model)
    want = np.zeros((2, 2, 3), np.float32)
    want[0, 1, 2], want[1, 0, 1] = 7.0, 8.0
    np.testing.assert_array_equal(dense, want)
    x = np.ones((2, 2, 3), np.float32)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])


def test_linear_sparse_initializer_becomes_the_right_dense_tensor():
    values = nh.from_array(np.array([3.0, -1.0, 2.5], np.float32), "w")
    indices = nh.from_array(np.array([0, 4, 5], np.int64), "w_idx")
    model = _add_sparse(h.make_sparse_tensor(values, indices, [2, 3]), [2, 3])
    result, dense = _dense_after_lowering(model)
    np.testing.assert_array_equal(dense, np.array([[3.0, 0, 0], [0, -1.0, 2.5]], np.float32))
    x = np.full((2, 3), 0.5, np.float32)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])


# ------------------------------------------------------------------ a pin at the feature's own IR

def _typed(elem, opset, ir) -> onnx.ModelProto:
    graph = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", elem, [4])],
                         [h.make_tensor_value_info("y", elem, [4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


# (type, the IR version that added it per onnx.proto, an opset that has it in Identity)
AT_ITS_IR = [(TensorProto.BFLOAT16, 4, 13), (TensorProto.FLOAT8E4M3FN, 9, 19), (TensorProto.FLOAT8E5M2, 9, 19),
             (TensorProto.INT4, 10, 21), (TensorProto.UINT4, 10, 21)]


@pytest.mark.parametrize("elem,ir,opset", AT_ITS_IR, ids=[TensorProto.DataType.Name(t) for t, _, _ in AT_ITS_IR])
def test_a_pin_at_the_ir_that_added_a_type_is_accepted(elem, ir, opset):
    model = _typed(elem, opset, 11)
    onnx.checker.check_model(model, full_check=True)
    want = max(ir, onnx.helper.find_min_ir_version_for([h.make_opsetid("", opset)]))
    result, _ = convert_model(model, opset, ir_version=want)
    assert result.ir_version == want
    onnx.checker.check_model(result, full_check=True)
    assert needed(result) == want


@pytest.mark.parametrize("elem,ir,opset", AT_ITS_IR, ids=[TensorProto.DataType.Name(t) for t, _, _ in AT_ITS_IR])
def test_the_ir_of_each_type_is_the_one_onnx_proto_gives(elem, ir, opset):
    model = _typed(elem, opset, 11)
    found = [f for f in features(model) if TensorProto.DataType.Name(elem).lower() in f.what]
    assert found and {f.ir_version for f in found} == {ir}
    if ir > onnx.helper.find_min_ir_version_for([h.make_opsetid("", opset)]):
        with pytest.raises(ConversionError, match=f"the lowest IR version that works is {ir}"):
            convert_model(model, opset, ir_version=ir - 1)


def test_a_pin_at_ir_4_keeps_initializers_outside_the_inputs():
    """IR 4 introduced them: a pin at 4 keeps them where they are (no rewrite needed)."""
    w = nh.from_array(np.array([1.0, 2.0, 3.0], np.float32), "w")
    graph = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "g", [h.make_tensor_value_info("x", F, [3])],
                         [h.make_tensor_value_info("y", F, [3])], [w])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 9)], ir_version=8)
    result, report = convert_model(model, 9, ir_version=4)
    assert result.ir_version == 4
    assert [i.name for i in result.graph.input] == ["x"]
    assert not report.ir_changes
    onnx.checker.check_model(result, full_check=True)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], x + nh.to_array(w))


# ------------------------------------------------------------------ function attribute defaults (IR 9)

def _function_with_a_default(ir=9) -> onnx.ModelProto:
    """y = scaled(x), a local function LeakyRelu(alpha=@alpha) whose alpha defaults to 0.5."""
    inner = h.make_node("LeakyRelu", ["a"], ["b"])
    inner.attribute.append(h.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    fn = h.make_function("local", "scaled", ["a"], ["b"], [inner], [h.make_opsetid("", 18)])
    fn.attribute_proto.append(h.make_attribute("alpha", 0.5))
    graph = h.make_graph([h.make_node("scaled", ["x"], ["y"], domain="local", name="call")], "g",
                         [h.make_tensor_value_info("x", F, [2, 3])], [h.make_tensor_value_info("y", F, [2, 3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("local", 1)],
                         functions=[fn], ir_version=ir)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_function_attribute_defaults_need_ir_9_and_are_inlined_below():
    """onnx.proto: IR 9 added FunctionProto.attribute_proto (default attribute values)."""
    model = _function_with_a_default()
    found = [f for f in features(model) if "attribute default" in f.what]
    assert found and {f.ir_version for f in found} == {9}
    assert needed(model) == 9
    result, report = convert_model(model, 18, ir_version=8)
    assert result.ir_version == 8
    assert not any(f.attribute_proto for f in result.functions)
    assert report.ir_changes
    onnx.checker.check_model(result, full_check=True)


def test_inlining_a_function_keeps_its_attribute_defaults():
    model = _function_with_a_default()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = _ort(model, {"x": x})[0]
    np.testing.assert_allclose(want, np.where(x < 0, 0.5 * x, x), rtol=1e-6)  # the premise: ORT uses the default
    result, _ = convert_model(model, 18, ir_version=8)
    np.testing.assert_allclose(_ort(result, {"x": x})[0], want, rtol=1e-6)


@pytest.mark.parametrize("elem,ir,opset", AT_ITS_IR, ids=[TensorProto.DataType.Name(t) for t, _, _ in AT_ITS_IR])
def test_lowering_to_the_ir_of_a_type_keeps_the_type_and_rewrites_the_rest(elem, ir, opset):
    """A pin at the type's own IR, with something newer that has an exact rewrite (node
    metadata, IR 10, moved to the model's): the rewrite is done and the type stays."""
    model = _typed(elem, opset, 11)
    entry = model.graph.node[0].metadata_props.add()
    entry.key, entry.value = "origin", "layer 1"
    onnx.checker.check_model(model, full_check=True)
    pin = max(ir, onnx.helper.find_min_ir_version_for([h.make_opsetid("", opset)]))
    if pin >= 10:
        pytest.skip("node metadata is IR 10's: nothing newer to rewrite at this pin")
    result, report = convert_model(model, opset, ir_version=pin)
    assert result.ir_version == pin
    assert not result.graph.node[0].metadata_props and report.ir_changes
    assert result.graph.input[0].type.tensor_type.elem_type == elem
    onnx.checker.check_model(result, full_check=True)
