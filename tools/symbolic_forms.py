"""Small models with symbolic input dims, one per form a real model showed a runtime refusing
over its symbolic dims (tools/runtime_probe_symbolic.py runs them as they are and with the
sample's shapes made static, as ``convert --input-shape`` writes them).

Each form is named after the node that fails (``op``) and the way its input is made: the same
op with the same inputs runs in every release when the dims are static. ``FORMS`` maps a form
name to (op, builder); a builder returns (ModelProto, {input: sample array}).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

__all__ = ["FORMS", "OPSET"]

OPSET = 17
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "form", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model)  # the outputs' shapes (rank at least)
    for out, got in zip(model.graph.output, inferred.graph.output):
        out.type.CopyFrom(got.type)
    model.graph.ClearField("value_info")
    onnx.checker.check_model(model, full_check=True)
    return model


def _vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def _out():
    return helper.make_tensor_value_info("y", F, None)


def _i64(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def _rand(*shape, dtype=np.float32):
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


def _flatten(dims, sample):
    model = _model([helper.make_node("Flatten", ["x"], ["y"], axis=1)], [_vi("x", F, dims)], [_out()])
    return model, {"x": _rand(*sample)}


def flatten_two_symbols():
    """Flatten of an input with two symbolic dims (gpt2's and bert's Flatten of the attention
    mask [batch, 1, 1, seq]; tract: "Can not compute a shape with square of symbols")."""
    return _flatten(["batch", "seq", 4], (2, 3, 4))


def flatten_one_symbol():
    """Flatten of an input with one symbolic dim (a CNN's batch): a control."""
    return _flatten(["batch", 3, 4], (2, 3, 4))


def _shape_through_cast(src: str, first: str) -> list:
    """Nodes computing Concat(int64(Slice(int32(Shape(src)), 0, 1)), tail) as ``first``: the
    Paddle and tf2onnx (jax) exports' way to read a dim."""
    return [
        helper.make_node("Shape", [src], ["s"]),
        helper.make_node("Cast", ["s"], ["s32"], to=I32),
        helper.make_node("Slice", ["s32", "st", "en", "ax"], ["s0"]),
        helper.make_node("Cast", ["s0"], ["s0_64"], to=I64),
        helper.make_node("Concat", ["s0_64", "tail"], [first], axis=0),
    ]


def reshape_shape_through_cast():
    """Reshape whose shape is a dim read through a Cast to int32 and back (ppocr_mobile_cls's
    Reshape@18; tract: "shape input is variable")."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), *_shape_through_cast("p", "shape"),
             helper.make_node("Reshape", ["p", "shape"], ["y"])]
    inits = [helper.make_tensor(n, I32, [1], [v]) for n, v in (("st", 0), ("en", 1), ("ax", 0))]
    inits.append(_i64("tail", [-1]))
    model = _model(nodes, [_vi("x", F, ["batch", 3, "h", "w"])], [_out()], inits)
    return model, {"x": _rand(2, 3, 6, 7)}


def expand_shape_through_cast():
    """Expand whose shape is a dim read through a Cast to int32 and back (magika's BroadcastTo;
    tract: "shape input is variable")."""
    nodes = [*_shape_through_cast("x", "shape"), helper.make_node("Unsqueeze", ["x", "last"], ["x1"]),
             helper.make_node("Expand", ["x1", "shape"], ["y"])]
    inits = [helper.make_tensor(n, I32, [1], [v]) for n, v in (("st", 0), ("en", 1), ("ax", 0))]
    inits += [_i64("tail", [8, 4]), _i64("last", [2])]
    model = _model(nodes, [_vi("x", F, ["batch", 8])], [_out()], inits)
    return model, {"x": _rand(3, 8)}


def reshape_shape_of():
    """Reshape to [dim 0 of its input, -1], the dim read by Shape and Gather (int64 all the way):
    the usual export, kept as a control."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"]),
             helper.make_node("Concat", ["b1", "tail"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [helper.make_tensor("zero", I64, [], [0]), _i64("zero1", [0]), _i64("tail", [-1])]
    model = _model(nodes, [_vi("x", F, ["batch", "seq", 4])], [_out()], inits)
    return model, {"x": _rand(2, 5, 4)}


def gru_shape_seq_lens():
    """GRU whose sequence_lens is the sequence length read by Shape (piper_tashkeel's GRU;
    tract: "Non constant seq_len is not supported")."""
    hidden, size = 3, 4
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "st", "en", "ax"], ["t"]),
             helper.make_node("Slice", ["s", "en", "two", "ax"], ["b"]),
             helper.make_node("Expand", ["t", "b"], ["t_b"]),
             helper.make_node("Cast", ["t_b"], ["lens"], to=I32),
             helper.make_node("GRU", ["x", "W", "R", "", "lens"], ["", "h"], hidden_size=hidden)]
    inits = [_i64("st", [0]), _i64("en", [1]), _i64("two", [2]), _i64("ax", [0]),
             onnx.numpy_helper.from_array(_rand(1, 3 * hidden, size), "W"),
             onnx.numpy_helper.from_array(_rand(1, 3 * hidden, hidden), "R")]
    model = _model(nodes, [_vi("x", F, ["seq", "batch", size])], [_vi("h", F, None)], inits)
    return model, {"x": _rand(5, 2, size)}


def _pyramid(last: onnx.NodeProto):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Resize", ["c", "", "scales"], ["u"], mode="nearest"), last]
    inits = [onnx.numpy_helper.from_array(_rand(2, 2, 3, 3), "w"),
             helper.make_tensor("scales", F, [4], [1, 1, 2, 2])]
    model = _model(nodes, [_vi("x", F, [1, 2, "h", "w"])], [_out()], inits)
    return model, {"x": _rand(1, 2, 8, 6)}


def concat_resized():
    """Concat of a value and its copy made half as big by a strided Conv and twice as big again
    by Resize with scales (nudenet's and PP-OCR's feature pyramids; tract: "Impossible to unify
    Sym(h) with MulInt(2, ...)"): the sizes are equal only for even dims."""
    return _pyramid(helper.make_node("Concat", ["x", "u"], ["y"], axis=1))


def resize_symbolic():
    """Resize by scales of an input whose spatial dims are symbolic."""
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")]
    model = _model(nodes, [_vi("x", F, [1, 2, "h", "w"])], [_out()], [helper.make_tensor("scales", F, [4], [1, 1, 2, 2])])
    return model, {"x": _rand(1, 2, 4, 3)}


def add_resized():
    """The same pyramid adding the two instead of concatenating them."""
    return _pyramid(helper.make_node("Add", ["x", "u"], ["y"]))


def conv_value_info_symbol():
    """Conv whose output's value_info names its batch dim with a symbol of its own, not the
    input's (Paddle exports: "DynamicDimension.0"; tract: "Impossible to unify")."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    inits = [onnx.numpy_helper.from_array(_rand(2, 2, 1, 1), "w")]
    model = _model(nodes, [_vi("x", F, ["n", 2, 4, 4])], [_out()], inits)
    model.graph.value_info.append(_vi("c", F, ["DynamicDimension.0", 2, 4, 4]))
    return model, {"x": _rand(3, 2, 4, 4)}


def constant_of_shape_symbols():
    """ConstantOfShape of [batch, seq] read by Shape, added to the input (llama's mask)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", F, [1], [1.0])),
             helper.make_node("Add", ["x", "z"], ["y"])]
    model = _model(nodes, [_vi("x", F, ["batch", "seq"])], [_out()])
    return model, {"x": _rand(2, 5)}


def pad_pads_of_shape():
    """Pad to a fixed length by [0, 0, 0, 16 - n], n the input's length read by Shape (whisper's
    30-second pad of the samples, n7; TVM 0.27: "Dynamic pads are not supported yet"). The Shape is
    read through a Cast, as ``convert --target tvm`` writes it for the Sub."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Cast", ["s"], ["s64"], to=I64), helper.make_node("Sub", ["full", "s64"], ["d"]),
             helper.make_node("Mul", ["d", "last"], ["pads"]), helper.make_node("Pad", ["x", "pads"], ["y"])]
    inits = [helper.make_tensor("full", I64, [], [16]), _i64("last", [0, 0, 0, 1])]
    model = _model(nodes, [_vi("x", F, [1, "n"])], [_out()], inits)
    return model, {"x": _rand(1, 5)}


def concat_symbol_meets_value():
    """Concat along axis 2 of a graph input [1, 2, p, d] (a past key whose head size the model
    names "kv_cache_dim") and a value computed [1, 2, 3, 4], then a Reshape to [0, 0, -1]
    (onnxruntime-genai's Llama: tract "Impossible to unify Sym(kv_cache_dim) with Val(16)"; TVM 0.27
    loses the Concat's shape)."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["k"]),
             helper.make_node("Concat", ["past", "k"], ["c"], axis=2),
             helper.make_node("Reshape", ["c", "flat"], ["y"])]
    inits = [helper.make_tensor("two", F, [], [2.0]), _i64("flat", [0, 0, -1])]
    model = _model(nodes, [_vi("past", F, [1, 2, "p", "d"]), _vi("x", F, [1, 2, 3, 4])], [_out()], inits)
    return model, {"past": _rand(1, 2, 5, 4), "x": _rand(1, 2, 3, 4)}


def sub_of_shifted_slices():
    """x[:, 1:] - 0.97 * x[:, :-1] on an input [1, n], then a Pad (nemo's preemphasis, n4_2_n23;
    TVM 0.27 cannot tell the two slices' lengths are equal and the Pad is refused: "emit_te now
    only supports Tensor that has ShapeExpr shape")."""
    nodes = [helper.make_node("Slice", ["x", "one", "big", "one"], ["a"]),
             helper.make_node("Slice", ["x", "zero", "minus_one", "one"], ["b"]),
             helper.make_node("Mul", ["k", "b"], ["kb"]), helper.make_node("Sub", ["a", "kb"], ["d"]),
             helper.make_node("Pad", ["d", "pads"], ["y"])]
    inits = [_i64("one", [1]), _i64("zero", [0]), _i64("big", [2 ** 63 - 1]), _i64("minus_one", [-1]),
             _i64("pads", [0, 1, 0, 0]), helper.make_tensor("k", F, [], [0.97])]
    model = _model(nodes, [_vi("x", F, [1, "n"])], [_out()], inits)
    return model, {"x": _rand(1, 6)}


def _swap_select(compare: list) -> onnx.ModelProto:
    nodes = [helper.make_node("Shape", ["x"], ["s"]), *compare,
             helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Where", ["c", "x", "n"], ["y"])]
    inits = [helper.make_tensor("last", I64, [], [-1]), helper.make_tensor("one", I64, [], [1]),
             _i64("tail", [1, 0])]
    return _model(nodes, [_vi("x", F, ["batch", 3, "h", "w"])], [_out()], inits)


def lessorequal_dim_of_shape():
    """Where(dim -1 of x <= 1, x, -x), the dim read by Shape and Gather: the QLinearAdd lowering's
    choice of ONNX Runtime's span order at run time (ppocr_mobile_cls_qdq's fused QLinearAdds; TVM
    0.27: "Cannot use and / or / not operator to Expr")."""
    compare = [helper.make_node("Gather", ["s", "last"], ["d"], axis=0),
               helper.make_node("LessOrEqual", ["d", "one"], ["c"])]
    return _swap_select(compare), {"x": _rand(2, 3, 4, 1)}


def equal_dims_of_shape():
    """Where(any of the last two dims of x == 1, x, -x), the dims read by Shape and Gather (the same
    lowering's test of which axis broadcasts, with a rank-2 B)."""
    compare = [helper.make_node("Gather", ["s", "tail"], ["d"], axis=0),
               helper.make_node("Equal", ["d", "one"], ["e"]),
               helper.make_node("Cast", ["e"], ["ei"], to=I64),
               helper.make_node("ReduceMax", ["ei"], ["m"], keepdims=0),
               helper.make_node("Cast", ["m"], ["c"], to=TensorProto.BOOL)]
    return _swap_select(compare), {"x": _rand(2, 3, 4, 1)}


FORMS = {
    "flatten_two_symbols": ("Flatten", flatten_two_symbols),
    "flatten_one_symbol": ("Flatten", flatten_one_symbol),
    "reshape_shape_through_cast": ("Reshape", reshape_shape_through_cast),
    "expand_shape_through_cast": ("Expand", expand_shape_through_cast),
    "reshape_shape_of": ("Reshape", reshape_shape_of),
    "gru_shape_seq_lens": ("GRU", gru_shape_seq_lens),
    "concat_resized": ("Concat", concat_resized),
    "add_resized": ("Add", add_resized),
    "resize_symbolic": ("Resize", resize_symbolic),
    "conv_value_info_symbol": ("Conv", conv_value_info_symbol),
    "constant_of_shape_symbols": ("ConstantOfShape", constant_of_shape_symbols),
    "pad_pads_of_shape": ("Pad", pad_pads_of_shape),
    "concat_symbol_meets_value": ("Concat", concat_symbol_meets_value),
    "sub_of_shifted_slices": ("Sub", sub_of_shifted_slices),
    "lessorequal_dim_of_shape": ("LessOrEqual", lessorequal_dim_of_shape),
    "equal_dims_of_shape": ("Equal", equal_dims_of_shape),
}
