"""String class labels for the releases that run no string op of the node tests but return a
constant string table gathered by an index (``form_verdicts`` Gather ``string_labels``; OpenVINO
2026.4 and 2024.6): rewriter/targets/string_labels.py takes such chains out of the string
blockers, and nothing else. The rules run without the runtime; with the OpenVINO venvs (skipped
when absent) a lowered classifier with string labels runs there as ONNX Runtime computes it."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.convert.planner import ConversionBlocked
from rewriter.targets import parse_target
from rewriter.targets.string_labels import gathered_labels
from tests.targets.runtime_runs import run_in, tool

RIGHT = {"": {"Gather": {"1": {"string_labels": "ok"}, "11": {"string_labels": "ok"}, "13": {"string_labels": "ok"}}}}
TABLE = numpy_helper.from_array(np.array(["a", "b", ""], dtype=object), "table")
X = np.array([[0.3, -1.0], [2.0, 0.5], [-0.7, 0.1], [0.0, 0.0], [5.0, -3.0]], np.float32)


def _graph(nodes, outputs, inputs=(("i", T.INT64),), inits=(TABLE,)) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi(n, t, [2]) for n, t in inputs], [vi(n, T.STRING, [2]) for n in outputs],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _chain(*extra):
    return [helper.make_node("Gather", ["table", "i"], ["y"]), helper.make_node("Identity", ["y"], ["z"]),
            helper.make_node("Identity", ["z"], ["out"]), *extra]


def test_a_chain_to_one_output_is_taken_with_its_table():
    assert gathered_labels(_graph(_chain(), ["out"]), RIGHT) == {"table", "y", "z", "out"}


def test_a_gather_writing_the_output_is_taken():
    model = _graph([helper.make_node("Gather", ["table", "i"], ["out"])], ["out"])
    assert gathered_labels(model, RIGHT) == {"table", "out"}


@pytest.mark.parametrize("case", ["forked output", "read by Concat", "string input", "not measured", "refused",
                                  "output twice", "not a graph output", "table fed", "table read by another Gather"])
def test_anything_else_takes_nothing(case):
    vi = helper.make_tensor_value_info
    table, inferred = RIGHT, None
    if case == "forked output":  # an output an Identity also reads (OpenVINO 2026.4.1 aborts at exit)
        model = _graph(_chain(helper.make_node("Identity", ["out"], ["again"])), ["out", "again"])
    elif case == "read by Concat":
        model = _graph(_chain(helper.make_node("Concat", ["z", "z"], ["cat"], axis=0)), ["out"])
    elif case == "string input":
        model = _graph(_chain(helper.make_node("Identity", ["s"], ["s2"])), ["out", "s2"],
                       inputs=(("i", T.INT64), ("s", T.STRING)))
    elif case == "not measured":
        model, table = _graph(_chain(), ["out"]), {"": {"Gather": {"1": {"string_labels": "ok"}}}}
    elif case == "refused":
        model, table = _graph(_chain(), ["out"]), {"": {"Gather": {"13": {"string_labels": "refused: load"}}}}
    elif case == "table fed":  # (a graph input with the table as its default)
        model = _graph(_chain(), ["out"])
        model.graph.input.append(vi("table", T.STRING, [3]))
    elif case == "table read by another Gather":  # (its output's type unknown: the table is what shows)
        model = _graph(_chain(helper.make_node("Gather", ["table", "i"], ["w"]), helper.make_node("Size", ["w"], ["n"])),
                       ["out"])
        model.graph.output.append(vi("n", T.INT64, []))
        inferred = model  # (an inference that types nothing beyond the declarations)
    elif case == "output twice":
        model = _graph(_chain(), ["out"])
        model.graph.output.append(vi("out", T.STRING, [2]))
    else:
        model = _graph(_chain(helper.make_node("Size", ["out"], ["n"])), [])
        model.graph.output.append(vi("n", T.INT64, []))
    assert gathered_labels(model, table, inferred) == frozenset()


def test_a_table_also_read_otherwise_is_not_taken_but_its_chain_is():
    model = _graph(_chain(helper.make_node("Identity", ["table"], ["t2"])), ["out", "t2"])
    model.graph.output[1].type.tensor_type.shape.dim[0].dim_value = 3
    assert gathered_labels(model, RIGHT) == frozenset()  # ("t2" is a string tensor outside the chains)


def test_the_probe_measures_the_form_taken():
    """Each case of the probe's form is a model whose every string tensor the rule takes, and ONNX
    Runtime computes the case's expected outputs."""
    cases = tool("runtime_probe_forms").string_labels_cases(lambda **kw: kw, None)
    assert [c["version"] for c in cases] == [1, 11, 13]
    for case in cases:
        model = case["model"]
        strings = {o.name for o in model.graph.output} | {t.name for t in model.graph.initializer}
        assert strings <= gathered_labels(model, RIGHT), case["id"]
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, case["feeds"])
        assert [list(g.reshape(-1)) for g in got] == [list(e.reshape(-1)) for e in case["expected"]]


def _classifier(k: int) -> onnx.ModelProto:
    labels = ["setosa", "versicolor", "virginica"][:k]
    coef = (np.arange(k * 2, dtype=np.float32).reshape(k, 2) / 7 - 0.5).reshape(-1).tolist()
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain="ai.onnx.ml", name="clf",
                            coefficients=coef, intercepts=[0.1 * i for i in range(k)], classlabels_strings=labels)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("X", T.FLOAT, [None, 2])],
                              [vi("Y", T.STRING, [None]), vi("Z", T.FLOAT, [None, k])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8)


def _ort(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": X})


@pytest.mark.parametrize("release", ["openvino==2026.4", "openvino==2024.6"])
@pytest.mark.parametrize("k", [2, 3])
def test_openvino_gets_a_classifier_with_string_labels(release, k):
    model = _classifier(k)
    result, report = convert_for(model, runtime=release)
    assert not report.blockers
    onnx.checker.check_model(result, full_check=True)
    assert all(n.domain == "" for n in result.graph.node)
    got, want = _ort(result), _ort(model)
    assert list(got[0]) == list(want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("release", ["tvm==0.27", "tract==0.23"])
def test_releases_without_the_form_still_name_the_classifier(release):
    with pytest.raises(ConversionBlocked, match="node 'clf' .*'Y' is a string tensor"):
        convert_for(_classifier(3), runtime=release)


def test_a_string_input_still_blocks_for_openvino():
    vi = helper.make_tensor_value_info
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", name="enc", keys_strings=["a", "b"],
                            values_int64s=[1, 2])
    graph = helper.make_graph([node], "g", [vi("X", T.STRING, [None])], [vi("Y", T.INT64, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("ai.onnx.ml", 2)],
                              ir_version=9)
    with pytest.raises(ConversionBlocked, match="node 'enc' .*'X' is a string tensor"):
        convert_for(model, runtime="openvino==2026.4")


def test_the_data_says_which_releases_run_the_form():
    for release, right in [("openvino==2026.4", True), ("openvino==2024.6", True), ("tvm==0.27", False),
                           ("tract==0.23", False)]:
        verdicts = parse_target(release).form_verdicts[""]["Gather"]
        assert all((v["string_labels"] == "ok") is right for v in verdicts.values()), release


@pytest.mark.parametrize("release", ["2026.4", "2024.6"])
def test_openvino_runs_the_converted_classifier(release):
    model = _classifier(3)
    ran = run_in("openvino", release, convert_for(model, runtime=f"openvino=={release}")[0], {"X": X})
    assert ran["ok"], ran
    want = _ort(model)
    assert [str(v) for v in ran["values"][0]] == list(want[0])
    assert np.allclose(ran["values"][1], want[1], rtol=1e-6, atol=1e-6)
