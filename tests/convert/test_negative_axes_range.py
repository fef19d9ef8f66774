"""The negative-axes adapters going below opset 11: the range of a valid axis (issue 27).

Every op that takes an axis (or axes) attribute, and Slice's axes input: [-rank, rank - 1]
is valid and is normalized (the result computes what the source computes); only Flatten
accepts [-rank, rank]. Exactly -rank - 1 or rank (rank + 1 for Flatten) is refused, naming the
axis, negative or not.

Independent oracles: the ops and their older versions are read from ``onnx.defs`` (every
default-domain op whose opset-11 schema has an ``axis``/``axes`` attribute and an older version
that did not already default to a negative axis); whether an axis is valid at opset 11 from
onnx's strict shape inference or ONNX Runtime refusing the source; the values from ONNX
Runtime running the source at opset 11 (for the deprecated Scatter, which it no longer runs,
its successor ScatterElements-11 on the same inputs) and the result at its opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.convert import convert_model
from tests.oracle import assert_valid

F, I64 = T.FLOAT, T.INT64
SHAPE = [2, 4, 6]
TARGET = 10


def _ops_with_axes_changed_at_11() -> dict[str, str]:
    """op -> 'axis' or 'axes', from onnx.defs."""
    found = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain != "" or schema.since_version != 11:
            continue
        names = [a for a in schema.attributes if a in ("axis", "axes")]
        if not names:
            continue
        try:
            onnx.defs.get_schema(schema.name, 10, "")
        except onnx.defs.SchemaError:
            continue  # new at 11: nothing older to convert to
        if schema.name == "TopK":
            continue  # TopK-1/10 took negative axes already (their inference normalizes them): its own test
        found[schema.name] = names[0]
    return found


OPS = _ops_with_axes_changed_at_11()


def test_the_op_list_is_what_onnx_defs_says():
    """The premise, and the adapter table checked against it: every such op is registered."""
    from rewriter.convert import registry

    assert {"ReduceSum", "Flatten", "Squeeze", "Unsqueeze", "Softmax", "OneHot", "Gather", "Scatter"} <= set(OPS)
    for op in OPS:
        low = onnx.defs.get_schema(op, 10, "").since_version
        assert registry.lookup(op, 11, low) is not None, op


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _build(op: str, v: int, as_op: str | None = None):
    """(opset-11 model of one ``op`` node with axis ``v``, feeds, the rank the axis indexes)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, size=SHAPE).astype(np.float32)
    inputs, inits, feeds, outs = [_vi("x", F, SHAPE)], [], {"x": x}, [_vi("y", F, None)]
    rank, ins, outputs = 3, ["x"], ["y"]
    kw = {OPS[op]: [v] if OPS[op] == "axes" else v}
    if op == "Squeeze":
        inputs, feeds = [_vi("x", F, [2, 1, 6])], {"x": x[:, :1, :]}
    elif op == "Unsqueeze":
        rank = 4  # its axes index the output
    elif op == "Concat":
        ins = ["x", "x"]
    elif op == "Compress":
        inits.append(nh.from_array(np.array([False, True]), "cond"))
        ins = ["x", "cond"]
    elif op == "Gather":
        inits.append(nh.from_array(np.array([1, 0, 1], np.int64), "idx"))
        ins = ["x", "idx"]
    elif op in ("ArgMax", "ArgMin"):
        outs = [_vi("y", I64, None)]
    elif op == "Split":
        outs, outputs = [_vi("y", F, None), _vi("y2", F, None)], ["y", "y2"]
    elif op == "OneHot":
        inputs = [_vi("x", I64, SHAPE)]
        feeds = {"x": rng.integers(0, 3, size=SHAPE).astype(np.int64)}
        inits += [nh.from_array(np.array(3, np.int64), "depth"), nh.from_array(np.array([0.0, 1.0], np.float32), "vals")]
        ins, rank = ["x", "depth", "vals"], 4  # its axis indexes the output
    elif op == "Scatter":
        inits += [nh.from_array(np.ones([1, 1, 1], np.int64), "idx"), nh.from_array(np.full([1, 1, 1], 7.0, np.float32), "upd")]
        ins = ["x", "idx", "upd"]
    graph = h.make_graph([h.make_node(as_op or op, ins, outputs, name="n", **kw)], "g", inputs, outs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 11)])
    model.ir_version = 6
    _declare_outputs(model)
    return model, feeds, rank


def _declare_outputs(model: onnx.ModelProto) -> None:
    """The outputs' shapes as onnx's inference finds them (the checker wants them declared);
    left unknown where it finds none (an invalid axis)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - an invalid axis: the conversion is to refuse it anyway
        return
    for out, found in zip(model.graph.output, inferred.graph.output):
        if found.type.tensor_type.HasField("shape"):
            out.type.CopyFrom(found.type)


def _squeeze_axis_ok(op, v, rank):
    """Squeeze needs a dim of 1 there: x is [2, 1, 6], so only axis 1 (or -2) squeezes."""
    return op != "Squeeze" or v % rank == 1


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _source_outputs(op, v, model, feeds):
    if op == "Scatter":  # ONNX Runtime no longer runs Scatter-11: ScatterElements-11 is the same op renamed
        model = _build(op, v, as_op="ScatterElements")[0]
    return _ort(model, feeds)


def _valid_at_11(op, v) -> bool:
    """The oracle for an axis's validity: onnx's strict inference and ONNX Runtime both accept it."""
    model, feeds, _ = _build(op, v, as_op="ScatterElements" if op == "Scatter" else None)
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        _ort(model, feeds)
    except Exception:  # noqa: BLE001 - either refusing it says: not valid
        return False
    return True


def _valid_range(op, rank):
    return range(-rank, rank + 1 if op == "Flatten" else rank)


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_axis_in_the_valid_range_is_normalized_and_computes_the_same(op):
    _, _, rank = _build(op, 0)
    converted = 0
    for v in _valid_range(op, rank):
        if not _squeeze_axis_ok(op, v, rank):
            continue
        assert _valid_at_11(op, v), (op, v)  # the premise: the oracle says it is valid
        model, feeds, _ = _build(op, v)
        result, report = convert_model(model, TARGET)
        assert_valid(result)
        (node,) = result.graph.node
        written = [a for a in node.attribute if a.name == OPS[op]]
        value = list(written[0].ints) if OPS[op] == "axes" else [written[0].i]
        assert value == [v % rank if v < 0 else v], (op, v, value)  # normalized, and non-negative
        expected = _source_outputs(op, v, model, feeds)
        got = _ort(result, feeds)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            np.testing.assert_array_equal(g, e, err_msg=f"{op} axis {v}")
        if v < 0:
            assert report.changes["negative axes normalized"] == 1
        converted += 1
    assert converted >= (2 if op == "Squeeze" else 2 * rank)


@pytest.mark.parametrize("op", sorted(OPS))
def test_the_axes_just_outside_the_range_are_refused(op):
    _, _, rank = _build(op, 0)
    top = rank + 1 if op == "Flatten" else rank  # the first invalid positive axis
    for v in (-rank - 1, top):
        assert not _valid_at_11(op, v), (op, v)  # the premise: the oracle refuses it at opset 11
        model, _, _ = _build(op, v)
        with pytest.raises(rewriter.RewriterError) as info:
            convert_model(model, TARGET)
        message = str(info.value)
        assert f"axis {v} is out of range for rank {rank}" in message, message
        assert "'n'" in message, message


def test_flatten_alone_accepts_the_rank_itself():
    """Flatten's axis = rank (everything in the first dim) converts; Softmax's same axis does not."""
    model, feeds, rank = _build("Flatten", 3)
    result, _ = convert_model(model, TARGET)
    (got,) = _ort(result, feeds)
    assert got.shape == (int(np.prod(SHAPE)), 1)
    model, _, _ = _build("Flatten", -3)
    result, _ = convert_model(model, TARGET)
    assert [a.i for a in result.graph.node[0].attribute if a.name == "axis"] == [0]
    with pytest.raises(rewriter.RewriterError, match="axis 3 is out of range for rank 3"):
        convert_model(_build("Softmax", 3)[0], TARGET)


def _slice_model(axes: list[int]) -> onnx.ModelProto:
    inits = [nh.from_array(np.array(a, np.int64), n) for n, a in
             (("starts", [1] * len(axes)), ("ends", [3] * len(axes)), ("axes", axes))]
    graph = h.make_graph([h.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="n")], "g",
                         [_vi("x", F, SHAPE)], [_vi("y", F, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 11)])
    model.ir_version = 6
    _declare_outputs(model)
    return model


def test_slice_axes_input_range():
    x = np.random.default_rng(1).normal(size=SHAPE).astype(np.float32)
    for v in range(-3, 3):
        model = _slice_model([v])
        result, _ = convert_model(model, TARGET)
        assert_valid(result)
        axes = {t.name: nh.to_array(t) for t in result.graph.initializer}[result.graph.node[0].input[3]]
        assert axes.tolist() == [v % 3]
        np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])
    for v in (-4, 3):
        with pytest.raises(Exception):  # the oracle: invalid at opset 11
            onnx.shape_inference.infer_shapes(_slice_model([v]), check_type=True, strict_mode=True)
            _ort(_slice_model([v]), {"x": x})
        with pytest.raises(rewriter.RewriterError, match=rf"axes \[{v}\] are out of range for rank 3"):
            convert_model(_slice_model([v]), TARGET)


def _topk_model(v: int) -> onnx.ModelProto:
    graph = h.make_graph([h.make_node("TopK", ["x", "k"], ["y", "i"], name="n", axis=v)], "g", [_vi("x", F, SHAPE)],
                         [_vi("y", F, None), _vi("i", I64, None)], [nh.from_array(np.array([2], np.int64), "k")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 11)])
    model.ir_version = 6
    _declare_outputs(model)
    return model


def test_topk_axes_in_range_convert_and_the_others_are_refused():
    """TopK's older versions took negative axes already; the range is still [-rank, rank - 1]."""
    x = np.random.default_rng(2).permutation(48).reshape(SHAPE).astype(np.float32)  # no ties
    for v in range(-3, 3):
        model = _topk_model(v)
        result, _ = convert_model(model, TARGET)
        assert_valid(result)
        for e, g in zip(_ort(model, {"x": x}), _ort(result, {"x": x})):
            np.testing.assert_array_equal(g, e)
    for v in (-4, 3):
        assert not _valid_at_11_model(_topk_model(v), {"x": x})
        with pytest.raises(rewriter.RewriterError):
            convert_model(_topk_model(v), TARGET)


def _valid_at_11_model(model, feeds) -> bool:
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        _ort(model, feeds)
    except Exception:  # noqa: BLE001
        return False
    return True
