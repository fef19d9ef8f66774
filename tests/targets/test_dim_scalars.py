"""Dims of a Shape written as scalars for TVM 0.27 (rewriter/targets/dim_scalars.py, ``rewrite_forms``
of tvm.json): a Slice / ConstantOfShape / Range reading ``Gather(Shape(x), [k])`` (the lowered
EmbedLayerNormalization's position rows, the lowered Attention's mask index) has no shape in TVM's
Relax frontend, and the next Reshape with a -1 is refused; the same values computed on scalars
keep it.  And a ConstantOfShape of an empty shape becomes a Constant (TVM refuses it).  The rules
run without TVM; with the TVM venv (tools/runtime_venvs.py; skipped when absent) the small models
are refused as they are and run right converted."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets.dim_scalars import dims_as_scalars, scalar_constant_of_shape
from tests.targets.runtime_runs import ROOT, run_in

node, vi = helper.make_node, helper.make_tensor_value_info
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _positions_model(opset: int = 13, *, mask: bool = True) -> onnx.ModelProto:
    """x [b, s, 4] + the first s rows of a table; with ``mask`` also + a [1, s] row of positions
    (Range to Squeeze(dim)) and + ConstantOfShape(b) rows, then a Reshape with a -1 (the head
    split): the lowered BERT's forms."""
    inits = [_i64("k1", [1]), _i64("k0", [0]), _i64("zero", 0), _i64("one", 1), _i64("heads", [0, 0, 2, -1]),
             numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4) / 10, "table")]
    nodes = [node("Shape", ["x"], ["sx"], name="shape"),
             node("Gather", ["sx", "k1"], ["s"], axis=0, name="dim_s"),
             node("Slice", ["table", "k0", "s", "k0"], ["rows"], name="rows"),
             node("Add", ["x", "rows"], ["y0"], name="add_rows")]
    last = "y0"
    if mask:
        squeeze = node("Squeeze", ["s", "k0"], ["s_scalar"], name="squeeze") if opset >= 13 else \
            node("Squeeze", ["s"], ["s_scalar"], name="squeeze", axes=[0])
        nodes += [squeeze, node("Range", ["zero", "s_scalar", "one"], ["pos"], name="range"),
                  node("Cast", ["pos"], ["posf0"], to=F, name="cast"),
                  node("Unsqueeze", ["posf0", "k1"] if opset >= 13 else ["posf0"], ["posf"], name="pos_column",
                       **({} if opset >= 13 else {"axes": [1]})),
                  node("Gather", ["sx", "k0"], ["b"], axis=0, name="dim_b"),
                  node("Add", ["b", "b"], ["bb"], name="twice_b"),
                  node("ConstantOfShape", ["bb"], ["ones"], name="ones", value=helper.make_tensor("v", F, [1], [1.0])),
                  node("Slice", ["ones", "b", "bb", "k0"], ["tail"], name="tail"),
                  node("Unsqueeze", ["tail", "k1"] if opset >= 13 else ["tail"], ["tail2"], name="tail2",
                       **({} if opset >= 13 else {"axes": [1]})),
                  node("Unsqueeze", ["tail2", "k1"] if opset >= 13 else ["tail2"], ["tail3"], name="tail3",
                       **({} if opset >= 13 else {"axes": [1]})),
                  node("Add", ["y0", "posf"], ["y1"], name="add_pos"),
                  node("Add", ["y1", "tail3"], ["y2"], name="add_tail")]
        last = "y2"
    nodes.append(node("Reshape", [last, "heads"], ["y"], name="split_heads"))
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["b", "s", 4])], [vi("y", F, [None] * 4)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


def _feeds(b: int = 2, s: int = 3) -> dict:
    return {"x": np.random.default_rng(0).standard_normal((b, s, 4)).astype(np.float32)}


def _ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _rewritten(model: onnx.ModelProto, rewrite=dims_as_scalars) -> tuple[onnx.ModelProto, list[str]]:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = rewrite(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    return out, notes


def _producer(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if name in n.output)


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("shape", [(2, 3), (1, 7), (3, 1)])
def test_same_values(opset, shape):
    model = _positions_model(opset)
    out, notes = _rewritten(model)
    feeds = _feeds(*shape)
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))
    assert len(notes) == 1 and "4 node(s)" in notes[0] and "'rows'" in notes[0] and "tvm 0.27" in notes[0]


def test_slice_reads_a_scalar_unsqueezed():
    out, _ = _rewritten(_positions_model(13, mask=False))
    rows = next(n for n in out.graph.node if n.name == "rows")
    assert rows.input[0] == "table" and rows.input[1] == "k0" and rows.input[3] == "k0"
    unsqueeze = _producer(out, rows.input[2])
    assert unsqueeze.op_type == "Unsqueeze"
    axes = numpy_helper.to_array(_producer(out, unsqueeze.input[1]).attribute[0].t)
    assert axes.tolist() == [0]
    gather = _producer(out, unsqueeze.input[0])
    assert gather.op_type == "Gather" and gather.input[0] == "sx"
    index = numpy_helper.to_array(_producer(out, gather.input[1]).attribute[0].t)
    assert index.shape == () and index == 1
    # the original Gather stays for its other readers; the new nodes come before their reader
    assert any(n.name == "dim_s" for n in out.graph.node)
    order = [n.name for n in out.graph.node]
    assert order.index(gather.name) < order.index(unsqueeze.name) < order.index("rows")


def test_opset_11_unsqueezes_by_attribute():
    out, _ = _rewritten(_positions_model(11, mask=False))
    unsqueeze = _producer(out, next(n for n in out.graph.node if n.name == "rows").input[2])
    assert len(unsqueeze.input) == 1 and helper.get_attribute_value(unsqueeze.attribute[0]) == [0]


def test_arithmetic_on_scalars_and_range_reshaped():
    out, _ = _rewritten(_positions_model(13))
    tail = next(n for n in out.graph.node if n.name == "tail")
    end = _producer(out, _producer(out, tail.input[2]).input[0])
    assert end.op_type == "Add" and all(_producer(out, i).op_type == "Gather" for i in end.input)
    rng = next(n for n in out.graph.node if n.name == "range")
    assert _producer(out, rng.input[1]).op_type == "Gather"  # not the Squeeze of a 1-element tensor
    reshape = next(n for n in out.graph.node if rng.output[0] in n.input)
    assert reshape.op_type == "Reshape" and reshape.output[0] == "pos"
    assert _producer(out, reshape.input[1]).op_type == "Unsqueeze"


def _single(op_nodes, inits, opset=13):
    graph = helper.make_graph(op_nodes, "g", [vi("x", F, ["b", "s", 4])], [vi("y", F, [None] * 3)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("case", ["constant_end", "scalar_index", "shape_start", "axis_1", "div", "range_from_1",
                                  "range_by_2", "two_indices", "int32_constant", "foreign_domain"])
def test_left_as_is(case):
    inits = [_i64("k0", [0]), _i64("k1", [1]), _i64("k01", [0, 1]), _i64("k00", [0, 0]), _i64("k12", [1, 2]),
             _i64("two", [2]), _i64("one", 1),
             _i64("k1s", 1), numpy_helper.from_array(np.array([1], np.int32), "i32"),
             numpy_helper.from_array(np.zeros((16, 4), np.float32), "table")]
    gather = node("Gather", ["sx", "k1"], ["s"], axis=0)
    shape = node("Shape", ["x"], ["sx"])
    end = "s"
    extra = []
    if case == "constant_end":
        end = "two"
    elif case == "scalar_index":  # already a scalar: TVM keeps it; Unsqueeze of it is read as a shape
        gather = node("Gather", ["sx", "k1s"], ["s0"], axis=0)
        extra = [node("Unsqueeze", ["s0", "k0"], ["s"])]
        end = "s"
    elif case == "shape_start":
        shape = node("Shape", ["x"], ["sx"], start=1)
    elif case == "axis_1":
        gather = node("Gather", ["sx2", "k0"], ["s"], axis=1)
        extra = [node("Unsqueeze", ["sx", "k0"], ["sx2"])]
    elif case == "div":  # by a dim, not a positive constant
        extra = [node("Div", ["s", "s"], ["half"])]
        end = "half"
    elif case == "two_indices":  # the Slice's ends are two dims: [s, 4]
        gather = node("Gather", ["sx", "k12"], ["s"], axis=0)
    elif case == "int32_constant":
        extra = [node("Cast", ["s"], ["s32"], to=TensorProto.INT32), node("Add", ["s32", "i32"], ["s32b"]),
                 node("Cast", ["s32b"], ["end"], to=I64)]
        end = "end"
    nodes = [shape, *([extra[0]] if case == "axis_1" else []), gather,
             *(extra if case != "axis_1" else []),
             node("Slice", ["table", "k00", end, "k01"] if case == "two_indices" else ["table", "k0", end, "k0"],
                  ["rows"], name="rows"),
             node("Add", ["x", "rows"], ["y"])]
    if case in ("range_from_1", "range_by_2"):
        start, delta = ("one", "one") if case == "range_from_1" else ("zero", "two0")
        inits += [_i64("zero", 0), _i64("two0", 2)]
        nodes = [shape, node("Gather", ["sx", "k1s"], ["n"], axis=0),
                 node("Range", [start, "n", delta], ["r"], name="range"), node("Cast", ["r"], ["rf"], to=F),
                 node("Add", ["x", "rf"], ["y"])]
    if case == "foreign_domain":
        nodes[-2].domain = "com.example"
    model = _single(nodes, inits)
    before = model.SerializeToString()
    assert dims_as_scalars(model, "tvm 0.27") == []
    assert model.SerializeToString() == before


def test_subgraph_scope():
    """A Slice inside an If branch reading a dim of the outer graph's Shape: the branch's own node reads
    a Gather the branch computes (the outer nodes are not this scope's)."""
    inits = [_i64("k0", [0]), _i64("k1", [1]), numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "table")]
    body_nodes = [node("Shape", ["x"], ["bsx"]), node("Gather", ["bsx", "k1"], ["bs"], axis=0),
                  node("Slice", ["table", "k0", "bs", "k0"], ["brows"], name="branch_rows"),
                  node("Add", ["x", "brows"], ["by"])]
    branch = helper.make_graph(body_nodes, "then", [], [vi("by", F, [None] * 3)])
    nodes = [node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch, name="if")]
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["b", "s", 4]), vi("cond", TensorProto.BOOL, [])],
                              [vi("y", F, [None] * 3)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    out, notes = _rewritten(model)
    assert "'branch_rows'" in notes[0] and notes[0].startswith("2 node(s)")
    feeds = {**_feeds(2, 5), "cond": np.array(True)}
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def _constant_of_empty_shape(value=None, dims=()) -> onnx.ModelProto:
    attrs = {} if value is None else {"value": value}
    nodes = [node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array(dims, np.int64))),
             node("ConstantOfShape", ["shape"], ["c"], name="scalar_mask", **attrs),
             node("Cast", ["c"], ["cf"], to=F), node("Add", ["x", "cf"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["b", 2])], [vi("y", F, [None] * 2)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("value", [helper.make_tensor("v", TensorProto.BOOL, [1], [True]),
                                   helper.make_tensor("v", TensorProto.INT64, [1], [7]), None])
def test_constant_of_empty_shape_as_constant(value):
    model = _constant_of_empty_shape(value)
    out, notes = _rewritten(model, scalar_constant_of_shape)
    made = next(n for n in out.graph.node if n.name == "scalar_mask")
    assert made.op_type == "Constant" and not made.input and notes and "'scalar_mask'" in notes[0]
    got = numpy_helper.to_array(made.attribute[0].t)
    want = np.zeros((), np.float32) if value is None else numpy_helper.to_array(value).reshape(())
    assert got.shape == () and got.dtype == want.dtype and got == want
    feeds = {"x": np.ones((3, 2), np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def test_constant_of_a_shape_with_dims_kept():
    model = _constant_of_empty_shape(None, dims=[2])
    before = model.SerializeToString()
    assert scalar_constant_of_shape(model, "tvm 0.27") == []
    assert model.SerializeToString() == before


def test_tvm_data_names_the_forms():
    data = json.loads((ROOT / "rewriter" / "targets" / "data" / "tvm.json").read_text())["releases"]["0.27"]
    forms = data["rewrite_forms"]
    assert forms["Slice"]["form"] == ["bounds_folded", "dims_as_scalars"]
    assert forms["ConstantOfShape"]["form"] == "scalar_as_constant"
    out, report = convert_for(_positions_model(13), runtime="tvm==0.27")
    assert any("read them computed on scalars" in n for n in report.target_notes)
    assert any(n.op_type == "Reshape" and n.output[0] == "pos" for n in out.graph.node)
    out, report = convert_for(_constant_of_empty_shape(), runtime="tvm==0.27")
    assert any("ConstantOfShape node(s) of an empty shape" in n for n in report.target_notes)


def test_tvm_refuses_as_is_and_runs_converted():
    model, feeds = _positions_model(13), _feeds(2, 3)
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "Reshape expects the input tensor to have known shape" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds))


def test_tvm_refuses_constant_of_empty_shape_and_runs_converted():
    model, feeds = _constant_of_empty_shape(helper.make_tensor("v", TensorProto.BOOL, [1], [True])), \
        {"x": np.ones((3, 2), np.float32)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "broadcast_to expects" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds))


def _dims_model(nodes, inits, y_rank=3):
    inits = [_i64("k0", [0]), _i64("k1", [1]), _i64("k1s", 1), _i64("zero", 0), _i64("one", 1),
             numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "table"), *inits]
    return _single([node("Shape", ["x"], ["sx"]), node("Gather", ["sx", "k1s"], ["n"], axis=0), *nodes], inits)


def test_arithmetic_on_unsqueezed_dims_rewritten():
    """Add(Unsqueeze(n), Unsqueeze(n)): TVM reads each Unsqueeze as a shape and refuses the Add of
    shapes; the Add is written on the scalars."""
    model = _dims_model([node("Unsqueeze", ["n", "k0"], ["n1"]), node("Add", ["n1", "n1"], ["end"]),
                         node("Slice", ["table", "k0", "end", "k0"], ["rows"], name="rows"),
                         node("ReduceSum", ["rows"], ["total"], keepdims=0), node("Add", ["x", "total"], ["y"])], [])
    out, notes = _rewritten(model)
    rows = next(n for n in out.graph.node if n.name == "rows")
    add = _producer(out, _producer(out, rows.input[2]).input[0])
    assert add.op_type == "Add" and add.input[0] == add.input[1] == "n" and "'rows'" in notes[0]
    feeds = _feeds(2, 3)
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def test_range_to_a_scalar_dim_reshaped_only():
    model = _dims_model([node("Range", ["zero", "n", "one"], ["r"], name="range"), node("Cast", ["r"], ["rf0"], to=F),
                         node("Unsqueeze", ["rf0", "k1"], ["rf"]), node("Add", ["x", "rf"], ["y"])], [])
    out, notes = _rewritten(model)
    rng = next(n for n in out.graph.node if n.name == "range")
    assert list(rng.input) == ["zero", "n", "one"] and rng.output[0] != "r" and "'range'" in notes[0]
    reshape = _producer(out, "r")
    assert reshape.op_type == "Reshape" and reshape.input[0] == rng.output[0]
    assert _producer(out, reshape.input[1]).input[0] == "n"
    feeds = _feeds(2, 3)
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def test_constant_operand_must_be_one_int64():
    """Add(Gather(Shape, [1]), c): c of one int64 element is read as a scalar; of two elements it is not."""
    for values, rewritten in (([3], True), ([3, 4], False)):
        model = _dims_model([node("Gather", ["sx", "k1"], ["s"], axis=0), node("Add", ["s", "c"], ["end"]),
                             node("Slice", ["table", "k0", "end", "k0"], ["rows"], name="rows"),
                             node("ReduceSum", ["rows"], ["total"], keepdims=0), node("Add", ["x", "total"], ["y"])],
                            [_i64("c", values)])
        out, notes = _rewritten(model) if rewritten else (model, dims_as_scalars(model, "tvm 0.27"))
        assert bool(notes) == rewritten
        if rewritten:
            add = _producer(out, _producer(out, next(n for n in out.graph.node if n.name == "rows").input[2]).input[0])
            assert add.op_type == "Add" and numpy_helper.to_array(_producer(out, add.input[1]).attribute[0].t).shape == ()


@pytest.mark.parametrize("start,end,rewritten", [(1, 2, True), (0, 1, True), (1, 3, False), (-1, 0, False),
                                                 (1, None, False)])
def test_shape_of_one_dim(start, end, rewritten):
    """Shape(x, start=k, end=k + 1) read by a Slice's end and, squeezed, by a Range (kaldi's and
    nemo's frame count): read as Gather(Shape(x), k); other spans are left as they are."""
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    nodes = [node("Shape", ["x"], ["s1"], **attrs), node("Slice", ["table", "k0", "s1", "k0"], ["rows"], name="rows"),
             node("ReduceSum", ["rows"], ["total"], keepdims=0), node("Add", ["x", "total"], ["y"])]
    if rewritten:
        nodes[3:3] = [node("Squeeze", ["s1", "k0"], ["n"]), node("Range", ["zero", "n", "one"], ["r"], name="range"),
                      node("Cast", ["r"], ["rf"], to=F), node("ReduceSum", ["rf"], ["rs"], keepdims=0),
                      node("Add", ["total", "rs"], ["total2"])]
        nodes[-1] = node("Add", ["x", "total2"], ["y"])
    model = _single(nodes, [_i64("k0", [0]), _i64("zero", 0), _i64("one", 1),
                            numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "table")], opset=17)
    if not rewritten:
        before = model.SerializeToString()
        assert dims_as_scalars(model, "tvm 0.27") == []
        assert model.SerializeToString() == before
        return
    out, notes = _rewritten(model)
    assert "'rows'" in notes[0] and "'range'" in notes[0]
    gather = _producer(out, _producer(out, next(n for n in out.graph.node if n.name == "rows").input[2]).input[0])
    shape = _producer(out, gather.input[0])
    assert gather.op_type == "Gather" and shape.op_type == "Shape" and not shape.attribute
    assert numpy_helper.to_array(_producer(out, gather.input[1]).attribute[0].t) == start
    feeds = _feeds(2, 3)
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


@pytest.mark.parametrize("to,reshaped", [(I64, True), (TensorProto.INT32, False)])
def test_range_to_a_cast_dim(to, reshaped):
    """gpt2_tiny_legacy_op11's position ids: Range(0, Cast(Gather(Shape(x), 1), int64), 1); a Cast
    to int64 of a dim is the dim, one to int32 is not a dim expression."""
    nodes = [node("Cast", ["n"], ["limit"], to=to), node("Range", ["zero" if to == I64 else "zero32", "limit",
                                                                   "one" if to == I64 else "one32"], ["r"], name="range"),
             node("Cast", ["r"], ["rf0"], to=F), node("Unsqueeze", ["rf0", "k1"], ["rf"]), node("Add", ["x", "rf"], ["y"])]
    model = _dims_model(nodes, [numpy_helper.from_array(np.array(0, np.int32), "zero32"),
                                numpy_helper.from_array(np.array(1, np.int32), "one32")])
    before = model.SerializeToString()
    if not reshaped:
        assert dims_as_scalars(model, "tvm 0.27") == [] and model.SerializeToString() == before
        return
    out, notes = _rewritten(model)
    reshape = _producer(out, "r")
    assert reshape.op_type == "Reshape" and "'range'" in notes[0]
    assert _producer(out, reshape.input[1]).input[0] == "n"
    feeds = _feeds(2, 3)
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def _anchor_grid(dims, to=F, start=0.0, delta=1.0) -> onnx.ModelProto:
    """x [1, 2, h, w] - (arange(w) + 0.5): a detector's anchor grid (nudenet's YOLO head), the Range
    in float to Cast(Gather(Shape(x), 3), to)."""
    elem = {F: np.float32, TensorProto.DOUBLE: np.float64}[to]
    inits = [_i64("k3", 3), numpy_helper.from_array(np.array(start, elem), "start"),
             numpy_helper.from_array(np.array(delta, elem), "delta"),
             numpy_helper.from_array(np.array(0.5, elem), "half")]
    nodes = [node("Shape", ["x"], ["sx"]), node("Gather", ["sx", "k3"], ["w"], axis=0),
             node("Cast", ["w"], ["wf"], to=to), node("Range", ["start", "wf", "delta"], ["r"], name="range"),
             node("Add", ["r", "half"], ["ra"]), node("Cast", ["ra"], ["raf"], to=F), node("Sub", ["x", "raf"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", F, dims)], [vi("y", F, [None] * 4)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("to", [F, TensorProto.DOUBLE])
@pytest.mark.parametrize("dims", [[1, 2, "h", "w"], [1, 2, 4, 5]])
def test_float_range_to_a_cast_dim_reshaped(to, dims):
    """A Range in float or double to a dim cast to it: reshaped to [dim], its length, read as a
    scalar int64 (the Cast's input, not the float)."""
    model = _anchor_grid(dims, to)
    out, notes = _rewritten(model)
    rng = next(n for n in out.graph.node if n.name == "range")
    assert list(rng.input) == ["start", "wf", "delta"] and "'range'" in notes[0]
    reshape = _producer(out, "r")
    assert reshape.op_type == "Reshape" and reshape.input[0] == rng.output[0]
    assert _producer(out, reshape.input[1]).input[0] == "w"
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 2, 4, 5)).astype(np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


@pytest.mark.parametrize("case", ["from_1", "by_2", "not_a_cast"])
def test_float_range_left_as_is(case):
    """A Range from 1 or by 2 is not as long as its limit; a limit that is not a Cast of a dim (a
    Neg of one) is not read."""
    if case == "not_a_cast":
        model = _anchor_grid([1, 2, "h", "w"])
        next(n for n in model.graph.node if n.output[0] == "wf").op_type = "Neg"
        del next(n for n in model.graph.node if n.output[0] == "wf").attribute[:]
        model.graph.node[1].CopyFrom(node("Gather", ["sx", "k3"], ["w0"], axis=0))
        model.graph.node.insert(2, node("Cast", ["w0"], ["w"], to=F))
    else:
        model = _anchor_grid([1, 2, "h", "w"], *{"from_1": (F, 1.0), "by_2": (F, 0.0, 2.0)}[case])
    onnx.checker.check_model(model, full_check=True)
    before = model.SerializeToString()
    assert dims_as_scalars(model, "tvm 0.27") == [] and model.SerializeToString() == before


@pytest.mark.parametrize("dims", [[1, 2, "h", "w"], [1, 2, 4, 5]])
def test_tvm_refuses_float_range_as_is_and_runs_converted(dims):
    """TVM 0.27 gives the float Range a length of its own and cannot emit the Sub with x
    ("CodeGenVM cannot emit this Relax operator directly"), symbolic and static dims alike;
    converted it runs and gives ONNX Runtime's values (nudenet_320n with --input-shape)."""
    model = _anchor_grid(dims)
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 2, 4, 5)).astype(np.float32)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "CodeGenVM cannot emit" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds))


def _resampled_mask(numerator=("Sub", 1), divisor=441) -> onnx.ModelProto:
    """y = Where(arange(L) < 5, x[:, :L], 0) with L = (160 N + 441 - 1) / 441, N read by
    Shape(x, start=1, end=2) (onnx-asr's 44.1 kHz -> 16 kHz resampler: its output length and mask).
    ``numerator``: the op and constant applied to 160 N + 441 before the Div."""
    op, c = numerator
    inits = [_i64("n160", 160), _i64("n441", 441), _i64("c", c), _i64("div", divisor), _i64("zero", 0), _i64("one", 1),
             _i64("k0", [0]), _i64("k1", [1]), _i64("five", 5)]
    nodes = [node("Shape", ["x"], ["s"], start=1, end=2), node("Squeeze", ["s"], ["n"]),
             node("Mul", ["n160", "n"], ["m"]), node("Add", ["m", "n441"], ["a"]), node(op, ["a", "c"], ["num"]),
             node("Div", ["num", "div"], ["L"], name="length"), node("Range", ["zero", "L", "one"], ["r"], name="range"),
             node("Unsqueeze", ["r", "k0"], ["r1"]), node("Less", ["r1", "five"], ["mask"]),
             node("Unsqueeze", ["L", "k0"], ["L1"]), node("Slice", ["x", "k0", "L1", "k1"], ["head"], name="head"),
             node("Where", ["mask", "head", "zf"], ["y"])]
    inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zf"))
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["b", "N"])], [vi("y", F, [None, None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("n", [1, 440, 2000])
def test_division_of_a_dim_by_a_constant_read_on_scalars(n):
    model = _resampled_mask()
    out, notes = _rewritten(model)
    rng = next(n for n in out.graph.node if n.name == "range")
    length = _producer(out, rng.input[1])
    assert length.op_type == "Div" and length.name != "length" and "'range'" in notes[0]
    assert _producer(out, "r").op_type == "Reshape"
    feeds = {"x": np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


@pytest.mark.parametrize("case", [("Sub", 500, 441), ("Add", 0, -441), ("Add", 0, 0), ("Mul", -1, 441)])
def test_division_left_when_truncation_and_floor_may_differ(case):
    """A numerator that may be negative ((160 N + 441) - 500, times -1) or a divisor that is not
    positive: ONNX truncates, TVM's dims floor, so the Div is not written on scalars."""
    op, c, divisor = case
    model = _resampled_mask((op, c), divisor)
    before = model.SerializeToString()
    notes = dims_as_scalars(model, "tvm 0.27")
    assert not any("'range'" in n for n in notes)
    assert not any(n.op_type == "Div" and n.name != "length" for n in model.graph.node)
    if not notes:
        assert model.SerializeToString() == before


def test_tvm_refuses_a_range_to_a_divided_dim_and_runs_converted():
    """TVM 0.27 gives the Range a length of its own and cannot emit the Where of the mask and the
    slice ("CodeGenVM cannot emit"); converted it runs (onnx_asr_resample_44_16 without
    --input-shape)."""
    model = _resampled_mask()
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 1500)).astype(np.float32)}
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "CodeGenVM cannot emit" in as_is["error"]
    converted = run_in("tvm", "0.27", convert_for(model, runtime="tvm==0.27")[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], _ort(model, feeds))
