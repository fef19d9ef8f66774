"""Ai.onnx.ml conversion: LabelEncoder's index maps and defaults,
and a runtime's lacks asked of the schema the node ends at.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracle: ONNX Runtime (which implements ai.onnx.ml 1..5) running the original and the
converted model on the same feeds, unknown keys included; a conversion may refuse, but what
it writes must compute what the original does.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.errors import ConversionError
from rewriter.targets import Target
from rewriter.targets.spec import TargetSpec

ML = "ai.onnx.ml"
S, I64 = TensorProto.STRING, TensorProto.INT64


def _model(node, in_type, out_type, ml, n=6) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_type, [n])],
                                                [helper.make_tensor_value_info("y", out_type, [n])]),
                              opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid(ML, ml)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


STRINGS = {"x": np.array(["c", "a", "zz", "b", "", "a"], dtype=object)}
INDICES = {"x": np.array([2, 0, 7, 1, -1, 0], dtype=np.int64)}


def _converts_to_the_same_or_refuses(model, feeds, ml_opset) -> onnx.ModelProto | None:
    try:
        result, _ = convert_model(model, None, ml_opset=ml_opset)
    except ConversionError:
        return None
    assert [o.version for o in result.opset_import if o.domain == ML] == [ml_opset]
    np.testing.assert_array_equal(_run(result, feeds)[0], _run(model, feeds)[0])
    return result


@pytest.mark.parametrize("values", [[1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_label_encoder_2_string_to_permuted_indices_does_not_go_wrong_at_1(values):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_strings=["a", "b", "c"],
                            values_int64s=values, default_int64=-5)
    model = _model(node, S, I64, 2)
    _converts_to_the_same_or_refuses(model, STRINGS, 1)
    with pytest.raises(ConversionError, match="not 0, 1, 2"):  # 1 can only say "its index"
        convert_model(model, None, ml_opset=1)


@pytest.mark.parametrize("keys", [[1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_label_encoder_2_permuted_indices_to_strings_does_not_go_wrong_at_1(keys):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_int64s=keys,
                            values_strings=["a", "b", "c"], default_string="none")
    model = _model(node, I64, S, 2)
    _converts_to_the_same_or_refuses(model, INDICES, 1)
    with pytest.raises(ConversionError, match="not 0, 1, 2"):
        convert_model(model, None, ml_opset=1)


def test_label_encoder_2_index_maps_in_order_go_to_1():
    """Control: keys/values 0, 1, 2 in order go to 1 and compute the same."""
    enc = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_strings=["a", "b", "c"],
                           values_int64s=[0, 1, 2], default_int64=-5)
    assert _converts_to_the_same_or_refuses(_model(enc, S, I64, 2), STRINGS, 1) is not None
    dec = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_int64s=[0, 1, 2],
                           values_strings=["a", "b", "c"], default_string="none")
    assert _converts_to_the_same_or_refuses(_model(dec, I64, S, 2), INDICES, 1) is not None


@pytest.mark.parametrize("up", [2, 4])
def test_label_encoder_1_without_a_default_keeps_its_default_going_up(up):
    """LabelEncoder-1's default_int64 is -1 and default_string '_Unused' when not given."""
    enc = _model(helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, classes_strings=["a", "b", "c"]),
                 S, I64, 1)
    want = _run(enc, STRINGS)[0]
    assert want[2] == -1 and want[4] == -1  # the premise, from ORT itself
    assert _converts_to_the_same_or_refuses(enc, STRINGS, up) is not None
    dec = _model(helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, classes_strings=["a", "b", "c"]),
                 I64, S, 1)
    assert _converts_to_the_same_or_refuses(dec, INDICES, up) is not None


def test_label_encoder_2_without_a_default_keeps_its_default_going_down():
    """LabelEncoder-2's default_int64 is -1 too: an unknown string still gives -1 at 1."""
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_strings=["a", "b", "c"],
                            values_int64s=[0, 1, 2])
    model = _model(node, S, I64, 2)
    assert _run(model, STRINGS)[0][2] == -1
    assert _converts_to_the_same_or_refuses(model, STRINGS, 1) is not None


# ------------------------------------------------------------------ a runtime that lacks a schema

def _lacks_label_encoder(version):
    """A TargetSpec of ML opset 2 for a runtime (a profile-like Target) whose loading showed no
    LabelEncoder-``version`` kernel."""
    runtime = Target("a runtime without LabelEncoder-%d" % version, {}, missing={
        "": {}, ML: {"LabelEncoder": frozenset({version})}})
    return TargetSpec(ml_opset=2, runtime=runtime)


def test_a_runtime_lacking_the_schema_the_node_would_reach_blocks_it():
    """LabelEncoder-1 -> ML opset 2 for a runtime that has LabelEncoder-1 but not -2: refused."""
    model = _model(helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                                    classes_strings=["a", "b", "c"]), S, I64, 1)
    with pytest.raises(ConversionError, match="LabelEncoder-2"):
        convert_model(model, _lacks_label_encoder(2))


def test_a_runtime_lacking_only_the_source_schema_does_not_block():
    """The node leaves LabelEncoder-1 behind: a runtime lacking only -1 takes the result."""
    model = _model(helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                                    classes_strings=["a", "b", "c"]), S, I64, 1)
    result, _ = convert_model(model, _lacks_label_encoder(1))
    np.testing.assert_array_equal(_run(result, STRINGS)[0], _run(model, STRINGS)[0])
