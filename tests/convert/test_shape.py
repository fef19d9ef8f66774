"""Shape across opset 15 (start/end): dropped when they select the whole shape, else Shape + Slice."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import LATEST, TensorProto, cases, converts, helper, model, np, run_backend_case

X = np.zeros([2, 3, 4, 5], dtype=np.float32)


def _shape(opset, shape=(2, 3, 4, 5), **attrs):
    return model([helper.make_node("Shape", ["x"], ["y"], name="shape", **attrs)], opset,
                 [("x", TensorProto.FLOAT, list(shape))], [("y", TensorProto.INT64, None)])


@pytest.mark.parametrize("target", [13, 11, 7])
@pytest.mark.parametrize("attrs", [{}, {"start": 0}, {"start": 1}, {"end": -1}, {"start": -3, "end": 3},
                                   {"start": -10, "end": 10}, {"start": 2, "end": 1}, {"end": 4}])
def test_start_end_down(target, attrs):
    result, report = converts(_shape(LATEST, **attrs), target, {"x": X})
    ops = [n.op_type for n in result.graph.node]
    whole = all(v in (0, 4, 10, -10) for v in attrs.values())
    assert ops == ["Shape"] if whole else ops == ["Shape", "Slice"], ops
    assert not any(a.name in ("start", "end") for n in result.graph.node for a in n.attribute)
    assert result.graph.node[-1].name == "shape" and not report.version_converter_called


def test_start_with_unknown_rank_still_exact():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Shape", ["r"], ["y"], name="shape", start=1, end=-1)]
    m = model(nodes, 15, [("x", TensorProto.FLOAT, [2, 3, 4, 5]), ("s", TensorProto.INT64, ["n"])],
              [("y", TensorProto.INT64, ["k"])])
    for s in ([6, 4, 5], [120], [2, 3, 2, 2, 5]):
        converts(m, 13, {"x": X, "s": np.array(s, dtype=np.int64)})


@pytest.mark.parametrize("source,target", [(13, 15), (7, LATEST), (15, 13)])
def test_without_start_end_nothing_changes(source, target):
    result, _ = converts(_shape(source), target, {"x": X})
    assert [n.op_type for n in result.graph.node] == ["Shape"]


def test_inside_a_function():
    fn = helper.make_function("local", "F", ["a"], ["b"],
                              [helper.make_node("Shape", ["a"], ["b"], name="fshape", start=1)],
                              [helper.make_opsetid("", 18)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local", name="call")], 18,
              [("x", TensorProto.FLOAT, [2, 3, 4, 5])], [("y", TensorProto.INT64, [3])], functions=[fn])
    result, _ = converts(m, 13, {"x": X})
    assert [n.op_type for n in result.functions[0].node] == ["Constant"] * 3 + ["Shape", "Slice"]


@pytest.mark.parametrize("case", cases("Shape"), ids=lambda c: c.name)
def test_backend_cases(case):
    assert run_backend_case(case) >= 2
