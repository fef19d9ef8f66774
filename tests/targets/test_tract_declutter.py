"""tract 0.23's two declutter defects (rewriter/targets/tract_declutter.py): integer Muls by a
one-element constant computed in float32 between Casts when every product is below 2^24, and
identical nodes merged before tract merges them itself. Oracles: ONNX Runtime (the rewritten model
gives the original's integers, bit for bit, over every input code), the value ranges against
numpy, and tract itself where its venv exists (the small model it fails on, run once converted)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert import convert_for
from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.targets.tract_declutter import duplicates_merged, int_products_in_float, value_range
from tests.targets.runtime_runs import run_in


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _table_index(elem=T.UINT8, row=256, qmin=0, dims=(4,)) -> onnx.ModelProto:
    """The QLinearAdd lowering's table index: (Cast(a) - qmin) * row + (Cast(b) - qmin), a Gather."""
    table = numpy_helper.from_array((np.arange(256 * 256) % 251).astype(np.uint8), "table")
    consts = [numpy_helper.from_array(np.array(v, np.int32), n) for n, v in (("qmin", qmin), ("row", row))]
    nodes = [helper.make_node("Cast", ["a"], ["ai"], to=T.INT32), helper.make_node("Cast", ["b"], ["bi"], to=T.INT32),
             helper.make_node("Sub", ["ai", "qmin"], ["as"]), helper.make_node("Sub", ["bi", "qmin"], ["bs"]),
             helper.make_node("Mul", ["as", "row"], ["ar"], name="index_mul"),
             helper.make_node("Add", ["ar", "bs"], ["i32"]), helper.make_node("Cast", ["i32"], ["i"], to=T.INT64),
             helper.make_node("Gather", ["table", "i"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, elem, list(dims)) for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", T.UINT8, list(dims))], [table, *consts])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("elem, qmin", [(T.UINT8, 0), (T.INT8, -128)])
def test_the_table_index_in_float_gives_every_code_pair_the_same_value(elem, qmin):
    model = _table_index(elem, qmin=qmin, dims=(256 * 256,))
    codes = np.arange(256).astype(np.uint8).view(np.int8 if elem == T.INT8 else np.uint8)
    a, b = np.repeat(codes, 256), np.tile(codes, 256)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    notes = int_products_in_float(rewritten, "tract 0.23")
    assert len(notes) == 1 and "1 integer Mul" in notes[0] and "'index_mul'" in notes[0]
    onnx.checker.check_model(rewritten, full_check=True)
    assert not [n for n in rewritten.graph.node if n.op_type == "Mul" and n.input[1] == "row"]
    np.testing.assert_array_equal(_ort(rewritten, {"a": a, "b": b})[0], _ort(model, {"a": a, "b": b})[0])


@pytest.mark.parametrize("elem, row", [(T.UINT16, 65536), (T.UINT8, 65794)])
def test_a_product_that_may_reach_2_24_is_left(elem, row):
    model = _table_index(elem, row=row)  # 65535 * 65536; 255 * 65794 = 2^24 + 14: not exact in float32
    before = model.SerializeToString()
    assert int_products_in_float(model, "tract 0.23") == [] and model.SerializeToString() == before


def test_a_factor_without_a_known_range_is_left():
    model = _table_index()
    model.graph.node[0].input[0] = "wide"  # a Cast of an int32 graph input: any int32
    model.graph.input.append(helper.make_tensor_value_info("wide", T.INT32, [4]))
    before = model.SerializeToString()
    assert int_products_in_float(model, "tract 0.23") == [] and model.SerializeToString() == before


@pytest.mark.parametrize("chain, want", [
    ([("Cast", T.UINT8)], (0, 255)), ([("Cast", T.INT8)], (-128, 127)), ([("Cast", T.INT16)], (-32768, 32767)),
    ([("Cast", T.BOOL)], (0, 1)), ([("Cast", T.INT8), ("Sub", 5)], (-133, 122)),
    ([("Cast", T.UINT8), ("Mul", -3)], (-765, 0)), ([("Cast", T.INT8), ("Neg", None)], (-127, 128)),
    ([("Cast", T.UINT8), ("Add", 7), ("Mul", 2)], (14, 524)), ([("Cast", T.INT32)], None),
])
def test_value_ranges(chain, want):
    """The range read from the graph, against numpy on every value the input type holds."""
    first = chain[0][1]
    kind = {T.UINT8: np.uint8, T.INT8: np.int8, T.INT16: np.int16, T.BOOL: np.bool_, T.INT32: np.int32}[first]
    nodes, inits, name = [helper.make_node("Cast", ["x"], ["v0"], to=T.INT32)], [], "v0"
    for k, (op, c) in enumerate(chain[1:], 1):
        if op == "Neg":
            nodes.append(helper.make_node("Neg", [name], [f"v{k}"]))
        else:
            inits.append(numpy_helper.from_array(np.array(c, np.int32), f"c{k}"))
            nodes.append(helper.make_node(op, [name, f"c{k}"], [f"v{k}"]))
        name = f"v{k}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", first, [None])],
                              [helper.make_tensor_value_info(name, T.INT32, [None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    elems = {n: t.tensor_type.elem_type for n, t in value_types(model).items() if t.HasField("tensor_type")}
    got = value_range(name, next(iter(traversal.iter_scopes(model))), elems)
    assert got == want
    if want is not None:
        every = (np.arange(2) if kind is np.bool_ else np.arange(np.iinfo(kind).min, np.iinfo(kind).max + 1)).astype(kind)
        out = _ort(model, {"x": every})[0]
        assert (int(out.min()), int(out.max())) == want  # the range is exact for these chains


def _masks(order=("Z", "Yb", "Ya")) -> onnx.ModelProto:
    """Two identical Unsqueezes of one length, each read by an identical Less, each masking X: tract
    0.23.9 merges them itself and fails at run time ("eval() called on a Dummy op")."""
    inits = [numpy_helper.from_array(np.array([[0]], np.int32), "c"), numpy_helper.from_array(np.array([0, 1]), "ax"),
             numpy_helper.from_array(np.zeros((1, 1, 3), np.float32), "zero")]
    nodes = [helper.make_node("Cast", ["L"], ["Li"], to=T.INT32), helper.make_node("Unsqueeze", ["Li", "ax"], ["Ua"]),
             helper.make_node("Unsqueeze", ["Li", "ax"], ["Ub"]), helper.make_node("Cast", ["Ua"], ["Z"], to=T.FLOAT),
             helper.make_node("Less", ["c", "Ua"], ["Ma"]), helper.make_node("Less", ["c", "Ub"], ["Mb"]),
             helper.make_node("Where", ["Ma", "X", "zero"], ["Ya"]), helper.make_node("Where", ["Mb", "X", "zero"], ["Yb"])]
    shapes = {"Z": [1, 1, 1], "Ya": [1, 1, 3], "Yb": [1, 1, 3]}
    graph = helper.make_graph(nodes, "masks", [helper.make_tensor_value_info("L", T.INT64, [1]),
                                               helper.make_tensor_value_info("X", T.FLOAT, [1, 1, 3])],
                              [helper.make_tensor_value_info(o, T.FLOAT, shapes[o]) for o in order], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


FEEDS = {"L": np.array([5], np.int64), "X": np.array([[[1, 2, 3]]], np.float32)}


def test_identical_nodes_merged_before_tract_merges_them():
    model = _masks()
    merged = onnx.ModelProto()
    merged.CopyFrom(model)
    notes = duplicates_merged(merged, "tract 0.23")
    assert notes and notes[0].startswith("2 node(s) identical to another merged")
    assert [n.op_type for n in merged.graph.node].count("Less") == 1
    assert [o.name for o in merged.graph.output] == ["Z", "Yb", "Ya"]
    for a, b in zip(_ort(merged, FEEDS), _ort(model, FEEDS), strict=True):
        np.testing.assert_array_equal(a, b)
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.node[5:]  # no Less left with a twin, nor any other duplicate that matters: no Less at all
    plain.graph.node.remove(plain.graph.node[4])
    assert duplicates_merged(plain, "tract 0.23") == []  # (no Less in the graph)


def test_tract_fails_on_the_duplicates_and_runs_them_merged():
    model = _masks()
    as_is = run_in("tract", "0.23", model, FEEDS)
    assert not as_is["ok"] and "Dummy" in as_is["error"], as_is
    converted, report = convert_for(model, runtime="tract==0.23")
    assert any("identical to another merged" in n for n in report.target_notes), report.target_notes
    got = run_in("tract", "0.23", converted, FEEDS)
    assert got["ok"], got
    for a, b in zip(got["values"], _ort(model, FEEDS), strict=True):
        np.testing.assert_array_equal(a, b)


def test_convert_for_tract_writes_both_forms_and_other_releases_neither():
    model = _table_index()
    converted, report = convert_for(model, runtime="tract==0.23")
    assert any("integer Mul node(s) by a one-element constant" in n for n in report.target_notes)
    assert "Mul" not in {n.op_type for n in converted.graph.node if n.output[0] == "ar"}
    for runtime in ("openvino==2026.4", "tvm==0.27", "onnxruntime==1.20"):
        other, report = convert_for(model, runtime=runtime)
        assert not any("integer Mul" in n for n in report.target_notes)
        assert any(n.op_type == "Mul" and n.output[0] == "ar" for n in other.graph.node)


def test_the_largest_exact_product_is_rewritten():
    model = _table_index(T.UINT8, row=65793)  # 255 * 65793 = 2^24 - 1; the index itself is the output
    model.graph.node[-1].CopyFrom(helper.make_node("Identity", ["i"], ["y"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", T.INT64, [4]))
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    assert int_products_in_float(rewritten, "tract 0.23")
    feeds = {"a": np.array([255, 254, 0, 1], np.uint8), "b": np.array([255, 0, 255, 3], np.uint8)}
    want = feeds["a"].astype(np.int64) * 65793 + feeds["b"]
    np.testing.assert_array_equal(_ort(rewritten, feeds)[0], want)
    np.testing.assert_array_equal(_ort(model, feeds)[0], want)


@pytest.mark.parametrize("op, want", [("Sub", (-127, 383)), ("Add", (-128, 382)), ("Mul", (-32640, 32385))])
def test_value_ranges_of_two_ranged_inputs(op, want):
    """uint8 x op int8 y: the interval arithmetic against numpy on every pair."""
    nodes = [helper.make_node("Cast", ["x"], ["xi"], to=T.INT32), helper.make_node("Cast", ["y"], ["yi"], to=T.INT32),
             helper.make_node(op, ["xi", "yi"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.UINT8, [None]),
                                           helper.make_tensor_value_info("y", T.INT8, [None])],
                              [helper.make_tensor_value_info("z", T.INT32, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    elems = {n: t.tensor_type.elem_type for n, t in value_types(model).items() if t.HasField("tensor_type")}
    assert value_range("z", next(iter(traversal.iter_scopes(model))), elems) == want
    x, y = np.repeat(np.arange(256), 256).astype(np.uint8), np.tile(np.arange(-128, 128), 256).astype(np.int8)
    out = _ort(model, {"x": x, "y": y})[0]
    assert (int(out.min()), int(out.max())) == want
