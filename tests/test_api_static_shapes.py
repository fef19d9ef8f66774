"""``input_shapes`` / ``fix_dims`` of ``convert_opset`` and ``optimize_model``: the command line's
``--input-shape`` / ``--fix-dim``, so the Python API gives the same model as the CLI where a runtime
needs static dims (TVM refuses a Reshape whose shape is read through a Cast of a Shape unless the
dims are static and it is folded). Oracles: the CLI's written file, ONNX Runtime's run of the
original, onnx's full checker."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.cli import main
from rewriter.errors import RewriterError

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def _tensordot(dims=("a", "b", 4)) -> onnx.ModelProto:
    """tf2onnx's Tensordot: x [a, b, c] reshaped to [a * b, c] by a shape computed in int32 from
    Cast(Shape(x)) and cast back to int64."""
    consts = [numpy_helper.from_array(np.array(v, dtype=d), n) for n, v, d in
              (("lead", [0], np.int64), ("two", [2], np.int64), ("last", [-1], np.int32))]
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["s32"], to=I32),
             helper.make_node("Slice", ["s32", "lead", "two"], ["ab"]),
             helper.make_node("ReduceProd", ["ab"], ["p"], keepdims=1),
             helper.make_node("Concat", ["p", "last"], ["shape32"], axis=0),
             helper.make_node("Cast", ["shape32"], ["shape"], to=I64),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="tensordot")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(dims))],
                              [helper.make_tensor_value_info("y", F, ["ab", dims[2]])], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _cli(tmp_path, model, *argv) -> onnx.ModelProto:
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, src)
    assert main([argv[0], str(src), *argv[1:], "-o", str(out)]) == 0
    return onnx.load(out)


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def test_convert_for_tvm_with_input_shapes_is_the_cli_model(tmp_path):
    model = _tensordot()
    before = model.SerializeToString()
    with pytest.raises(RewriterError, match="tensordot"):  # symbolic dims: TVM refuses the form, named
        rewriter.convert_opset(model, target="tvm==0.27")
    got = rewriter.convert_opset(model, target="tvm==0.27", input_shapes={"x": [2, 3, 4]})
    assert model.SerializeToString() == before  # the caller's model is not touched
    onnx.checker.check_model(got, full_check=True)
    assert not {"Shape", "Cast"} & {n.op_type for n in got.graph.node}
    assert [d.dim_value for d in got.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 4]
    cli = _cli(tmp_path, model, "convert", "--target", "tvm==0.27", "--input-shape", "x:2,3,4")
    assert got.graph.SerializeToString() == cli.graph.SerializeToString()
    assert list(got.opset_import) == list(cli.opset_import) and got.ir_version == cli.ir_version
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(_run(got, x)[0], _run(model, x)[0])


def test_fix_dims_fixes_a_symbol_everywhere(tmp_path):
    model = _tensordot()
    got = rewriter.convert_opset(model, 13, fix_dims={"a": 5})
    assert got.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 5
    assert got.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "b"
    cli = _cli(tmp_path, model, "convert", "--opset", "13", "--fix-dim", "a=5")
    assert got.graph.SerializeToString() == cli.graph.SerializeToString()


def test_optimize_with_input_shapes_is_the_cli_model(tmp_path):
    model = _tensordot()
    plain = rewriter.optimize_model(model)
    assert "Shape" in {n.op_type for n in plain.graph.node}  # symbolic: nothing to fold
    got = rewriter.optimize_model(model, input_shapes={"x": (2, 3, 4)})
    assert not {"Shape", "Cast", "Concat"} & {n.op_type for n in got.graph.node}
    cli = _cli(tmp_path, model, "optimize", "--input-shape", "x:2,3,4")
    assert got.graph.SerializeToString() == cli.graph.SerializeToString()
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(_run(got, x)[0], _run(model, x)[0])


@pytest.mark.parametrize("kwargs, text", [
    ({"input_shapes": [("x", [2, 3, 4])]}, "input_shapes must be a dict"),
    ({"input_shapes": {"x": 2}}, r"input_shapes\['x'\] must be a list of ints"),
    ({"input_shapes": {"x": [2, -1, 4]}}, r"input_shapes\['x'\] must be a list of ints >= 0"),
    ({"input_shapes": {"x": [2, True, 4]}}, r"input_shapes\['x'\]"),
    ({"input_shapes": {1: [2, 3, 4]}}, "input_shapes must be a dict of names"),
    ({"fix_dims": {"a": "5"}}, r"fix_dims\['a'\] must be an int >= 0"),
    ({"fix_dims": {"a": -5}}, r"fix_dims\['a'\]"),
])
def test_wrong_types_raise_type_error(kwargs, text):
    with pytest.raises(TypeError, match=text):
        rewriter.convert_opset(_tensordot(), 13, **kwargs)
    with pytest.raises(TypeError, match=text):
        rewriter.optimize_model(_tensordot(), **kwargs)


@pytest.mark.parametrize("kwargs, text", [
    ({"input_shapes": {"z": [2, 3, 4]}}, "input_shapes: the model has no graph input 'z' \\(inputs: x\\)"),
    ({"input_shapes": {"x": [2, 3]}}, "input_shapes x: 2 dim\\(s\\) given, the input has rank 3"),
    ({"input_shapes": {"x": [2, 3, 5]}}, "input_shapes x: dim 2 is declared 4, not 5"),
    ({"fix_dims": {"c": 1}}, "fix_dims: no declared shape uses the symbol\\(s\\) 'c'"),
])
def test_names_and_sizes_the_model_refuses(kwargs, text):
    with pytest.raises(RewriterError, match=text):
        rewriter.convert_opset(_tensordot(), 13, **kwargs)


def test_the_pass_gives_the_functions_model():
    import onnx_ir as ir

    model = _tensordot()
    want = rewriter.convert_opset(model, target="tvm==0.27", input_shapes={"x": [2, 3, 4]})
    result = rewriter.ConvertOpsetPass(target="tvm==0.27", input_shapes={"x": [2, 3, 4]})(ir.from_proto(model))
    assert result.modified
    same = ir.to_proto(ir.from_proto(want))  # (onnx_ir writes an initializer's value_info)
    assert ir.to_proto(result.model).graph.SerializeToString() == same.graph.SerializeToString()
    with pytest.raises(TypeError, match=r"input_shapes\['x'\]"):  # when made, as its other arguments
        rewriter.ConvertOpsetPass(13, input_shapes={"x": "2,3,4"})


def _mlp(dims=("n", 8)) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(dims))],
                              [helper.make_tensor_value_info("y", F, [dims[0], 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_precision_with_input_shapes_is_the_cli_model(tmp_path):
    import onnx_ir as ir

    model = _mlp()
    got = rewriter.convert_precision(model, "float16", input_shapes={"x": [3, 8]}, calibrate=True)
    assert [d.dim_value for d in got.graph.input[0].type.tensor_type.shape.dim] == [3, 8]
    assert got.graph.output[0].type.tensor_type.shape.dim[0].dim_value == 3
    cli = _cli(tmp_path, model, "convert", "--dtype", "float16", "--input-shape", "x:3,8", "--calibrate")
    assert got.graph.SerializeToString() == cli.graph.SerializeToString()
    passed = rewriter.ConvertPrecisionPass("float16", input_shapes={"x": [3, 8]}, calibrate=True)(ir.from_proto(model))
    same = ir.to_proto(ir.from_proto(got))
    assert ir.to_proto(passed.model).graph.SerializeToString() == same.graph.SerializeToString()
    with pytest.raises(TypeError, match=r"fix_dims\['n'\]"):
        rewriter.convert_precision(model, "float16", fix_dims={"n": 1.5})


def test_lower_ops_with_input_shapes_is_the_cli_model(tmp_path):
    """A lowering that reads a dim writes it as a constant once the dim is fixed: QLinearSoftmax's table
    for a reduced length given by --input-shape, the same model from the API and the CLI."""
    from rewriter.lowering import lower_ops

    inits = [numpy_helper.from_array(np.array(v, dt), n) for n, v, dt in
             (("x_s", 0.05, np.float32), ("x_z", 0, np.uint8), ("y_s", 1 / 256, np.float32), ("y_z", 0, np.uint8))]
    node = helper.make_node("QLinearSoftmax", ["X", "x_s", "x_z", "y_s", "y_z"], ["Y"], domain="com.microsoft",
                            axis=-1, opset=13, name="softmax")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.UINT8, ["n", "d"])],
                              [helper.make_tensor_value_info("Y", TensorProto.UINT8, ["n", "d"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    dynamic = lower_ops(model, "com.microsoft")
    assert "Range" in {n.op_type for n in dynamic.graph.node}  # the table chosen at run time
    got = lower_ops(model, "com.microsoft", input_shapes={"X": [2, 10]})
    assert "Range" not in {n.op_type for n in got.graph.node}  # the table for 10, a constant
    cli = _cli(tmp_path, model, "convert", "--lower-ops", "com.microsoft", "--input-shape", "X:2,10")
    assert got.graph.SerializeToString() == cli.graph.SerializeToString()
    import onnx_ir as ir

    passed = rewriter.LowerOpsPass("com.microsoft", input_shapes={"X": [2, 10]})(ir.from_proto(model))
    same = ir.to_proto(ir.from_proto(got))
    assert ir.to_proto(passed.model).graph.SerializeToString() == same.graph.SerializeToString()
    x = np.random.default_rng(4).integers(0, 256, (2, 10)).astype(np.uint8)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    np.testing.assert_array_equal(
        ort.InferenceSession(got.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0], want)
