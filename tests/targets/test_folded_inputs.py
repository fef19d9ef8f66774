"""onnx2tf 2.6.9 folds no computation: a Conv whose weights are computed from constants becomes the
custom op ONNX_CONV, and a Reshape whose shape is computed from a Shape (a legacy torch channel
shuffle) a graph LiteRT cannot prepare.  convert --target litert==2.6 (``rewrite_forms`` Conv /
``weights_folded`` and Reshape / ``shape_folded``, rewriter/targets/folded_inputs.py) folds the
model's constants and shape chains first.  The rules run without the runtime; with the LiteRT venv
(skipped when absent) the small models run: refused as they are, right converted."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import RewriterError
from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.folded_inputs import computed_inputs, constants_folded
from tests.targets.runtime_runs import ROOT, run_in

DATA = json.loads((ROOT / "rewriter" / "targets" / "data" / "litert.json").read_text())["releases"]


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _computed_kernel(weights_input: bool = False) -> onnx.ModelProto:
    """Conv of x [1, 1, 1, 16] by a kernel Sin(Range(0, 5)) reshaped to [1, 1, 1, 5] (or fed)."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    inputs = [vi("x", T.FLOAT, [1, 1, 1, 16])]
    nodes = [node("Conv", ["x", "k"], ["y"], name="conv", pads=[0, 2, 0, 2])]
    inits = [_ints("kshape", [1, 1, 1, 5])]
    if weights_input:
        inputs.append(vi("k", T.FLOAT, [1, 1, 1, 5]))
    else:
        inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("a", 0), ("b", 5), ("d", 1))]
        nodes[:0] = [node("Range", ["a", "b", "d"], ["r"], name="range"), node("Sin", ["r"], ["s"], name="sin"),
                     node("Reshape", ["s", "kshape"], ["k"], name="kernel")]
    graph = helper.make_graph(nodes, "g", inputs, [vi("y", T.FLOAT, [1, 1, 1, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _channel_shuffle() -> onnx.ModelProto:
    """A legacy torch channel shuffle of x [n, 4, 3, 3], its shapes built from Shape(x) at run time,
    then a mean and a Gemm (onnx2tf, not knowing the rank after the Reshape, writes a graph
    XNNPACK cannot prepare)."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    nodes = [node("Conv", ["x", "w"], ["c"], name="conv"), node("Shape", ["c"], ["s"], name="shape")]
    for i, dim in enumerate("bchw"):
        nodes += [node("Gather", ["s", f"i{i}"], [f"d{dim}"], axis=0, name=f"g{dim}"),
                  node("Unsqueeze", [f"d{dim}", "zero"], [f"u{dim}"], name=f"u{dim}")]
    nodes += [node("Div", ["dc", "two"], ["half"], name="div"), node("Unsqueeze", ["half", "zero"], ["uhalf"], name="uhalf"),
              node("Concat", ["ub", "utwo", "uhalf", "uh", "uw"], ["split_shape"], axis=0, name="cat1"),
              node("Reshape", ["c", "split_shape"], ["r"], name="reshape_split"),
              node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),  # unnamed: the folder must not name it
              node("Concat", ["ub", "uc", "uh", "uw"], ["back_shape"], axis=0, name="cat2"),
              node("Reshape", ["t", "back_shape"], ["back"], name="reshape_back"),
              node("ReduceMean", ["back"], ["mean"], axes=[2, 3], keepdims=0, name="mean"),
              node("Gemm", ["mean", "fc"], ["y"], transB=1, name="fc")]
    inits = [_ints(f"i{i}", i) for i in range(4)] + [_ints("zero", [0]), _ints("utwo", [2]), _ints("two", 2),
                                                     numpy_helper.from_array(np.random.default_rng(1).standard_normal(
                                                         (4, 4, 1, 1)).astype(np.float32), "w"),
                                                     numpy_helper.from_array(np.random.default_rng(2).standard_normal(
                                                         (5, 4)).astype(np.float32), "fc")]
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, ["n", 4, 3, 3])], [vi("y", T.FLOAT, ["n", 5])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _chunk(batch="n") -> onnx.ModelProto:
    """The opset-17 export's chunk of x [n, 4, 3, 3] in two along the channels (Slice bounds from
    Shape(x)), the second half through a depthwise Conv, then a Conv of both."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    rng = np.random.default_rng(3)
    nodes = [node("Shape", ["x"], ["s"], name="shape"), node("Gather", ["s", "one"], ["dc"], axis=0, name="gc"),
             node("Div", ["dc", "two"], ["half"], name="div"), node("Unsqueeze", ["half", "zero"], ["uh"], name="uh"),
             node("Slice", ["x", "zero", "uh", "one1"], ["a"], name="first"),
             node("Slice", ["x", "uh", "end", "one1"], ["b"], name="second"),
             node("Conv", ["b", "dw"], ["bd"], group=2, pads=[1, 1, 1, 1], name="depthwise"),
             node("Concat", ["a", "bd"], ["ab"], axis=1, name="cat"), node("Conv", ["ab", "w"], ["y"], name="conv")]
    inits = [_ints("one", 1), _ints("two", 2), _ints("zero", [0]), _ints("one1", [1]), _ints("end", [2 ** 62]),
             numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "dw"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, [batch, 4, 3, 3])], [vi("y", T.FLOAT, [batch, 4, 3, 3])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_chunk_gets_constant_bounds():
    model = _chunk()
    assert computed_inputs(model, "Slice") == ["first", "second"]
    result, report = convert_for(model, runtime="litert==2.6")
    assert computed_inputs(result, "Slice") == []
    assert any("2 Slice node(s) reading a computed bound" in note for note in report.target_notes)
    feeds = _feeds(model)
    assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])


def _shape_of_static() -> onnx.ModelProto:
    """Reshape(x, Shape(Transpose(x))) with x [2, 6] static: the folder writes Shape's value as a
    Constant of value_ints, which onnx2tf refuses ("Constant node without value")."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    nodes = [node("Transpose", ["x"], ["t"], perm=[1, 0], name="transpose"), node("Shape", ["t"], ["s"], name="shape"),
             node("Reshape", ["x", "s"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, [2, 6])], [vi("y", T.FLOAT, [6, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_folded_constants_become_initializers():
    model = _shape_of_static()
    result, _ = convert_for(model, runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["Reshape"]
    assert result.graph.node[0].input[1] in {t.name for t in result.graph.initializer}
    feeds = _feeds(model)
    assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])
    converted = run_in("litert", "2.6", result, feeds)
    assert converted["ok"], converted
    assert np.array_equal(converted["values"][0], _ort(model, feeds)[0])


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(model):
    shape = [d.dim_value or 2 for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def test_the_data_folds_them_for_litert_2_6():
    forms = parse_target("litert==2.6").rewrite_forms
    assert forms["Conv"]["form"] == "weights_folded" and forms["Reshape"]["form"] == "shape_folded"
    assert "ONNX_CONV" in DATA["2.6"]["rewrite_forms"]["Conv"]["measured"]
    assert "Conv" not in parse_target("openvino==2026.4").rewrite_forms


def test_a_computed_kernel_becomes_a_constant():
    model = _computed_kernel()
    assert computed_inputs(model, "Conv") == ["conv"]
    result, report = convert_for(model, runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["Conv"] and result.graph.node[0].name == "conv"
    assert result.graph.node[0].input[1] in {t.name for t in result.graph.initializer}
    assert any("1 Conv node(s) reading a computed weight" in note and "1 now read constants: 'conv'" in note
               for note in report.target_notes)
    assert np.array_equal(_ort(result, _feeds(model))[0], _ort(model, _feeds(model))[0])


def test_a_channel_shuffle_gets_constant_shapes():
    model = _channel_shuffle()
    assert computed_inputs(model, "Reshape") == ["reshape_split", "reshape_back"]
    result, report = convert_for(model, runtime="litert==2.6")
    assert computed_inputs(result, "Reshape") == []
    assert {n.op_type for n in result.graph.node} == {"Conv", "Reshape", "Transpose", "ReduceMean", "Gemm"}
    assert sorted(n.name for n in result.graph.node) == ["", "conv", "fc", "mean", "reshape_back", "reshape_split"]
    assert any("2 Reshape node(s) reading a computed shape" in note for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    for n in (1, 3):
        feeds = {"x": np.random.default_rng(n).standard_normal((n, 4, 3, 3)).astype(np.float32)}
        assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])


def test_fed_weights_and_constant_ones_are_left():
    model = _computed_kernel(weights_input=True)
    assert computed_inputs(model, "Conv") == []
    assert constants_folded("Conv")(model, "litert 2.6") == []
    node = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.ones((1, 1, 1, 5), np.float32)))
    model = _computed_kernel(weights_input=True)
    del model.graph.input[1]
    model.graph.node.insert(0, node)
    assert computed_inputs(model, "Conv") == []


def test_dequantized_weights_are_taken_as_they_are():
    """(a QDQ model's Conv reads its weights through a DequantizeLinear, which onnx2tf takes)"""
    model = _computed_kernel(weights_input=True)
    del model.graph.input[1]
    model.graph.initializer.extend([numpy_helper.from_array(np.ones((1, 1, 1, 5), np.int8), "kq"),
                                    numpy_helper.from_array(np.array(0.5, np.float32), "ks")])
    model.graph.node.insert(0, helper.make_node("DequantizeLinear", ["kq", "ks"], ["k"], name="dq"))
    assert computed_inputs(model, "Conv") == []


def test_a_conv_of_a_kernel_computed_from_an_input_is_still_refused():
    """(the data's needs_constant: LiteRT runs Conv only with constant weights)"""
    model = _computed_kernel(weights_input=True)
    model.graph.node.insert(0, helper.make_node("Neg", ["k"], ["kn"], name="neg"))
    model.graph.node[1].input[1] = "kn"
    with pytest.raises(RewriterError, match=r"node 'conv' \(Conv\).*'kn' is computed from a graph input"):
        convert_for(model, runtime="litert==2.6")
    assert constants_folded("Conv")(model, "litert 2.6")[0].endswith("0 now read constants: 'conv'")
    assert [n.op_type for n in model.graph.node] == ["Neg", "Conv"]


def test_other_releases_keep_the_computation():
    result, _ = convert_for(_computed_kernel(), runtime="openvino==2026.4")
    assert "Sin" in [n.op_type for n in result.graph.node]


@pytest.mark.parametrize("make,error", [(_computed_kernel, "ONNX_CONV"), (_channel_shuffle, "ONNX_GEMM"),
                                        (_chunk, "XNNPack delegate failed to reshape runtime")])
def test_litert_refuses_the_forms_and_runs_them_folded(make, error):
    model = make()
    feeds = _feeds(model)
    as_is = run_in("litert", "2.6", model, feeds)
    assert not as_is["ok"] and error in as_is["error"]
    converted = run_in("litert", "2.6", convert_for(model, runtime="litert==2.6")[0], feeds)
    assert converted["ok"], converted
    assert np.allclose(converted["values"][0], _ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def _shuffle_unit() -> onnx.ModelProto:
    """A unit of shufflenet_v2's opset-17 export over static dims: x [1, 8, 4, 4] chunked in two by
    Slices whose bounds are (dim 1 + 1) / 2 * k, the second half through a Conv and a Relu, both
    concatenated and shuffled (Reshape [1, 2, 4, 4, 4], Transpose, Reshape back)."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "one1"], ["c"], axis=0),
             node("Add", ["c", "one1"], ["c1"]), node("Div", ["c1", "two1"], ["h"]), node("Mul", ["h", "one1"], ["e1"]),
             node("Slice", ["x", "zero", "e1", "one1"], ["a"], name="first"), node("Mul", ["h", "two1"], ["e2"]),
             node("Slice", ["x", "e1", "e2", "one1"], ["b"], name="second"), node("Conv", ["b", "w"], ["bc"]),
             node("Relu", ["bc"], ["br"]), node("Concat", ["a", "br"], ["ab"], axis=1),
             node("Reshape", ["ab", "split"], ["r"]), node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             node("Reshape", ["t", "back"], ["y"])]
    inits = [_ints("one1", [1]), _ints("two1", [2]), _ints("zero", [0]), _ints("split", [1, 2, 4, 4, 4]),
             _ints("back", [1, 8, 4, 4]),
             numpy_helper.from_array(np.random.default_rng(5).standard_normal((4, 4, 1, 1)).astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, [1, 8, 4, 4])], [vi("y", T.FLOAT, [1, 8, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_tvm_folds_a_static_chunk_it_refuses_and_runs_it():
    """TVM 0.27 (Slice ``bounds_folded``, then ``dims_as_scalars``): shufflenet's unit over static dims
    is refused at load as it is ("CodeGenVM cannot emit", the Concat after the Slices); folded, it runs."""
    model = _shuffle_unit()
    result, report = convert_for(model, runtime="tvm==0.27")
    assert computed_inputs(result, "Slice") == []
    assert any("2 Slice node(s) reading a computed bound" in note and "tvm 0.27" in note for note in report.target_notes)
    feeds = _feeds(model)
    assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "CodeGenVM cannot emit" in as_is["error"]
    converted = run_in("tvm", "0.27", result, feeds)
    assert converted["ok"], converted
    assert np.allclose(converted["values"][0], _ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def _topk_of_a_length() -> onnx.ModelProto:
    """piper_tashkeel's sort of its lengths: TopK whose k is the length's count, from a Shape."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    nodes = [node("Shape", ["lengths"], ["s"]), node("Gather", ["s", "zero0"], ["k0"], axis=0),
             node("Unsqueeze", ["k0", "axis0"], ["k"]), node("TopK", ["lengths", "k"], ["v", "i"], name="sort")]
    graph = helper.make_graph(nodes, "g", [vi("lengths", T.INT64, [3])],
                              [vi("v", T.INT64, [3]), vi("i", T.INT64, [3])],
                              [numpy_helper.from_array(np.int64(0), "zero0"), _ints("axis0", [0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_tvm_folds_a_computed_topk_k_and_runs_it():
    """TVM 0.27 (TopK ``k_folded``) refuses a TopK whose k a Shape chain computes ("cannot handle ShapeExpr
    inputs"; piper_tashkeel_qop with --input-shape: "TopK k must be a constant"); folded, it runs."""
    model = _topk_of_a_length()
    feeds = {"lengths": np.array([5, 9, 7], np.int64)}
    result, report = convert_for(model, runtime="tvm==0.27")
    assert computed_inputs(result, "TopK") == [] and computed_inputs(model, "TopK") == ["sort"]
    assert any("1 TopK node(s) reading a computed k" in note for note in report.target_notes)
    want = _ort(model, feeds)
    assert all(np.array_equal(a, b) for a, b in zip(_ort(result, feeds), want))
    result, _ = convert_for(model, runtime="tract==0.23")  # (tract runs it: left)
    assert computed_inputs(result, "TopK") == ["sort"]
    assert not run_in("tvm", "0.27", model, feeds)["ok"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"], converted
    assert all(np.array_equal(a, b) for a, b in zip(converted["values"], want))
