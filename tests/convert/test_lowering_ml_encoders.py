"""ArrayFeatureExtractor, OneHotEncoder, LabelEncoder and ZipMap lowered to standard ONNX: the
selections onnxruntime makes, equal in ONNX Runtime and onnx.reference; string lookups by Equal
from opset 19 and by Unique below it; ZipMap removed when unread, refused when a node reads its maps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.errors import RewriterError
from rewriter.convert.lower_ops import lower_ops
from tests.convert.support.lowering_oracle import check_lowering, one_node

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
OPSETS = [13, 19]
WORDS = np.array([["a", "b"], ["zz", "a"], ["q", "b"], ["", "A"]], dtype=object)
INTS = np.array([[1, 5], [3, 3], [-2, 7], [0, 1]], np.int64)


def _index(values):
    return numpy_helper.from_array(np.array(values, np.int64), "I")


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("elem,x", [(T.FLOAT, np.arange(24, dtype=np.float32).reshape(4, 6)),
                                    (T.INT64, np.arange(24, dtype=np.int64).reshape(4, 6)),
                                    (T.STRING, np.array([[str(i) for i in range(6)]] * 2, dtype=object))])
def test_array_feature_extractor(opset, elem, x):
    model = one_node("ArrayFeatureExtractor", [("X", elem, [None, 6]), ("I", T.INT64, [3])],
                     [("Z", elem, [None, 3])], initializers=[_index([3, 0, 3])], opset=opset)
    check_lowering(model, {"X": x})


def test_array_feature_extractor_rank_one_and_index_matrix():
    model = one_node("ArrayFeatureExtractor", [("X", T.FLOAT, [6]), ("I", T.INT64, [2, 2])],
                     [("Z", T.FLOAT, [1, 4])], initializers=[numpy_helper.from_array(np.array([[1, 2], [5, 0]]), "I")])
    check_lowering(model, {"X": np.arange(6, dtype=np.float32)})
    model = one_node("ArrayFeatureExtractor", [("X", T.FLOAT, [None, 3, 6]), ("I", T.INT64, [None])],
                     [("Z", T.FLOAT, [None, 3, 2])])
    check_lowering(model, {"X": np.arange(36, dtype=np.float32).reshape(2, 3, 6), "I": np.array([5, 1])})


@pytest.mark.parametrize("opset", OPSETS)
def test_one_hot_encoder_ints_with_a_repeated_category(opset):
    """The kernel's map keeps a repeated category's last index."""
    model = one_node("OneHotEncoder", [("X", T.INT64, [None, 2])], [("Y", T.FLOAT, [None, 2, 4])],
                     cats_int64s=[3, 1, 7, 3], opset=opset)
    check_lowering(model, {"X": INTS})


@pytest.mark.parametrize("elem,dtype", [(T.FLOAT, np.float32), (T.DOUBLE, np.float64)])
def test_one_hot_encoder_truncates_floats(elem, dtype):
    model = one_node("OneHotEncoder", [("X", elem, [None])], [("Y", T.FLOAT, [None, 4])], cats_int64s=[3, 1, 0, -2])
    check_lowering(model, {"X": np.array([3.9, 1.0, -0.5, -2.7, 7, -1.5], dtype)})


@pytest.mark.parametrize("opset", OPSETS)
def test_one_hot_encoder_strings(opset):
    model = one_node("OneHotEncoder", [("X", T.STRING, [None, 2])], [("Y", T.FLOAT, [None, 2, 3])],
                     cats_strings=["b", "a", "b"], opset=opset)
    lowered = check_lowering(model, {"X": WORDS})
    assert any(n.op_type == ("Equal" if opset >= 19 else "Unique") for n in lowered.graph.node)


def test_one_hot_encoder_with_the_other_kind_of_categories_gives_zeros():
    model = one_node("OneHotEncoder", [("X", T.INT64, [None, 2])], [("Y", T.FLOAT, [None, 2, 2])],
                     cats_strings=["1", "5"])
    check_lowering(model, {"X": INTS})


CASES = [
    (2, dict(keys_strings=["a", "b", "q", "a"], values_int64s=[1, 2, 3, 4]), WORDS, T.STRING, T.INT64),
    (2, dict(keys_strings=["a", "b"], values_floats=[0.5, -0.0], default_float=7.0), WORDS, T.STRING, T.FLOAT),
    (2, dict(keys_int64s=[1, 3, 3], values_strings=["x", "y", "z"]), INTS, T.INT64, T.STRING),
    (2, dict(keys_floats=[1.0, -0.0, float("nan")], values_int64s=[4, 5, 6]),
     np.array([[1, 0], [np.nan, 2]], np.float32), T.FLOAT, T.INT64),
    (4, dict(keys_floats=[1.0, -0.0, float("nan")], values_int64s=[4, 5, 6]),
     np.array([[1, 0], [np.nan, 2]], np.float32), T.FLOAT, T.INT64),
    (2, dict(keys_int64s=[1, 3], values_floats=[0.5, 1.5]), INTS, T.INT64, T.FLOAT),
    (1, dict(classes_strings=["a", "b", "a"]), WORDS, T.STRING, T.INT64),
    (1, dict(classes_strings=["a", "b", "a"], default_string="?"), INTS, T.INT64, T.STRING),
    (4, dict(keys_tensor=numpy_helper.from_array(np.array([1, 3], np.int64)),
             values_tensor=numpy_helper.from_array(np.array([7, 8], np.int64))), INTS, T.INT64, T.INT64),
    (4, dict(keys_strings=["a"], values_strings=["A"], default_string="-"), WORDS, T.STRING, T.STRING),
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("ml,attrs,x,elem_in,elem_out", CASES,
                         ids=[f"ml{c[0]}-{'-'.join(c[1])}" for c in CASES])
def test_label_encoder(opset, ml, attrs, x, elem_in, elem_out):
    model = one_node("LabelEncoder", [("X", elem_in, [None, 2])], [("Y", elem_out, [None, 2])], ml_opset=ml,
                     opset=opset, **attrs)
    check_lowering(model, {"X": x})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=6), st.lists(st.integers(-4, 4), min_size=8, max_size=8))
def test_label_encoder_any_int_keys(keys, x):
    """Repeated keys: the first wins (the kernel's map keeps the first it is given)."""
    model = one_node("LabelEncoder", [("X", T.INT64, [None])], [("Y", T.FLOAT, [None])], ml_opset=2,
                     keys_int64s=keys, values_floats=[float(i) for i in range(len(keys))], default_float=-1.0)
    check_lowering(model, {"X": np.array(x, np.int64)})


def _with_zipmap(read: bool):
    """A ZipMap whose maps a node reads, or nothing (a maps output is tests/convert/test_lowering_ml_zipmap.py's)."""
    model = one_node("ZipMap", [("P", T.FLOAT, [None, 2])], [("M", "seq_map_int64", None)], classlabels_int64s=[0, 1])
    del model.graph.output[:]
    model.graph.output.extend([model.graph.input[0]])
    if read:
        model.graph.node.append(helper.make_node("Consume", ["M"], ["Y"], domain="example.custom"))
        model.graph.output.extend([helper.make_tensor_value_info("Y", T.FLOAT, None)])
    return model


def test_zipmap_nothing_reads_is_removed():
    lowered, report = lower_ops(_with_zipmap(read=False))
    assert not lowered.graph.node and report.removed[("ai.onnx.ml", "ZipMap")] == 1
    assert all(o.domain != "ai.onnx.ml" for o in lowered.opset_import)


def test_zipmap_whose_maps_a_node_reads_blocks():
    with pytest.raises(RewriterError, match="sequence of maps"):
        lower_ops(_with_zipmap(read=True))


def test_strings_compared_without_equal_when_the_result_goes_below_19():
    model = one_node("LabelEncoder", [("X", T.STRING, [None, 2])], [("Y", T.INT64, [None, 2])], ml_opset=2, opset=21,
                     keys_strings=["a", "b"], values_int64s=[1, 2])
    lowered = check_lowering(model, {"X": WORDS}, opset=13)
    assert any(n.op_type == "Unique" for n in lowered.graph.node)
    assert next(o.version for o in lowered.opset_import if o.domain == "") == 13
