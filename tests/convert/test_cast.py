"""Cast (1 <-> 6 'to' name/enum, 19 saturate, 24 round_mode) and CastLike (19, 24)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case, reference)

X = (np.random.default_rng(0).normal(size=[2, 3]) * 100).astype(np.float32)


def _cast(opset, to=TensorProto.INT32, elem=TensorProto.FLOAT, **attrs):
    return model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=to, **attrs)], opset,
                 [("x", elem, [2, 3])], [("y", to if isinstance(to, int) else TensorProto.DataType.Value(to), [2, 3])])


@pytest.mark.parametrize("attrs", [{}, {"saturate": 1}, {"saturate": 0}, {"round_mode": "up"},
                                   {"round_mode": "down"}, {"saturate": 0, "round_mode": "nearest"}])
@pytest.mark.parametrize("target", [23, 18, 13, 7])
def test_new_attributes_dropped_when_no_float8_is_involved(attrs, target):
    m = _cast(LATEST, **attrs)
    result, report = converts(m, target, {"x": X}, runner=reference)
    kept = {"to"} | ({"saturate"} & set(attrs) if target >= 19 else set())
    assert {a.name for a in result.graph.node[0].attribute} == kept
    assert not report.version_converter_called


@pytest.mark.parametrize("target", [18, 13])
def test_float8_is_refused_below_19(target):
    m = _cast(LATEST, to=TensorProto.FLOAT8E4M3FN, saturate=0)
    refused(m, target, "'cast'", "19 -> 13", "tensor(float8e4m3fn)", "Cast-13")


def test_float8e8m0_is_refused_below_24():
    m = _cast(LATEST, to=TensorProto.FLOAT8E8M0, round_mode="down")
    refused(m, 23, "'cast'", "24 -> 23", "tensor(float8e8m0)")


def test_to_as_a_name_below_6_and_back():
    m = _cast(13)
    down, _ = convert_model(m, 5)
    assert down.graph.node[0].attribute[0].s == b"INT32"
    converts(down, 13, {"x": X}, expected=reference(m, {"x": X}))
    up, _ = converts(_cast(1, to="DOUBLE", elem=TensorProto.FLOAT), 9, {"x": X},
                     expected=[X.astype(np.float64)])
    assert up.graph.node[0].attribute[0].i == TensorProto.DOUBLE


def test_string_cast_is_refused_below_9():
    refused(_cast(13, to=TensorProto.STRING), 8, "'cast'", "tensor(string)")


@pytest.mark.parametrize("attrs", [{}, {"saturate": 0}, {"round_mode": "down"}])
@pytest.mark.parametrize("target", [15, 21, 23])
def test_castlike(attrs, target):
    node = helper.make_node("CastLike", ["x", "like"], ["y"], name="castlike", **attrs)
    m = model([node], LATEST, [("x", TensorProto.FLOAT, [2, 3]), ("like", TensorProto.INT64, [1])],
              [("y", TensorProto.INT64, [2, 3])])
    feeds = {"x": X, "like": np.zeros([1], dtype=np.int64)}
    result, _ = converts(m, target, feeds, expected=[X.astype(np.int64)], runner=reference)
    assert {a.name for a in result.graph.node[0].attribute} == ({"saturate"} & set(attrs) if target >= 19 else set())


def test_inside_a_function():
    fn = helper.make_function("local", "F", ["a"], ["b"],
                              [helper.make_node("Cast", ["a"], ["b"], name="fcast", to=TensorProto.INT64,
                                                saturate=1)], [helper.make_opsetid("", 21)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local", name="call")], 21,
              [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.INT64, [2, 3])], functions=[fn])
    result, _ = converts(m, 13, {"x": X})
    assert not result.functions[0].node[0].attribute[1:]


@pytest.mark.parametrize("case", cases("Cast", "CastLike"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
