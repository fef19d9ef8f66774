"""rewriter.targets.half_kernels against the installed onnxruntime, and its release rules."""

from __future__ import annotations

import json
import os

import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper

from rewriter.targets import half_kernels
from rewriter.targets.half_kernels import half_releases, has_half_kernel

ort = pytest.importorskip("onnxruntime")
INSTALLED = ".".join(ort.__version__.split(".")[:2])
ELEM = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
H = "H"  # stands for the half type in CASES

# (op, opset, inputs [(name, type, shape)], attributes): single-node models written here by hand
CASES = [
    ("Add", 14, [("a", H, [2, 3]), ("b", H, [2, 3])], {}),
    ("Mul", 14, [("a", H, [2, 3]), ("b", H, [2, 3])], {}),
    ("MatMul", 13, [("a", H, [2, 3]), ("b", H, [3, 4])], {}),
    ("Relu", 14, [("x", H, [2, 3])], {}),
    ("Relu", 11, [("x", H, [2, 3])], {}),  # schema Relu-6
    ("Sigmoid", 13, [("x", H, [2, 3])], {}),
    ("Conv", 11, [("x", H, [1, 1, 4, 4]), ("w", H, [1, 1, 3, 3])], {}),
    ("Conv", 22, [("x", H, [1, 1, 4, 4]), ("w", H, [1, 1, 3, 3])], {}),
    ("Softmax", 13, [("x", H, [2, 3])], {}),
    ("LayerNormalization", 17, [("x", H, [2, 3]), ("scale", H, [3])], {}),
    ("Transpose", 13, [("x", H, [2, 3])], {}),
    ("Gather", 13, [("x", H, [3, 2]), ("i", TensorProto.INT64, [2])], {}),
    ("Concat", 13, [("a", H, [2, 3]), ("b", H, [2, 3])], {"axis": 0}),
    ("Reshape", 14, [("x", H, [2, 3]), ("s", TensorProto.INT64, [2])], {}),
    ("Where", 16, [("c", TensorProto.BOOL, [2, 3]), ("a", H, [2, 3]), ("b", H, [2, 3])], {}),
    ("Pad", 21, [("x", H, [2, 3]), ("p", TensorProto.INT64, [4])], {}),
    ("Identity", 21, [("x", H, [2, 3])], {}),
    ("Clip", 13, [("x", H, [2, 3]), ("lo", H, []), ("hi", H, [])], {}),  # a function body before its kernel
]


def _model(op, opset, inputs, attrs, elem):
    ins = [helper.make_tensor_value_info(n, elem if t == H else t, shape) for n, t, shape in inputs]
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def runs_in_half(model, tmp_path) -> bool:
    """The oracle: the session loads and its final graph has no Cast (the models have none, so
    any is ONNX Runtime's float32 fallback, which it adds even with optimizations disabled)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    saved = tmp_path / "final.onnx"
    opts.optimized_model_filepath = str(saved)
    try:
        ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal: it does not run in the half type
        return False
    return not any(n.op_type == "Cast" for n in onnx.load(str(saved)).graph.node)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    if INSTALLED not in half_releases():
        pytest.skip(f"onnxruntime {INSTALLED} is not in the data: "
                    "rerun tools/ort_kernel_probe.py --dtypes float16,bfloat16 --current")
    out = {}
    for dtype, elem in ELEM.items():
        for op, opset, inputs, attrs in CASES:
            since = onnx.defs.get_schema(op, opset, "").since_version
            out[(dtype, op, since)] = runs_in_half(_model(op, opset, inputs, attrs, elem),
                                                   tmp_path_factory.mktemp(f"{dtype}-{op}-{opset}"))
    return out


def test_the_data_agrees_with_the_installed_onnxruntime(oracle):
    wrong = {k: ran for k, ran in oracle.items() if has_half_kernel(INSTALLED, "", k[1], k[2], k[0]) is not ran}
    assert not wrong, f"has_half_kernel({INSTALLED!r}, ...) disagrees with loading {wrong} (oracle's answer shown)"


def test_the_oracle_cases_tell_kernels_from_none(oracle):
    # else the agreement above would hold for a lookup that always says the same
    for dtype in ELEM:
        assert {ran for (d, _, _), ran in oracle.items() if d == dtype} == {True, False}, dtype


def test_the_oracle_sees_the_cast_fallback(tmp_path):
    # Add has no float16 CPU kernel on x86_64: the session loads anyway, through Casts
    model = _model("Add", 14, CASES[0][2], {}, TensorProto.FLOAT16)
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if has_half_kernel(INSTALLED, "", "Add", 14, "float16") is False:
        assert not runs_in_half(model, tmp_path)


def _data():
    with open(os.path.join(os.path.dirname(half_kernels.__file__), "data", "onnxruntime_half.json")) as f:
        return json.load(f)["releases"]


def _differences(older: str, newer: str, dtype: str):
    """(op, version) measured in both whose answers differ, for versions ``older`` knows."""
    a, b = _data()[older], _data()[newer]
    out = []
    for op in {**a[dtype][""], **b[dtype][""]}:
        for v in set(a[dtype][""].get(op, [])) ^ set(b[dtype][""].get(op, [])):
            if v <= a["opsets"][""] and has_half_kernel(older, "", op, v, dtype) is not None \
                    and has_half_kernel(newer, "", op, v, dtype) is not None:
                out.append((op, v))
    return out


def test_a_release_between_two_measured_ones_is_the_older():
    diffs = _differences("1.23", "1.32", "float16")
    assert diffs  # else this test could not tell older from newer
    for op, v in diffs:
        assert has_half_kernel("1.25", "", op, v, "float16") == has_half_kernel("1.23", "", op, v, "float16"), (op, v)
        assert has_half_kernel("1.25", "", op, v, "float16") != has_half_kernel("1.32", "", op, v, "float16"), (op, v)
    # LayerNormalization-17 got its float16 kernel in a measured release: the next ones keep it
    first = next(r for r in half_releases() if has_half_kernel(r, "", "LayerNormalization", 17, "float16"))
    assert has_half_kernel(half_releases()[half_releases().index(first) - 1], "", "LayerNormalization", 17,
                           "float16") is False


def test_newer_than_all_is_the_newest_and_older_than_all_is_unknown():
    newest, oldest = half_releases()[-1], half_releases()[0]
    for dtype in ELEM:
        for op, versions in _data()[newest][dtype][""].items():
            for v in versions:
                assert has_half_kernel("9.0", "", op, v, dtype) is True
                assert has_half_kernel(newest + ".7", "", op, v, dtype) is True
        for op, versions in _data()[oldest][dtype][""].items():
            assert has_half_kernel("1.14", "", op, versions[0], dtype) is None
    assert has_half_kernel("not a release", "", "Cast", 13, "float16") is None


def test_what_is_not_measured_is_none_and_what_cannot_be_is_false():
    assert has_half_kernel(INSTALLED, "com.microsoft", "Gelu", 1, "float16") is None  # domain not measured
    assert has_half_kernel(INSTALLED, "", "NoSuchOp", 1, "float16") is None
    assert has_half_kernel(INSTALLED, "ai.onnx", "Cast", 13, "float16") is True  # "ai.onnx" is ""
    assert has_half_kernel(INSTALLED, "", "Mish", 22, "bfloat16") is False  # its schema has no bfloat16
    assert has_half_kernel("1.15", "", "Cast", 21, "float16") is False  # newer than the release's opset
    assert has_half_kernel("1.24", "", "Cast", 24, "float16") is None  # 1.23's data does not know Cast-24
    assert has_half_kernel(INSTALLED, "", "Add", 15, "float16") == has_half_kernel(INSTALLED, "", "Add", 14, "float16")
    with pytest.raises(ValueError):
        has_half_kernel(INSTALLED, "", "Add", 14, "float32")
