"""Runtime targets: the opset chosen between a runtime's oldest and
newest, and which schema versions a kernel range covers.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracles: the rules as the profile format and ONNX Runtime's kernel tables state them (a range
``[a, b]`` covers schemas a..b; ``[a, None]``, "a+", covers schema a and no newer one, as
ONNX Runtime 1.15 refusing Cast-19 showed), ``onnx.defs`` for an op's schema versions, and
ONNX Runtime running a model converted for a profile.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter import convert_opset
from rewriter.targets import Target, blockers, parse_target

F = TensorProto.FLOAT


def _target(**kw) -> Target:
    kw.setdefault("name", "test runtime")
    kw.setdefault("opsets", {"": 17})
    return Target(**kw)


def _schemas(op: str) -> list[int]:
    return sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                   if s.name == op and s.domain == ""})


@pytest.mark.parametrize("current,want", [(7, 11), (9, 11), (11, 11), (13, 13), (17, 17), (18, 17), (21, 17)])
def test_opset_for_stays_between_the_oldest_and_newest_opsets(current, want):
    t = _target(opsets={"": 17}, min_opsets={"": 11})
    assert t.opset_for("", current) == want
    assert t.opset_for("ai.onnx", current) == want


def test_opset_for_without_limits_keeps_the_opset():
    t = _target(opsets={})
    assert t.opset_for("", 9) == 9 and t.opset_for("ai.onnx.ml", 3) == 3


def test_a_profile_with_an_oldest_opset_raises_an_old_model_to_it(tmp_path):
    profile = tmp_path / "npu.json"
    profile.write_text(json.dumps({"name": "npu", "opsets": {"": 17}, "min_opsets": {"": 11}}))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=4)
    t = parse_target(str(profile))
    assert any("it takes 11 and newer" in b for b in blockers(model, t))
    result = convert_opset(model, target=str(profile))
    assert next(o.version for o in result.opset_import if o.domain == "") == 11
    assert not blockers(result, t)
    onnx.checker.check_model(result, full_check=True)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    def run(m):
        return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})

    np.testing.assert_array_equal(run(result)[0], run(model)[0])


def test_a_plus_range_covers_its_own_schema_only():
    cast = _schemas("Cast")  # 1, 6, 9, 13, 19, 21, ...
    assert 13 in cast and 19 in cast
    t = _target(ops={"": {"Cast": [(13, None)]}})
    assert not t.lacks("", "Cast", 13)
    for v in cast:
        assert t.lacks("", "Cast", v) == (v != 13), v


def test_a_closed_range_covers_its_first_and_last_schema():
    cast = _schemas("Cast")
    t = _target(ops={"": {"Cast": [(6, 12), (13, None)]}})
    for v in cast:
        assert t.lacks("", "Cast", v) == (v not in (6, 9, 13)), v


def test_an_op_missing_from_the_kernel_table_is_lacking():
    t = _target(ops={"": {"Relu": [(14, None)]}})
    assert t.lacks("", "Gelu", 20)
    assert not t.lacks("", "Relu", 14)
    assert not t.lacks("ai.onnx.ml", "LabelEncoder", 2)  # a domain without a table: not limited
