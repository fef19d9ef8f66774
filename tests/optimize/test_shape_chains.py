"""Shape chains of legacy exports with a symbolic batch (ShuffleNet's channel shuffle, x.chunk):
each stage's Reshape shape is computed from ``Shape`` of a value that a dynamic Reshape made.
One optimize run folds the whole chain (the dims after a Reshape given a constant shape are
inferred in the same walk; the shape pass computes integer arithmetic of known dims), and a
second run changes nothing. Results compared with ONNX Runtime on the original at several
batch sizes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize import OptimizeOptions, optimize_proto
from tests import oracle

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def _i(name, values):
    return nh.from_array(np.asarray(values, np.int64), name)


def _shuffle(nodes, x, stage, groups=2):
    """torch legacy export of channel_shuffle(x, groups) on [N, C, H, W], its shape read at run
    time: Reshape(x, [N, g, C/g, H, W]) -> Transpose -> Reshape(., [N, C, H, W])."""
    p = f"s{stage}_"
    dims = [f"{p}d{i}" for i in range(4)]
    nodes.append(h.make_node("Shape", [x], [p + "shape"]))
    for i in range(4):
        nodes.append(h.make_node("Gather", [p + "shape", f"i{i}"], [dims[i]], axis=0))
        nodes.append(h.make_node("Unsqueeze", [dims[i], "zero"], [dims[i] + "_u"]))
    nodes.append(h.make_node("Div", [dims[1], "groups"], [p + "per"]))
    nodes.append(h.make_node("Unsqueeze", [p + "per", "zero"], [p + "per_u"]))
    nodes.append(h.make_node("Concat", [dims[0] + "_u", "groups_1d", p + "per_u", dims[2] + "_u", dims[3] + "_u"],
                             [p + "five"], axis=0))
    nodes.append(h.make_node("Reshape", [x, p + "five"], [p + "r5"]))
    nodes.append(h.make_node("Transpose", [p + "r5"], [p + "t"], perm=[0, 2, 1, 3, 4]))
    nodes.append(h.make_node("Concat", [dims[0] + "_u", dims[1] + "_u", dims[2] + "_u", dims[3] + "_u"],
                             [p + "four"], axis=0))
    nodes.append(h.make_node("Reshape", [p + "t", p + "four"], [p + "out"]))
    return p + "out"


def _chunk(nodes, x, stage):
    """x.chunk(2, dim=1) in a legacy export: Slice ends from Div(Gather(Shape(x), 1), 2)."""
    p = f"c{stage}_"
    nodes += [h.make_node("Shape", [x], [p + "shape"]),
              h.make_node("Gather", [p + "shape", "i1"], [p + "c"], axis=0),
              h.make_node("Div", [p + "c", "groups"], [p + "half"]),
              h.make_node("Unsqueeze", [p + "half", "zero"], [p + "half_u"]),
              h.make_node("Slice", [x, "zero", p + "half_u", "one"], [p + "a"]),
              h.make_node("Slice", [x, p + "half_u", "big", "one"], [p + "b"]),
              h.make_node("Relu", [p + "b"], [p + "rb"]),
              h.make_node("Concat", [p + "a", p + "rb"], [p + "out"], axis=1)]
    return p + "out"


def _model(stages=3):
    nodes, x = [], "x"
    for s in range(stages):
        x = _shuffle(nodes, _chunk(nodes, x, s), s)
    nodes.append(h.make_node("Identity", [x], ["y"]))
    inits = [_i(f"i{i}", i) for i in range(4)] + [_i("zero", [0]), _i("one", [1]), _i("big", [2 ** 62]),
                                                   _i("groups", 2), _i("groups_1d", [2])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["batch", 8, 4, 4])],
                         [h.make_tensor_value_info("y", F, ["batch", 8, 4, 4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_a_chain_of_shuffles_folds_in_one_run_to_constant_shapes():
    model = _model(stages=3)
    result, _ = optimize_proto(model, OptimizeOptions())
    oracle.assert_valid(result)
    ops = [n.op_type for n in result.graph.node]
    assert "Shape" not in ops and "Gather" not in ops and "Div" not in ops and "Concat" in ops
    shapes = [nh.to_array(t).tolist() for t in result.graph.initializer if t.name.endswith("shape_folded")]
    assert {tuple(s) for s in shapes} == {(0, 2, 4, 4, 4), (0, 8, 4, 4)}
    rng = np.random.default_rng(0)
    for batch in (1, 3, 0):
        x = rng.standard_normal((batch, 8, 4, 4)).astype(np.float32)
        np.testing.assert_array_equal(_run(result, x), _run(model, x))


def test_a_second_run_changes_nothing():
    first, _ = optimize_proto(_model(stages=4), OptimizeOptions())
    second, _ = optimize_proto(first, OptimizeOptions())
    assert [n.op_type for n in second.graph.node] == [n.op_type for n in first.graph.node]


def test_the_chain_folds_within_the_first_round():
    result, report = optimize_proto(_model(stages=5), OptimizeOptions(iterations=1))
    assert report.rounds == 1 and report.folded["shape arithmetic"] > 0
    assert "Shape" not in [n.op_type for n in result.graph.node]


def _arith_model(op, a, b):
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [a op b])) where a is dim 1 of x
    (static) and b a constant: the shape pass computes a op b."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             h.make_node("Gather", ["s", "i1"], ["c"], axis=0),
             h.make_node(op, ["c", "b"], ["v"]),
             h.make_node("Unsqueeze", ["n", "zero"], ["nu"]),
             h.make_node("Unsqueeze", ["v", "zero"], ["vu"]),
             h.make_node("Concat", ["nu", "vu"], ["shape"], axis=0),
             h.make_node("Shape", ["shape"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["batch", a])],
                         [h.make_tensor_value_info("y", I64, [1]), h.make_tensor_value_info("shape", I64, [2])],
                         [_i("i0", 0), _i("i1", 1), _i("zero", [0]), _i("b", b)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def test_integer_arithmetic_of_known_dims_is_exact():
    for op, a, b in (("Add", 6, 3), ("Sub", 6, 8), ("Mul", 6, 3), ("Div", 7, 2), ("Div", 6, 3)):
        model = _arith_model(op, a, b)
        result, _ = optimize_proto(model, OptimizeOptions())
        x = np.zeros((2, a), np.float32)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(["shape"], {"x": x})[0]
        session = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(session.run(["shape"], {"x": x})[0], want)
        assert op not in [n.op_type for n in result.graph.node], op


def test_a_division_of_a_negative_dim_difference_is_left_to_run_time_or_truncates():
    """(c - 10) / 4 with c = 3: -7 / 4 is -1 in ONNX Runtime (C division truncates), -2 as a
    floor division: whatever folds it must give ONNX Runtime's value."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "i1"], ["c"], axis=0),
             h.make_node("Sub", ["c", "ten"], ["d"]),
             h.make_node("Div", ["d", "four"], ["q"]),
             h.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             h.make_node("Add", ["n", "q"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["batch", 3])],
                         [h.make_tensor_value_info("y", I64, [])],
                         [_i("i0", 0), _i("i1", 1), _i("ten", 10), _i("four", 4)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    result, _ = optimize_proto(model, OptimizeOptions())
    x = np.zeros((5, 3), np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert int(want[0]) == 4 and int(got[0]) == 4


def _view_last(n_static=16):
    """GPT-2's Conv1D in a legacy export: ``x.view(-1, x.size(-1))`` where x comes out of a
    Reshape whose shape is computed at run time (here from two int64 inputs), so ONNX's
    inference knows nothing of x; the shape vector says x has rank 3 and last dim 16."""
    nodes = [h.make_node("Unsqueeze", ["a", "zero"], ["au"]),
             h.make_node("Unsqueeze", ["b", "zero"], ["bu"]),
             h.make_node("Concat", ["au", "bu", "last"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["r"]),
             h.make_node("Shape", ["r"], ["rs"]),
             h.make_node("Slice", ["rs", "minus_one", "big", "zero"], ["tail"]),
             h.make_node("Concat", ["minus_one", "tail"], ["flat"], axis=0),
             h.make_node("Reshape", ["r", "flat"], ["y"])]
    inits = [_i("zero", [0]), _i("last", [n_static]), _i("minus_one", [-1]), _i("big", [2 ** 63 - 1])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", n_static * 3]),
                                      h.make_tensor_value_info("a", I64, []), h.make_tensor_value_info("b", I64, [])],
                         [h.make_tensor_value_info("y", F, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def test_a_reshape_of_a_computed_shape_has_the_rank_and_static_dims_of_its_vector():
    model = _view_last()
    result, _ = optimize_proto(model, OptimizeOptions())
    oracle.assert_valid(result)
    # x.view(-1, 16) of a Reshape: the pair is one Reshape (onnxscript's rule, once the shape is known)
    assert [n.op_type for n in result.graph.node] == ["Reshape"]
    flat = next(t for t in result.graph.initializer if t.name == result.graph.node[-1].input[1])
    assert nh.to_array(flat).tolist() == [-1, 16]
    x = np.random.default_rng(1).standard_normal((4, 48)).astype(np.float32)
    feeds = {"x": x, "a": np.array(3, np.int64), "b": np.array(4, np.int64)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(got[0], want[0])


def test_a_named_dim_in_a_computed_reshape_shape_stays_that_dim():
    """r = Reshape(x, [N, a, b, 16]) (N = x's named dim "n", a and b run-time inputs): r's dim 0
    is "n", so Reshape(x, [Gather(Shape(r), 0), -1]) is Reshape(x, [0, -1])."""
    nodes = [h.make_node("Shape", ["x"], ["xs"]),
             h.make_node("Gather", ["xs", "i0"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "zero"], ["nu"]),
             h.make_node("Unsqueeze", ["a", "zero"], ["au"]),
             h.make_node("Unsqueeze", ["b", "zero"], ["bu"]),
             h.make_node("Concat", ["nu", "au", "bu", "last"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["r"]),
             h.make_node("Shape", ["r"], ["rs"]),
             h.make_node("Gather", ["rs", "i0"], ["rn"], axis=0),
             h.make_node("Unsqueeze", ["rn", "zero"], ["rnu"]),
             h.make_node("Concat", ["rnu", "minus_one"], ["flat"], axis=0),
             h.make_node("Reshape", ["x", "flat"], ["y"]),
             h.make_node("Relu", ["r"], ["z"])]
    inits = [_i("i0", 0), _i("zero", [0]), _i("last", [16]), _i("minus_one", [-1])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", 48]),
                                      h.make_tensor_value_info("a", I64, []), h.make_tensor_value_info("b", I64, [])],
                         [h.make_tensor_value_info("y", F, None), h.make_tensor_value_info("z", F, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    result, _ = optimize_proto(model, OptimizeOptions())
    oracle.assert_valid(result)
    flat = [n for n in result.graph.node if n.output[0] == "y"][0]
    assert nh.to_array(next(t for t in result.graph.initializer if t.name == flat.input[1])).tolist() == [0, -1]
    feeds = {"x": np.arange(5 * 48, dtype=np.float32).reshape(5, 48), "a": np.array(3, np.int64),
             "b": np.array(1, np.int64)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_a_zero_in_a_computed_reshape_shape_over_an_unknown_dim_is_unknown_not_zero():
    """r = Reshape(x, [0, a, 16]) (a a run-time input) over x of an unknown (unnamed) first dim: r's
    first dim is x's, unknown here; not 0. Shape(r)[0] * 2 stays computed at run time."""
    nodes = [h.make_node("Unsqueeze", ["a", "zero"], ["au"]),
             h.make_node("Concat", ["zero", "au", "last"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["r"]),
             h.make_node("Shape", ["r"], ["rs"]),
             h.make_node("Gather", ["rs", "i0"], ["n"], axis=0),
             h.make_node("Mul", ["n", "two"], ["n2"]),
             h.make_node("Relu", ["r"], ["z"])]
    inits = [_i("i0", 0), _i("zero", [0]), _i("last", [16]), _i("two", 2)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [None, 48]),
                                      h.make_tensor_value_info("a", I64, [])],
                         [h.make_tensor_value_info("n2", I64, []), h.make_tensor_value_info("z", F, [None, None, 16])],
                         inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    oracle.assert_valid(model)
    result, _ = optimize_proto(model, OptimizeOptions())
    oracle.assert_valid(result)
    typed = {v.name: v for v in (*result.graph.value_info, *result.graph.output)}
    if "r" in typed and typed["r"].type.tensor_type.HasField("shape"):
        first = typed["r"].type.tensor_type.shape.dim[0]
        assert not first.HasField("dim_value"), first  # unknown, not 0
    for rows in (5, 1):
        feeds = {"x": np.ones((rows, 48), np.float32), "a": np.array(3, np.int64)}
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        assert int(want[0]) == 2 * rows
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)


def _expand_model(against, swap=False):
    """cls_token.expand(N, -1, -1) as legacy exports write it: Where(Equal(shape, c), 1, shape)."""
    nodes = [h.make_node("Shape", ["x"], ["xs"]),
             h.make_node("Gather", ["xs", "i0"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "zero"], ["nu"]),
             h.make_node("Concat", ["nu", "minus_one", "minus_one"], ["shape"], axis=0),
             h.make_node("Equal", ["against", "shape"] if swap else ["shape", "against"], ["eq"]),
             h.make_node("Where", ["eq", "ones", "shape"], ["sizes"]),
             h.make_node("Expand", ["token", "sizes"], ["y"])]
    inits = [_i("i0", 0), _i("zero", [0]), _i("minus_one", [-1]), _i("against", against), _i("ones", [1, 1, 1]),
             nh.from_array(np.arange(4, dtype=np.float32).reshape(1, 1, 4), "token")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", 3])],
                         [h.make_tensor_value_info("y", F, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def test_a_dim_never_equals_a_negative_constant():
    for swap in (False, True):
        model = _expand_model([-1, -1, -1], swap)
        result, _ = optimize_proto(model, OptimizeOptions())
        oracle.assert_valid(result)
        assert "Equal" not in [n.op_type for n in result.graph.node]
        for batch in (2, 0):
            x = np.zeros((batch, 3), np.float32)
            np.testing.assert_array_equal(_run(result, x), _run(model, x))


def test_a_dim_may_equal_zero_or_a_positive_constant():
    for against, swap in (([0, -1, -1], False), ([0, -1, -1], True), ([2, -1, -1], False)):
        model = _expand_model(against, swap)
        result, _ = optimize_proto(model, OptimizeOptions())
        assert "Equal" in [n.op_type for n in result.graph.node], against
        for batch in (0, 2, 3):
            x = np.zeros((batch, 3), np.float32)
            np.testing.assert_array_equal(_run(result, x), _run(model, x))


def _expand_of_a_shape(data_dims, y_dims):
    """MobileViT-v2's attention, legacy export: ``e = Expand(s, Shape(y))`` (``s`` of ``data_dims``,
    ``y`` of ``y_dims``), then ``Reshape(e, [Gather(Shape(x), 0), -1])``: e's dim 0 is x's "n"
    only when the Expand's dims are worked out from the shape vector."""
    nodes = [h.make_node("Relu", ["s"], ["sr"]),
             h.make_node("Shape", ["y"], ["ys"]),
             h.make_node("Expand", ["sr", "ys"], ["e"]),
             h.make_node("Shape", ["x"], ["xs"]),
             h.make_node("Gather", ["xs", "i0"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "zero"], ["nu"]),
             h.make_node("Concat", ["nu", "minus_one"], ["flat"], axis=0),
             h.make_node("Reshape", ["e", "flat"], ["z"])]
    inits = [_i("i0", 0), _i("zero", [0]), _i("minus_one", [-1])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", 3]),
                                      h.make_tensor_value_info("s", F, data_dims),
                                      h.make_tensor_value_info("y", F, y_dims)],
                         [h.make_tensor_value_info("z", F, ["n", "w"])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _expand_dims(data_dims, y_dims):
    import onnx_ir as ir

    from rewriter.optimize.shape_arithmetic import FoldShapeArithmeticPass

    model = ir.serde.deserialize_model(_expand_of_a_shape(data_dims, y_dims))
    FoldShapeArithmeticPass()(model)
    e = next(n for n in model.graph if n.op_type == "Expand").outputs[0]
    return [d if isinstance(d, int) else d.value for d in e.shape.dims]


def test_an_expand_to_a_computed_shape_has_the_broadcast_dims():
    assert _expand_dims(["n", 4, 1], ["n", 4, 8]) == ["n", 4, 8]  # a 1 takes the vector's dim, named or static
    assert _expand_dims([1, 4, 1], ["n", 1, 8]) == ["n", 4, 8]  # a static d > 1 stays
    assert _expand_dims(["m", 1], ["n", 8]) == [None, 8]  # two different names: not known
    assert _expand_dims([4, 1], ["n", "k", 8]) == ["n", 4, 8]  # a longer vector: 4 against "k" is 4
    assert _expand_dims(["m", 4], [5, 1]) == [5, 4]  # an unknown d against 5 > 1 is 5 (valid only then)
    assert _expand_dims([None, 4], [1, 4]) == [None, 4]  # an unnamed d against 1 stays unknown


def test_a_reshape_reading_the_batch_after_an_expand_gets_a_constant_shape():
    model = _expand_of_a_shape(["n", 3, 1], ["n", 3, 8])
    result, _ = optimize_proto(model, OptimizeOptions())
    oracle.assert_valid(result)
    assert [n.op_type for n in result.graph.node] == ["Relu", "Shape", "Expand", "Reshape"]
    flat = next(t for t in result.graph.initializer if t.name == result.graph.node[-1].input[1])
    assert nh.to_array(flat).tolist() == [0, -1]
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        feeds = {"x": rng.standard_normal((batch, 3)).astype(np.float32),
                 "s": rng.standard_normal((batch, 3, 1)).astype(np.float32),
                 "y": rng.standard_normal((batch, 3, 8)).astype(np.float32)}
        np.testing.assert_array_equal(oracle.run(result, feeds)[0], oracle.run(model, feeds)[0])
