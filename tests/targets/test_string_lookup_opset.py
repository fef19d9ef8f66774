"""A string LabelEncoder / OneHotEncoder lowered for a target: below opset 19 the lookup is a
Unique (Equal takes strings from 19), which LiteRT 2.6 lacks while it runs Equal on strings, so
``convert --target litert==2.6`` lowers such a model at opset 19
(rewriter/convert/lowering/ml_encoders.py ``string_equal_opset``). The rules run without the
runtime; with the LiteRT venv (skipped when absent) the converted model runs there as ONNX Runtime
computes the original."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper

from rewriter.convert.for_target import convert_for
from rewriter.convert.lowering.ml_encoders import looks_strings_up
from tests.targets.runtime_runs import run_in

WORDS = np.array([["a", "b"], ["zz", "a"], ["q", "b"], ["", "A"]], dtype=object)


def _encoder(op="LabelEncoder", opset=15, ml=2, **attrs) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    out = T.FLOAT if op == "OneHotEncoder" else T.INT64
    if not attrs:
        attrs = {"cats_strings": ["b", "a", "q"]} if op == "OneHotEncoder" else \
            {"keys_strings": ["a", "b", "q"], "values_int64s": [7, 8, 9], "default_int64": -1}
    node = helper.make_node(op, ["X"], ["Y"], domain="ai.onnx.ml", name="enc", **attrs)
    y_shape = [None, 2, len(attrs["cats_strings"])] if op == "OneHotEncoder" else [None, 2]
    graph = helper.make_graph([node], "g", [vi("X", T.STRING, [None, 2])], [vi("Y", out, y_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml)],
                             ir_version=8)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _default_opset(model) -> int:
    return next(o.version for o in model.opset_import if o.domain == "")


@pytest.mark.parametrize("op", ["LabelEncoder", "OneHotEncoder"])
@pytest.mark.parametrize("opset", [13, 15, 18])
def test_litert_gets_the_lookup_at_opset_19(op, opset):
    model = _encoder(op, opset)
    result, report = convert_for(model, runtime="litert==2.6")
    ops = {n.op_type for n in result.graph.node}
    assert "Unique" not in ops and "Equal" in ops
    assert _default_opset(result) == 19
    assert not report.blockers
    onnx.checker.check_model(result, full_check=True)
    assert np.array_equal(_ort(result, {"X": WORDS}), _ort(model, {"X": WORDS}))


def test_a_model_at_19_has_equal_without_raising():
    result, _ = convert_for(_encoder(opset=19), runtime="litert==2.6")
    assert _default_opset(result) == 19
    assert "Unique" not in {n.op_type for n in result.graph.node}


def _profile(tmp_path, top: int, unsupported: list) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "npu", "opsets": {"": top}, "unsupported": {"ai.onnx.ml": ["LabelEncoder"],
                                                                                  "": unsupported}}))
    return str(path)


@pytest.mark.parametrize("opset,top,unsupported,raised", [(15, 21, ["Unique"], True), (15, 21, [], False),
                                                           (15, 18, ["Unique"], False), (15, 21, ["Unique", "Equal"], False),
                                                           (21, 21, ["Unique"], False)])
def test_a_profile_is_raised_only_when_it_lacks_unique_and_has_equal_at_19(tmp_path, opset, top, unsupported, raised):
    """Raised: opset 19 for the lookup; else the model's own opset (15: with a Unique, a blocker
    when the profile lacks it; 21: Equal, kept at 21)."""
    model = _encoder(opset=opset)
    result, report = convert_for(model, runtime=_profile(tmp_path, top, unsupported), plan_only=True)
    assert _default_opset(result) == (19 if raised else opset)
    assert ("Unique" in {n.op_type for n in result.graph.node}) is (opset < 19 and not raised)


def test_onnx_runtime_targets_keep_the_model_opset():
    """ONNX Runtime implements LabelEncoder itself: nothing is lowered, the opset is kept."""
    result, _ = convert_for(_encoder(opset=15), runtime="onnxruntime==1.20")
    assert _default_opset(result) == 15
    assert [n.op_type for n in result.graph.node] == ["LabelEncoder"]


def test_integer_keys_are_not_string_lookups():
    ints = _encoder(keys_int64s=[1, 2], values_int64s=[3, 4])
    assert not looks_strings_up(ints)
    assert looks_strings_up(_encoder())
    assert looks_strings_up(_encoder("OneHotEncoder"))
    tensor_keys = _encoder(keys_tensor=onnx.numpy_helper.from_array(np.array(["a"], object)),
                           values_tensor=onnx.numpy_helper.from_array(np.array([3], np.int64)), ml=4)
    assert looks_strings_up(tensor_keys)
    int_tensor = _encoder(keys_tensor=onnx.numpy_helper.from_array(np.array([1], np.int64)),
                          values_tensor=onnx.numpy_helper.from_array(np.array([3], np.int64)), ml=4)
    assert not looks_strings_up(int_tensor)
    mapper = _encoder("CategoryMapper", cats_strings=["a", "b"], cats_int64s=[1, 2])
    assert not looks_strings_up(mapper)  # (string attributes of another ml op)


def test_an_integer_lookup_is_not_raised_for_litert():
    model = _encoder(keys_int64s=[1, 2], values_int64s=[3, 4])
    model.graph.input[0].type.tensor_type.elem_type = T.INT64
    result, _ = convert_for(model, runtime="litert==2.6")
    assert _default_opset(result) == 15


@pytest.mark.parametrize("op", ["LabelEncoder", "OneHotEncoder"])
def test_litert_runs_the_lookup_converted(op):
    model = _encoder(op, 15)
    converted = run_in("litert", "2.6", convert_for(model, runtime="litert==2.6")[0], {"X": WORDS})
    assert converted["ok"], converted
    want = _ort(model, {"X": WORDS})
    assert np.array_equal(converted["values"][0].astype(want.dtype), want)
