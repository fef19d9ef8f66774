"""The other forms convert writes for TVM 0.27 (``rewrite_forms`` of tvm.json): pools with auto_pad
SAME and strides 1 given explicit pads (rewriter/targets/same_pads.py; PP-OCRv6_rec_small's
MaxPool over a symbolic width), Identity / scalar Reshape nodes of shape values taken out and a
Shape read by an op TVM refuses a shape for read through a Cast (rewriter/targets/dim_scalars.py;
the Paddle exports' Identity of a Shape, whisper's Sub of the samples' count), a Reshape of a
scalar dim to [1] written as an Unsqueeze (the GroupQueryAttention lowering's total_sequence_length),
and the Pad whose pads come from dims that are not static and the Concat of a symbolic dim with a
static one, which TVM and tract need static (rewriter/targets/static_dims.py, forms
pad_pads_of_shape and concat_symbol_meets_value of tools/symbolic_forms.py).  With the TVM venv (skipped when absent) the
small models are refused as they are and run right converted."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.conversion_report import ConversionBlocked
from rewriter.convert.for_target import convert_for
from rewriter.targets.dim_scalars import (
    SHAPE_READERS,
    scalar_reshapes_unsqueezed,
    shape_no_ops_bypassed,
    shapes_cast_for_readers,
)
from rewriter.targets.same_pads import explicit_pads
from tests.targets.runtime_runs import run_in

node, vi = helper.make_node, helper.make_tensor_value_info
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, inits=(), opset=17, outputs=None):
    graph = helper.make_graph(nodes, "g", inputs, outputs or [vi("y", F, None)], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model)
    for out, got in zip(model.graph.output, inferred.graph.output):
        out.type.CopyFrom(got.type)
    return model


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _copy(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _pool(op="MaxPool", mode="SAME_UPPER", kernel=(2, 2), strides=None, dilations=None, **extra):
    attrs = {"auto_pad": mode, "kernel_shape": list(kernel), **extra}
    if strides is not None:
        attrs["strides"] = list(strides)
    if dilations is not None:
        attrs["dilations"] = list(dilations)
    return _model([node(op, ["x"], ["y"], name="pool", **attrs)], [vi("x", F, [1, 2, 5, "w"])])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("kernel,dilations", [((2, 2), None), ((3, 2), None), ((2, 3), (1, 1)), ((4, 1), None)])
@pytest.mark.parametrize("width", [1, 4, 7])
def test_same_pads_same_values(op, mode, kernel, dilations, width):
    if dilations is not None and op == "AveragePool":
        pytest.skip("AveragePool has dilations from opset 19 only")
    model = _pool(op, mode, kernel, strides=[1, 1] if width == 4 else None, dilations=dilations)
    out = _copy(model)
    notes = explicit_pads(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    attrs = {a.name: helper.get_attribute_value(a) for a in out.graph.node[0].attribute}
    assert "auto_pad" not in attrs and len(attrs["pads"]) == 4 and "'pool'" in notes[0] and "tvm 0.27" in notes[0]
    feeds = {"x": np.random.default_rng(width).standard_normal((1, 2, 5, width)).astype(np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds)[0], _ort(model, feeds)[0])


def test_same_pads_values():
    out = _pool(mode="SAME_UPPER", kernel=(4, 3), dilations=(1, 1))
    explicit_pads(out, "tvm 0.27")
    assert helper.get_attribute_value(out.graph.node[0].attribute[-1]) == [1, 1, 2, 1]  # totals 3 and 2
    out = _pool(mode="SAME_LOWER", kernel=(4, 2))
    explicit_pads(out, "tvm 0.27")
    assert helper.get_attribute_value(out.graph.node[0].attribute[-1]) == [2, 1, 1, 0]


@pytest.mark.parametrize("model", [_pool(strides=[1, 2]), _pool(dilations=[1, 2]), _pool(mode="VALID"),
                                   _pool(mode="NOTSET"),
                                   _model([node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", kernel_shape=[1, 1])],
                                          [vi("x", F, [1, 2, 5, "w"])],
                                          [numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")])],
                         ids=["stride_2", "dilation_2", "valid", "notset", "conv"])
def test_same_pads_left_as_is(model):
    before = model.SerializeToString()
    assert explicit_pads(model, "tvm 0.27") == []
    assert model.SerializeToString() == before


def _paddle_dim(identity_output: str = "w2"):
    """x [1, 2, w] + a Reshape of x to [1, 2, w] built as Paddle writes it: Shape, Identity,
    Gather of a scalar index, Identity, Reshape to [], Unsqueeze, Concat."""
    inits = [numpy_helper.from_array(np.array(2, np.int64), "k2"), numpy_helper.from_array(np.array([], np.int64), "empty"),
             numpy_helper.from_array(np.array([0], np.int64), "k0"), numpy_helper.from_array(np.array([1, 2], np.int64), "lead")]
    nodes = [node("Shape", ["x"], ["s"], name="shape"), node("Identity", ["s"], ["s2"], name="id_shape"),
             node("Gather", ["s2", "k2"], ["w"], axis=0, name="dim"), node("Identity", ["w"], ["w2"], name="id_dim"),
             node("Reshape", [identity_output, "empty"], ["w3"], name="scalar_reshape"),
             node("Unsqueeze", ["w3", "k0"], ["w4"], name="unsq"),
             node("Concat", ["lead", "w4"], ["shape_out"], axis=0, name="concat"),
             node("Reshape", ["x", "shape_out"], ["xr"], name="reshape"), node("Add", ["x", "xr"], ["y"], name="add")]
    return _model(nodes, [vi("x", F, [1, 2, "w"])], inits)


def test_no_ops_bypassed():
    model = _paddle_dim()
    out = _copy(model)
    notes = shape_no_ops_bypassed(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    names = [n.name for n in out.graph.node]
    assert "id_shape" not in names and "id_dim" not in names and "scalar_reshape" not in names and "reshape" in names
    assert notes and notes[0].startswith("3 ") and "tvm 0.27" in notes[0]
    assert next(n for n in out.graph.node if n.name == "dim").input[0] == "s"
    assert next(n for n in out.graph.node if n.name == "unsq").input[0] == "w"
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 3)).astype(np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds)[0], _ort(model, feeds)[0])


def test_no_ops_kept():
    """An Identity of a graph input's values, one writing a graph output, a Reshape to [] of a
    1-element tensor (not a no-op) and an Identity of constants only stay."""
    inits = [numpy_helper.from_array(np.array([], np.int64), "empty"), numpy_helper.from_array(np.array([3], np.int64), "c")]
    nodes = [node("Identity", ["x"], ["xi"], name="of_values"), node("Shape", ["x"], ["s"]),
             node("Identity", ["s"], ["s_out"], name="to_output"),
             node("Gather", ["s", "c"], ["g1"], axis=0), node("Reshape", ["g1", "empty"], ["g00"], name="squeezes"),
             node("Add", ["g00", "c"], ["g0"]),
             node("Identity", ["c"], ["ci0"], name="of_constant"), node("Add", ["ci0", "c"], ["ci"]),
             node("Add", ["xi", "xi"], ["y"])]
    outputs = [vi("y", F, None), vi("s_out", I64, [4]), vi("g0", I64, [1]), vi("ci", I64, [1])]
    model = _model(nodes, [vi("x", F, [1, 2, 3, "w"])], inits, outputs=outputs)
    before = model.SerializeToString()
    assert shape_no_ops_bypassed(model, "tvm 0.27") == []
    assert model.SerializeToString() == before


def test_no_op_read_in_a_subgraph_kept():
    branch = helper.make_graph([node("Identity", ["s2"], ["b"])], "b", [], [vi("b", I64, [3])])
    nodes = [node("Shape", ["x"], ["s"]), node("Identity", ["s"], ["s2"], name="read_inside"),
             node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)]
    model = _model(nodes, [vi("x", F, [1, 2, "w"]), vi("cond", TensorProto.BOOL, [])], outputs=[vi("y", I64, [3])])
    assert shape_no_ops_bypassed(model, "tvm 0.27") == []
    assert any(n.name == "read_inside" for n in model.graph.node)


def _whisper_pad(static: bool = False):
    """Pad of x [1, n] by [0, 0, 0, 16 - n], n read by Shape and subtracted from 16 (whisper's n4 / n7)."""
    inits = [helper.make_tensor("full", I64, [], [16]), numpy_helper.from_array(np.array([0, 0, 0, 1], np.int64), "last")]
    nodes = [node("Shape", ["x"], ["s"], start=1, end=2, name="shape"), node("Sub", ["full", "s"], ["d"], name="n4"),
             node("Mul", ["d", "last"], ["pads"], name="mul"), node("Pad", ["x", "pads"], ["y"], name="n7")]
    return _model(nodes, [vi("x", F, [1, 5 if static else "n"])], inits)


def test_shape_cast_for_readers():
    model = _whisper_pad()
    out = _copy(model)
    notes = shapes_cast_for_readers(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    sub = next(n for n in out.graph.node if n.name == "n4")
    cast = next(n for n in out.graph.node if sub.input[1] in n.output)
    assert cast.op_type == "Cast" and cast.input[0] == "s" and helper.get_attribute_value(cast.attribute[0]) == I64
    assert [n.name for n in out.graph.node].index(cast.name) < [n.name for n in out.graph.node].index("n4")
    assert notes and "'n4'" in notes[0] and notes[0].startswith("1 ")
    feeds = {"x": np.ones((1, 5), np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds)[0], _ort(model, feeds)[0])


@pytest.mark.parametrize("reader", ["Reshape", "ConstantOfShape", "Gather", "Slice", "Expand", "Concat", "Cast",
                                    "Squeeze"])
def test_shape_readers_left_as_is(reader):
    assert reader in SHAPE_READERS
    inputs = {"Reshape": ["x", "s"], "ConstantOfShape": ["s"], "Gather": ["s", "k"], "Slice": ["s", "k", "k2"],
              "Expand": ["x", "s"], "Concat": ["s", "s"], "Cast": ["s"], "Squeeze": ["s"]}[reader]
    attrs = {"Gather": {"axis": 0}, "Concat": {"axis": 0}, "Cast": {"to": I64}}.get(reader, {})
    inits = [numpy_helper.from_array(np.array([0], np.int64), "k"), numpy_helper.from_array(np.array([1], np.int64), "k2")]
    model = _model([node("Shape", ["x"], ["s"]), node(reader, inputs, ["y"], **attrs)], [vi("x", F, [1, "n"])],
                   inits, outputs=[vi("y", F if reader in ("Reshape", "Expand", "ConstantOfShape") else I64, None)])
    before = model.SerializeToString()
    assert shapes_cast_for_readers(model, "tvm 0.27") == []
    assert model.SerializeToString() == before


def test_convert_names_the_pad_and_writes_it_static():
    with pytest.raises(ConversionBlocked) as err:
        convert_for(_whisper_pad(), runtime="tvm==0.27")
    text = str(err.value)
    assert "node 'n7' (Pad)" in text and "pads 'pads' are computed from dims that are not static" in text
    assert "Dynamic pads are not supported yet" in text and "--input-shape" in text
    _, report = convert_for(_whisper_pad(static=True), runtime="tvm==0.27")
    assert any("read a Cast of it" in n and "'n4'" in n for n in report.target_notes)
    with pytest.raises(ConversionBlocked) as err:  # tract 0.23 was measured refusing the form too
        convert_for(_whisper_pad(), runtime="tract==0.23")
    assert "node 'n7' (Pad)" in str(err.value) and "Undetermined symbol" in str(err.value)
    convert_for(_whisper_pad(), runtime="openvino==2026.4")  # OpenVINO has no such form in its data


def test_tvm_runs_the_forms_converted():
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)}
    for model in (_pool(), _pool("AveragePool", "SAME_LOWER", (3, 2))):
        as_is = run_in("tvm", "0.27", model, feeds)
        assert not as_is["ok"] and "int() argument" in as_is["error"]
        converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
        assert converted["ok"]
        np.testing.assert_allclose(converted["values"][0], _ort(model, feeds)[0], rtol=1e-6, atol=1e-7)
    model, feeds = _paddle_dim(), {"x": np.ones((1, 2, 3), np.float32)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "cannot handle ShapeExpr inputs" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds)[0])
    model, feeds = _whisper_pad(static=True), {"x": np.ones((1, 5), np.float32)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "cannot handle ShapeExpr inputs" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds)[0])


def _total_length(elem=TensorProto.INT32, shape=(1,)):
    """The GroupQueryAttention lowering's Reshape of total_sequence_length to [1], the length read
    from the mask's Shape and cast (onnxruntime-genai's Llama), then used as a Slice's end."""
    inits = [numpy_helper.from_array(np.array(1, np.int64), "k1"), numpy_helper.from_array(np.array(shape, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "k0"),
             numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(16, 2), "table")]
    nodes = [node("Shape", ["mask"], ["s"]), node("Gather", ["s", "k1"], ["t"], axis=0),
             node("Cast", ["t"], ["total"], to=elem), node("Reshape", ["total", "one"], ["total1"], name="reshape_total"),
             node("Cast", ["total1"], ["end"], to=I64), node("Slice", ["table", "k0", "end", "k0"], ["y"])]
    return _model(nodes, [vi("mask", I64, [1, "t"])], inits)


@pytest.mark.parametrize("elem", [TensorProto.INT32, I64])
@pytest.mark.parametrize("shape", [(1,), (-1,)])
def test_scalar_reshape_unsqueezed(elem, shape):
    model = _total_length(elem, shape)
    out = _copy(model)
    notes = scalar_reshapes_unsqueezed(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    assert notes and "'reshape_total'" in notes[0] and notes[0].startswith("1 ")
    assert not any(n.op_type == "Reshape" for n in out.graph.node)
    last = _producer_of(out, "total1")
    if elem == I64:
        assert last.op_type == "Unsqueeze" and last.input[0] == "total" and last.name == "reshape_total"
    else:
        assert last.op_type == "Cast" and helper.get_attribute_value(last.attribute[0]) == elem
        unsqueeze = _producer_of(out, last.input[0])
        assert unsqueeze.op_type == "Unsqueeze" and _producer_of(out, unsqueeze.input[0]).op_type == "Cast"
    feeds = {"mask": np.ones((1, 5), np.int64)}
    np.testing.assert_array_equal(_ort(out, feeds)[0], _ort(model, feeds)[0])


def test_scalar_reshape_unsqueezed_with_static_dims_and_a_type_only_declaration():
    """onnxruntime-genai's Llama declares its scalars with an element type only; with the mask's
    dims static (--input-shape) the inference decides the length, and the decided value is still
    known as a scalar, so convert unsqueezes the Reshape (llama_tiny_fp32 with --input-shape was
    refused by TVM at load: "Reshape requires the input data to be Tensor")."""
    model = _total_length()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5
    model.graph.value_info.append(vi("total", TensorProto.INT32, None))
    result, report = convert_for(model, runtime="tvm==0.27")
    assert any("'reshape_total'" in note and "Unsqueeze" in note for note in report.target_notes), report.target_notes
    assert not any(n.op_type == "Reshape" for n in result.graph.node)
    feeds = {"mask": np.ones((1, 5), np.int64)}
    np.testing.assert_array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])
    ran = run_in("tvm", "0.27", result, feeds)
    assert ran["ok"], ran
    np.testing.assert_array_equal(ran["values"][0], _ort(model, feeds)[0])


def _producer_of(model, name):
    return next(n for n in model.graph.node if name in n.output)


def test_scalar_reshape_kept():
    """A Reshape to [1] of a scalar graph input (values, not shapes), of a 1-element 1-D dim, and
    one to [1, 1], stay."""
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    dim_1d = _model([node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["d"], axis=0),
                     node("Reshape", ["d", "one"], ["y"])], [vi("x", F, [1, "n"])], [one], outputs=[vi("y", I64, [1])])
    for model in (_model([node("Reshape", ["x", "one"], ["y"])], [vi("x", F, [])], [one]), dim_1d,
                  _total_length(shape=(1, 1))):
        before = model.SerializeToString()
        assert scalar_reshapes_unsqueezed(model, "tvm 0.27") == []
        assert model.SerializeToString() == before


def _past_concat(head="kv_cache_dim"):
    inits = [numpy_helper.from_array(np.array([0, 0, -1], np.int64), "flat"), helper.make_tensor("two", F, [], [2.0])]
    nodes = [node("Mul", ["x", "two"], ["k"]), node("Concat", ["past", "k"], ["c"], axis=2, name="concat_past"),
             node("Reshape", ["c", "flat"], ["y"])]
    return _model(nodes, [vi("past", F, ["batch", 2, "past", head]), vi("x", F, ["batch", 2, 1, 16])], inits)


def test_concat_of_a_symbol_and_a_value_named_for_tvm():
    with pytest.raises(ConversionBlocked) as err:
        convert_for(_past_concat(), runtime="tvm==0.27")
    text = str(err.value)
    assert "node 'concat_past' (Concat)" in text and "symbolic dim kv_cache_dim on axis 3, where 'k' has 16" in text
    assert "--input-shape" in text
    convert_for(_past_concat(16), runtime="tvm==0.27")  # the head size static: nothing to name


@pytest.mark.parametrize("runtime", ["tract==0.23"])
def test_concat_of_a_symbol_and_a_value_fixes_the_symbol(runtime):
    """(the only head size the model runs with: rewriter/targets/forced_dims.py; it used to be named)"""
    result, report = convert_for(_past_concat(), runtime=runtime)
    assert any("kv_cache_dim=16 (Concat 'concat_past')" in note for note in report.target_notes)
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in result.graph.input}
    assert 16 in next(d for d in dims.values() if len(d) == 4) and "kv_cache_dim" not in str(dims)
    convert_for(_past_concat(16), runtime=runtime)  # the head size static: nothing to fix
    result, _ = convert_for(_past_concat(), runtime="openvino==2026.4")
    assert "kv_cache_dim" in str(result.graph.input)


def test_tvm_runs_scalar_reshape_converted():
    model, feeds = _total_length(), {"mask": np.ones((1, 5), np.int64)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "PrimType" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds)[0])


def _preemphasis(bounds=((1, 2 ** 63 - 1), (0, -1)), width="n", same_data=True):
    """x[:, a:b] - 0.97 * x[:, c:d] (nemo's preemphasis, its Sub n4_2_n23), then a Pad."""
    (a, b), (c, d) = bounds
    inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in
             (("a", a), ("b", b), ("c", c), ("d", d), ("ax", 1))]
    inits += [numpy_helper.from_array(np.array([0, 1, 0, 0], np.int64), "pads"), helper.make_tensor("k", F, [], [0.97])]
    nodes = [node("Slice", ["x", "a", "b", "ax"], ["s1"]), node("Slice", ["x" if same_data else "x2", "c", "d", "ax"], ["s2"]),
             node("Mul", ["k", "s2"], ["ks2"]), node("Sub", ["s1", "ks2"], ["diff"], name="preemph"),
             node("Pad", ["diff", "pads"], ["y"])]
    inputs = [vi("x", F, [1, width])] + ([] if same_data else [vi("x2", F, [1, width])])
    if width != "n":  # another input's dim is not static: the Slices' own must be looked at
        nodes.append(node("Relu", ["z"], ["z2"]))
        inputs.append(vi("z", F, [1, "m"]))
        return _model(nodes, inputs, inits, outputs=[vi("y", F, None), vi("z2", F, None)])
    return _model(nodes, inputs, inits)


def test_shifted_slices_named_for_tvm():
    with pytest.raises(ConversionBlocked) as err:
        convert_for(_preemphasis(), runtime="tvm==0.27")
    text = str(err.value)
    assert "node 'preemph' (Sub)" in text and "Slices of 'x' along axes [1] from [1]" in text and "from [0] to [-1]" in text
    assert "emit_te" in text
    convert_for(_preemphasis(), runtime="tract==0.23")  # tract runs the form


@pytest.mark.parametrize("model", [_preemphasis(width=6), _preemphasis(bounds=((0, -1), (0, -1))),
                                   _preemphasis(same_data=False)], ids=["static", "same_bounds", "two_values"])
def test_shifted_slices_not_named(model):
    convert_for(model, runtime="tvm==0.27")
