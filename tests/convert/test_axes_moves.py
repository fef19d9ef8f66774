"""Squeeze/Unsqueeze (13), Split (2, 13, 18), Slice (10), Pad (2, 11, 18, 19), Clip (6, 11) and TopK
(10, 11): attributes <-> inputs both ways, the features added on the way, refusals, scopes
and the official backend cases (also with their non-data inputs made constants)."""

from __future__ import annotations

import onnx
import pytest

from rewriter.convert import registry, steps
from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, convert_model, helper, model, np,
                                        refused, run, run_backend_case)
from tests.convert.support.moves_util import constantized

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.random.default_rng(0).normal(size=[2, 1, 6, 1]).astype(np.float32)
OPS = ["Squeeze", "Unsqueeze", "Split", "Slice", "Pad", "Clip", "TopK"]


def _ints(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def _one(op, opset, inputs, init=(), outputs=("y",), x_shape=(2, 1, 6, 1), elem=F, out_shapes=None, **attrs):
    outs = [(o, elem if o != "i" else I64, None if out_shapes is None else out_shapes[k])
            for k, o in enumerate(outputs)]
    return model([helper.make_node(op, ["x", *inputs], list(outputs), name="n", **attrs)], opset,
                 [("x", elem, list(x_shape))], outs, initializers=list(init))


def test_every_step_of_these_ops_is_own_or_type_only_both_ways():
    for op in OPS:
        versions = registry.schema_versions(op)
        for a, b in zip(versions, versions[1:]):
            for x, y in ((a, b), (b, a)):
                assert steps.step_kind(op, x, y) in ("own", "type-only"), (op, x, y)


# ---------------------------------------------------------------- Squeeze / Unsqueeze

@pytest.mark.parametrize("op,axes", [("Squeeze", [1, -1]), ("Squeeze", [3]), ("Unsqueeze", [0, -1]),
                                     ("Unsqueeze", [2])])
@pytest.mark.parametrize("target", [11, 7])
def test_squeeze_axes_input_down_and_up_again(op, axes, target):
    m = _one(op, 13, ["axes"], [_ints("axes", axes)])
    result, report = converts(m, target, {"x": X})
    node = result.graph.node[0]
    assert list(node.input) == ["x"] and not result.graph.initializer and not report.version_converter_called
    rank = 4 if op == "Squeeze" else 4 + len(axes)
    assert list(node.attribute[0].ints) == (axes if target >= 11 else [a % rank for a in axes])
    back, _ = converts(result, LATEST, {"x": X})
    assert len(back.graph.node[0].input) == 2


def test_squeeze_without_axes_up_gets_no_input():
    m = model([helper.make_node("Squeeze", ["x"], ["y"], name="n")], 11, [("x", F, [2, 1, 6, 1])], [("y", F, None)])
    result, _ = converts(m, LATEST, {"x": X}, expected=[X.reshape(2, 6)])
    assert list(result.graph.node[0].input) == ["x"]
    converts(result, 11, {"x": X}, expected=[X.reshape(2, 6)])
    empty = helper.make_node("Squeeze", ["x"], ["y"], name="n")
    empty.attribute.append(helper.make_attribute("axes", [], attr_type=onnx.AttributeProto.INTS))
    m = model([empty], 11, [("x", F, [2, 1, 6, 1])], [("y", F, None)], infer=False)
    refused(m, 13, "'n'", "Squeeze 11 -> 13", "empty axes")


def test_squeeze_refusals():
    refused(_one("Squeeze", 13, ["axes"], [_ints("axes", [])]), 11, "'n'", "Squeeze 13 -> 11", "empty")
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "a", "b"], ["ax"]),
             helper.make_node("Unsqueeze", ["x", "ax"], ["y"], name="n")]
    m = model(nodes, 13, [("x", F, [2, "k", 6, 1])], [("y", F, ["a", "b", "c", "d", "e"])],
              initializers=[_ints("a", [1]), _ints("b", [2])])  # axes from a dim known at run time only
    refused(m, 12, "'n'", "Unsqueeze 13 -> 11", "axes input 'ax' is not a constant")
    refused(_one("Squeeze", 13, ["axes"], [_ints("axes", [1])], elem=TensorProto.BFLOAT16), 11, "bfloat16")


def test_squeeze_in_if_branches_and_functions():
    then = helper.make_graph([helper.make_node("Squeeze", ["x", "axes"], ["t"], name="sq_then")], "then", [],
                             [helper.make_tensor_value_info("t", F, [2, 6, 1])])
    other = helper.make_graph([helper.make_node("Squeeze", ["x", "axes3"], ["e"], name="sq_else")], "else", [],
                              [helper.make_tensor_value_info("e", F, [2, 1, 6])])
    fn = helper.make_function("local", "F", ["a"], ["b"], [
        helper.make_node("Constant", [], ["ax"], name="c", value_ints=[0]),
        helper.make_node("Unsqueeze", ["a", "ax"], ["b"], name="fn_unsq")], [helper.make_opsetid("", 13)])
    nodes = [helper.make_node("If", ["c"], ["z"], name="if", then_branch=then,
                              else_branch=helper.make_graph(
                                  [helper.make_node("Squeeze", ["x", "axes"], ["e"], name="sq_else")], "else", [],
                                  [helper.make_tensor_value_info("e", F, [2, 6, 1])])),
             helper.make_node("F", ["z"], ["y"], domain="local", name="call")]
    del other
    m = model(nodes, 13, [("c", TensorProto.BOOL, []), ("x", F, [2, 1, 6, 1])], [("y", F, None)],
              initializers=[_ints("axes", [1]), _ints("axes3", [3])], functions=[fn])
    for target in (11, 7):
        for c in (True, False):
            result, _ = converts(m, target, {"c": np.array(c), "x": X})
        assert [n.op_type for n in result.functions[0].node] == ["Unsqueeze"]
    up, _ = converts(result, LATEST, {"c": np.array(True), "x": X})
    assert [n.op_type for n in up.functions[0].node] == ["Constant", "Unsqueeze"]


# ---------------------------------------------------------------- Split

def test_split_sizes_input_down_and_attribute_up():
    m = _one("Split", 13, ["s"], [_ints("s", [2, 4])], outputs=("a", "b"), axis=2)
    for target in (11, 7):
        result, _ = converts(m, target, {"x": X})
        assert list(result.graph.node[0].input) == ["x"] and not result.graph.initializer
    up, _ = converts(result, LATEST, {"x": X})
    assert len(up.graph.node[0].input) == 2


@pytest.mark.parametrize("dim,n", [(6, 4), (6, 3), (7, 2), (5, 3)])
def test_split_num_outputs_down(dim, n):
    x = np.arange(2 * dim, dtype=np.float32).reshape(2, dim)
    outs = tuple(f"o{k}" for k in range(n))
    m = model([helper.make_node("Split", ["x"], list(outs), name="n", axis=1, num_outputs=n)], 18,
              [("x", F, [2, dim])], [(o, F, None) for o in outs])
    for target in (13, 11, 7):
        result, _ = converts(m, target, {"x": x})
        assert not any(a.name == "num_outputs" for a in result.graph.node[0].attribute)


@pytest.mark.parametrize("dim", [6, 7, 8])
def test_split_num_outputs_with_a_dynamic_dim_computes_the_sizes(dim):
    outs = [("a", F, [2, "p"]), ("b", F, [2, "q"]), ("c", F, [2, "r"])]
    m = model([helper.make_node("Split", ["x"], ["a", "b", "c"], name="n", axis=-1, num_outputs=3)], 18,
              [("x", F, [2, "d"])], outs)
    x = np.arange(2 * dim, dtype=np.float32).reshape(2, dim)
    chunk = -(-dim // 3)
    expected = [x[:, :chunk], x[:, chunk:2 * chunk], x[:, 2 * chunk:]]
    result, _ = converts(m, 13, {"x": x}, expected=expected)
    assert next(n for n in result.graph.node if n.op_type == "Split").name == "n"
    result, _ = converts(m, 11, {"x": x}, expected=expected)  # below 13: one Slice per part
    assert "Split" not in {n.op_type for n in result.graph.node}


def test_split_up_writes_num_outputs():
    m11 = model([helper.make_node("Split", ["x"], ["a", "b"], name="n", axis=-1)], 11,
                [("x", F, [2, 6])], [("a", F, None), ("b", F, None)])
    result, _ = converts(m11, LATEST, {"x": np.ones([2, 6], np.float32)})
    assert onnx.helper.get_attribute_value(result.graph.node[0].attribute[1]) == 2


@pytest.mark.parametrize("target", [10, 11, 12])
def test_split_sizes_known_at_run_time_become_slices(target):
    """Split-13 with its sizes a graph input, and Split-18 num_outputs over a dim known at run
    time only (sizes computed from the shape): one Slice per part, the same parts."""
    outs = [("p", F, ["n", "a"]), ("q", F, ["n", "b"]), ("r", F, ["n", "c"])]
    m = model([helper.make_node("Split", ["x", "sz"], ["p", "q", "r"], name="n", axis=1)], 13,
              [("x", F, ["n", 6]), ("sz", TensorProto.INT64, [3])], outs)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "sz": np.array([1, 3, 2], np.int64)}
    result, report = converts(m, target, feeds)
    assert report.changes["Split with run-time sizes -> Slices"] == 1
    assert "Split" not in {n.op_type for n in result.graph.node}
    m = model([helper.make_node("Split", ["x"], ["p", "q", "r"], name="n", axis=0, num_outputs=3)], 18,
              [("x", F, ["n", 2])], [("p", F, ["a", 2]), ("q", F, ["b", 2]), ("r", F, ["c", 2])])
    converts(m, target, {"x": np.arange(14, dtype=np.float32).reshape(7, 2)})  # 3, 3, 1


# ---------------------------------------------------------------- Slice

def test_slice_inputs_down_to_attributes_and_up():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    init = [_ints("st", [1, -4]), _ints("en", [1000, -1]), _ints("ax", [0, -1]), _ints("sp", [1, 1])]
    m = model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="n")], 13,
              [("x", F, [3, 4, 5])], [("y", F, None)], initializers=init)
    result, _ = converts(m, 9, {"x": x})
    node = result.graph.node[0]
    assert list(node.input) == ["x"] and not result.graph.initializer
    assert {a.name: list(a.ints) for a in node.attribute} == {"starts": [1, -4], "ends": [1000, -1], "axes": [0, 2]}
    up, _ = converts(result, LATEST, {"x": x})
    assert len(up.graph.node[0].input) == 4


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0], [100], [2], [2]), ([-1], [-100], [1], [-1]), ([1, 4, 0], [3, -10, 100], [0, 2, 1], [1, -2, 3]),
    ([5, 0], [-7, 1], [2, 0], [-2, 1]), ([2], [2], [1], [-1])])
def test_slice_steps_become_gathers_on_static_dims(starts, ends, axes, steps):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    init = [_ints("st", starts), _ints("en", ends), _ints("ax", axes), _ints("sp", steps)]
    m = model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="n")], 13,
              [("x", F, [3, 4, 5])], [("y", F, None)], initializers=init)
    for target in (9, 7):
        result, _ = converts(m, target, {"x": x})
        assert next(n for n in result.graph.node if "y" in n.output).name == "n"
        assert {n.op_type for n in result.graph.node} <= {"Slice", "Gather"} and not any(
            len(n.input) > 1 for n in result.graph.node if n.op_type == "Slice")
    one, _ = convert_model(m, 1)
    converts(one, 13, {"x": x}, expected=run(m, {"x": x}))


def test_slice_refusals():
    init = [_ints("st", [0]), _ints("en", [2]), _ints("sp", [2])]
    m = model([helper.make_node("Slice", ["x", "st", "en", "", "sp"], ["y"], name="n")], 13,
              [("x", F, ["a", 4])], [("y", F, None)], initializers=init)
    refused(m, 9, "'n'", "Slice 10 -> 1", "steps [2]", "size of axis 0")
    converts(m, 10, {"x": np.ones([3, 4], np.float32)})
    m = model([helper.make_node("Slice", ["x", "st", "e"], ["y"], name="n")], 13,
              [("x", F, [3, 4]), ("e", I64, [1])], [("y", F, None)], initializers=init[:1])
    refused(m, 9, "'n'", "ends input 'e' is not a constant")


# ---------------------------------------------------------------- Pad

def test_pad_axes_fold_into_pads_and_value_becomes_attribute():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    init = [_ints("p", [1, 2, 0, 3]), helper.make_tensor("v", F, [], [2.5]), _ints("ax", [-1, 0])]
    m = model([helper.make_node("Pad", ["x", "p", "v", "ax"], ["y"], name="n")], 18, [("x", F, [3, 4])],
              [("y", F, None)], initializers=init)
    r13, _ = converts(m, 13, {"x": x})
    assert len(r13.graph.node[0].input) == 3
    r7, _ = converts(m, 7, {"x": x})
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in r7.graph.node[0].attribute}
    assert attrs == {"pads": [2, 1, 3, 0], "value": 2.5} and not r7.graph.initializer
    up, _ = converts(r7, LATEST, {"x": x})
    assert len(up.graph.node[0].input) == 3


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes_round_trip(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = model([helper.make_node("Pad", ["x"], ["y"], name="n", mode=mode, pads=[1, 2, 1, 0])], 2,
              [("x", F, [3, 4])], [("y", F, None)])
    up, _ = convert_model(m, 13)
    down, _ = converts(up, 7, {"x": x})
    converts(down, LATEST, {"x": x})


def test_pad_1_paddings_is_renamed():
    m = model([helper.make_node("Pad", ["x"], ["y"], name="n", paddings=[0, 1, 0, 1])], 1,
              [("x", F, [3, 4])], [("y", F, [3, 6])])
    result, _ = converts(m, 11, {"x": np.ones([3, 4], np.float32)}, expected=[np.pad(np.ones([3, 4], np.float32),
                                                                                     [(0, 0), (1, 1)])])
    back, _ = convert_model(result, 1)
    assert back.graph.node[0].attribute[0].name == "paddings"


def test_pad_refusals():
    x_shape = [3, 4]
    wrap = model([helper.make_node("Pad", ["x", "p"], ["y"], name="n", mode="wrap")], 19, [("x", F, x_shape)],
                 [("y", F, None)], initializers=[_ints("p", [0, 1, 0, 1])])
    refused(wrap, 18, "'n'", "Pad 19 -> 18", "'wrap'", "targets >= 19")
    ints = model([helper.make_node("Pad", ["x", "p"], ["y"], name="n")], 13, [("x", TensorProto.INT32, x_shape)],
                 [("y", TensorProto.INT32, None)], initializers=[_ints("p", [0, 1, 0, 1])])
    refused(ints, 10, "'n'", "Pad 11 -> 2", "int32")
    dbl = model([helper.make_node("Pad", ["x", "p", "v"], ["y"], name="n")], 13, [("x", TensorProto.DOUBLE, x_shape)],
                [("y", TensorProto.DOUBLE, None)],
                initializers=[_ints("p", [0, 1, 0, 1]), helper.make_tensor("v", TensorProto.DOUBLE, [], [0.1])])
    refused(dbl, 10, "'n'", "0.1", "float32")
    unknown_rank = model([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="n")], 18,
                         [("x", F, None), ("p", I64, [2])], [("y", F, None)], initializers=[_ints("ax", [1])],
                         infer=False)
    refused(unknown_rank, 13, "'n'", "Pad 18 -> 13", "rank of 'x' unknown")
    computed_axes = model([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="n")], 18,
                          [("x", F, x_shape), ("ax", I64, [1])], [("y", F, ["a", "b"])],
                          initializers=[_ints("p", [1, 1])])
    refused(computed_axes, 13, "'n'", "axes input 'ax' is not a constant")


def test_pad_computed_pads_with_constant_axes_are_gathered_into_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = model([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="n")], 18,
              [("x", F, [3, 4]), ("p", I64, [4])], [("y", F, ["a", "b"])], initializers=[_ints("ax", [-1, 0])])
    p = np.array([1, 2, 0, 3], dtype=np.int64)  # axis 1: 1 before, 0 after; axis 0: 2 before, 3 after
    result, _ = converts(m, 13, {"x": x, "p": p}, expected=[np.pad(x, [(2, 3), (1, 0)])])
    assert [n.op_type for n in result.graph.node] == ["Concat", "Gather", "Pad"]
    refused(m, 10, "'n'", "Pad 11 -> 2", "not a constant")


# ---------------------------------------------------------------- Clip

@pytest.mark.parametrize("bounds", [(0.2, 0.7), (None, 0.7), (-0.5, None), (None, None)])
def test_clip_bounds_down_and_up(bounds):
    inputs = ["x"] + ["mn" if bounds[0] is not None else "", "mx" if bounds[1] is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    init = [helper.make_tensor(n, F, [], [v]) for n, v in zip(("mn", "mx"), bounds) if v is not None]
    m = model([helper.make_node("Clip", inputs, ["y"], name="n")], 13, [("x", F, [2, 1, 6, 1])], [("y", F, None)],
              initializers=init)
    result, report = converts(m, 7, {"x": X})
    assert list(result.graph.node[0].input) == ["x"] and not result.graph.initializer
    assert not report.version_converter_called
    up, _ = converts(result, LATEST, {"x": X})
    assert len([i for i in up.graph.node[0].input if i]) == 1 + sum(b is not None for b in bounds)


def test_clip_refusals():
    m = model([helper.make_node("Clip", ["x", "", "mx"], ["y"], name="n")], 13,
              [("x", F, [2]), ("mx", F, [])], [("y", F, None)])
    refused(m, 10, "'n'", "Clip 11 -> 6", "max input 'mx' is not a constant")
    d = model([helper.make_node("Clip", ["x", "mn"], ["y"], name="n")], 13, [("x", TensorProto.DOUBLE, [2])],
              [("y", TensorProto.DOUBLE, None)], initializers=[helper.make_tensor("mn", TensorProto.DOUBLE, [], [0.1])])
    refused(d, 10, "'n'", "float32")
    i64 = model([helper.make_node("Clip", ["x", "lo"], ["y"], name="n")], 13,
                [("x", TensorProto.INT64, [2]), ("lo", TensorProto.INT64, [])], [("y", TensorProto.INT64, None)])
    refused(i64, 8, "'n'", "Clip 12 -> 11", "int64", "opset 9")  # integer Clip below 12: tests/convert/test_type_routes_*


# ---------------------------------------------------------------- TopK

@pytest.mark.parametrize("largest,sorted_", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_topk_down_to_7_and_up(largest, sorted_):
    x = np.random.default_rng(1).permutation(24).astype(np.float32).reshape(2, 12)
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="n", axis=-1, largest=largest, sorted=sorted_)],
              13, [("x", F, [2, 12])], [("v", F, None), ("i", I64, None)], initializers=[_ints("k", [5])])
    result, _ = converts(m, 7, {"x": x}, runner=_sorted_topk)
    assert [n.op_type for n in result.graph.node] == (["TopK"] if largest else ["Neg", "TopK", "Neg"])
    topk = next(n for n in result.graph.node if n.op_type == "TopK")
    assert list(topk.input) == [topk.input[0]] and next(a.i for a in topk.attribute if a.name == "k") == 5
    assert next(n for n in result.graph.node if "v" in n.output).name == "n"
    converts(result, LATEST, {"x": x}, runner=_sorted_topk)


def _sorted_topk(m, feeds):
    """TopK's outputs in value order: with sorted=0 the order is unspecified (sorted is one valid
    answer), so runs compare as sets of (value, index) pairs."""
    v, i = run(m, feeds)
    order = np.lexsort((i, v), axis=-1)
    return [np.take_along_axis(v, order, -1), np.take_along_axis(i, order, -1)]


def test_topk_refusals():
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="n")], 11,
              [("x", F, [2, 3]), ("k", I64, [1])], [("v", F, None), ("i", I64, None)])
    refused(m, 9, "'n'", "TopK 10 -> 1", "k input 'k' is not a constant")
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="n")], 11,
              [("x", TensorProto.INT32, [2, 3])], [("v", TensorProto.INT32, None), ("i", I64, None)],
              initializers=[_ints("k", [1])])
    refused(m, 10, "'n'", "TopK 11 -> 10", "int32")


# ---------------------------------------------------------------- the official backend cases

@pytest.mark.parametrize("case", cases(*OPS), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case, (7, 11, 13, 17, 18))


_BLOCKED = {"test_wrap_pad": 19}  # case -> lowest target it converts to


@pytest.mark.parametrize("case", [c for c in cases(*OPS) if len(c.model.graph.input) > 1], ids=lambda c: c.name)
def test_backend_cases_with_constant_inputs(case):
    """The cases with every input after the data made a constant: the downward steps move them to
    attributes (down to 7 unless the data's type or a feature exists only later)."""
    k = constantized(case)
    source = next(o.version for o in case.model.opset_import if o.domain == "")
    targets = [t for t in (7, 11, 13, 17, 18) if t != source]
    done = run_backend_case(k, targets)
    elem = case.model.graph.input[0].type.tensor_type.elem_type
    floats = elem in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)
    if case.name in _BLOCKED:
        assert done == len([t for t in targets if t >= _BLOCKED[case.name]])
    elif floats:
        assert done == len(targets), case.name


def _ref_function_model(opset):
    """Function U(a) with attribute 'ax': Unsqueeze's axes come from the caller."""
    if opset >= 13:
        const = helper.make_node("Constant", [], ["k"], name="c")
        const.attribute.append(onnx.AttributeProto(name="value_ints", ref_attr_name="ax",
                                                   type=onnx.AttributeProto.INTS))
        body = [const, helper.make_node("Unsqueeze", ["a", "k"], ["b"], name="fn_unsq")]
    else:
        unsq = helper.make_node("Unsqueeze", ["a"], ["b"], name="fn_unsq")
        unsq.attribute.append(onnx.AttributeProto(name="axes", ref_attr_name="ax", type=onnx.AttributeProto.INTS))
        body = [unsq]
    fn = helper.make_function("local", "U", ["a"], ["b"], body, [helper.make_opsetid("", opset)], attributes=["ax"])
    call = helper.make_node("U", ["x"], ["y"], domain="local", name="call", ax=[0])
    return model([call], opset, [("x", F, [2, 3])], [("y", F, [1, 2, 3])], functions=[fn])


@pytest.mark.parametrize("source,target", [(11, 13), (11, LATEST), (13, 11), (LATEST, 11)])
def test_function_attribute_references_move_both_ways(source, target):
    x = np.ones([2, 3], np.float32)
    result, _ = converts(_ref_function_model(source), target, {"x": x}, expected=[x[None]])
    refs = [(n.op_type, a.name) for n in result.functions[0].node for a in n.attribute if a.ref_attr_name == "ax"]
    assert refs == ([("Constant", "value_ints")] if target >= 13 else [("Unsqueeze", "axes")])


def test_split_below_2_writes_the_axis_and_checks_types():
    m = model([helper.make_node("Split", ["x"], ["a", "b"], name="n")], 11, [("x", F, [2, 3])],
              [("a", F, None), ("b", F, None)])
    one, _ = convert_model(m, 1)
    assert [(a.name, a.i) for a in one.graph.node[0].attribute] == [("axis", 0)]
    converts(one, 11, {"x": np.ones([2, 3], np.float32)}, expected=[np.ones([1, 3], np.float32)] * 2)
    ints = model([helper.make_node("Split", ["x"], ["a", "b"], name="n")], 11, [("x", TensorProto.INT32, [2, 3])],
                 [("a", TensorProto.INT32, None), ("b", TensorProto.INT32, None)])
    refused(ints, 1, "'n'", "Split 2 -> 1", "int32")
