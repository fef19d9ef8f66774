"""Tile across opset 6 (tiles/axis scalar inputs <-> repeats)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import (TensorProto, cases, converts, convert_model, helper, model, np, refused,
                                        run_backend_case)

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("repeats", [[1, 1], [3, 1], [1, 2], [2, 3]])
def test_repeats_down_to_1_and_back(repeats):
    m = model([helper.make_node("Tile", ["x", "r"], ["y"], name="t")], 13, [("x", F, [2, 3])], [("y", F, None)],
              initializers=[helper.make_tensor("r", I64, [2], repeats)])
    down, _ = convert_model(m, 5)
    tiles = [n for n in down.graph.node if n.op_type == "Tile"]
    assert len(tiles) == max(1, sum(r != 1 for r in repeats)) and all(len(n.input) == 3 for n in tiles)
    assert next(n for n in down.graph.node if "y" in n.output).name == "t"
    back, _ = converts(down, 13, {"x": X}, expected=[np.tile(X, repeats)])


def test_refusals():
    m = model([helper.make_node("Tile", ["x", "r"], ["y"], name="t")], 13, [("x", F, [2, 3]), ("r", I64, [2])],
              [("y", F, None)])
    refused(m, 5, "'t'", "Tile 6 -> 1", "repeats input 'r' is not a constant")
    ints = model([helper.make_node("Tile", ["x", "r"], ["y"], name="t")], 13, [("x", TensorProto.INT32, [2, 3])],
                 [("y", TensorProto.INT32, None)], initializers=[helper.make_tensor("r", I64, [2], [1, 2])])
    refused(ints, 5, "'t'", "int32")


@pytest.mark.parametrize("case", cases("Tile"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case, (7, 11, 13))
