"""ScatterElements/ScatterND reduction (16, 18), GatherND batch_dims (12)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import (TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case)

DATA = np.arange(12, dtype=np.float32).reshape(3, 4)


def _scatter(op, opset, **attrs):
    if op == "ScatterElements":
        idx, upd = [[1, 0, 2, 0]], [3, 4]
        idx_shape = [1, 4]
    else:
        idx, upd = [[1], [0]], [2, 4]
        idx_shape = [2, 1]
    inits = [helper.make_tensor("i", TensorProto.INT64, idx_shape, np.array(idx).flatten().tolist()),
             helper.make_tensor("u", TensorProto.FLOAT, [*idx_shape[:-1], 4] if op == "ScatterND" else idx_shape,
                                np.arange(int(np.prod(upd)) if op == "ScatterND" else 4, dtype=np.float32).tolist())]
    node = helper.make_node(op, ["x", "i", "u"], ["y"], name="scatter", **attrs)
    return model([node], opset, [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [3, 4])],
                 initializers=inits)


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
@pytest.mark.parametrize("attrs", [{}, {"reduction": "none"}])
@pytest.mark.parametrize("target", [11, 13, 16])
def test_default_reduction_goes_down(op, attrs, target):
    result, report = converts(_scatter(op, 18, **attrs), target, {"x": DATA})
    assert not report.version_converter_called
    assert not result.graph.node[0].attribute or target >= 16


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
def test_reductions_are_refused_where_they_do_not_exist(op):
    refused(_scatter(op, 18, reduction="max"), 17, "'scatter'", "18 -> 16", "reduction='max'", "opset 18")
    refused(_scatter(op, 18, reduction="add"), 13, "'scatter'", "16 -> 13", "reduction='add'", "opset 16")
    result, _ = converts(_scatter(op, 18, reduction="add"), 16, {"x": DATA})
    assert result.graph.node[0].attribute[0].s == b"add"


def test_gathernd_batch_dims():
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gather", batch_dims=0)
    inits = [helper.make_tensor("i", TensorProto.INT64, [2, 1], [2, 0])]
    m = model([node], 13, [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [2, 4])], initializers=inits)
    result, _ = converts(m, 11, {"x": DATA})
    assert not result.graph.node[0].attribute
    node1 = helper.make_node("GatherND", ["x", "i"], ["y"], name="gather", batch_dims=1)
    inits1 = [helper.make_tensor("i", TensorProto.INT64, [3, 1], [2, 0, 1])]
    m1 = model([node1], 13, [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [3])], initializers=inits1)
    refused(m1, 11, "'gather'", "12 -> 11", "batch_dims=1")


@pytest.mark.parametrize("case", cases("ScatterElements", "ScatterND", "GatherND"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
