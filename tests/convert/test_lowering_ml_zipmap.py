"""ZipMap lowered where its maps are a main-graph output: the output keeps its name and becomes the
probabilities' tensor, one column per class label in the node's order; the labels are kept in the
output's doc_string and in metadata_props; the conversion warns. The oracle: ONNX Runtime's ZipMap
on the original (a list of dicts, whose keys ONNX Runtime sorts), stacked in the order of the node's
class-label attribute. Maps another node reads, or a subgraph's output, are refused by name."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper

from rewriter.cli.main import main
from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.lowering_oracle import ML, one_node, only_standard, ort_run, value

FEATURES = 4


def classifier(labels: list, opset: int = 13) -> onnx.ModelProto:
    """What skl2onnx writes for a LogisticRegression (LinearClassifier, Normalizer L1, Cast of the
    label, ZipMap), with ``labels`` in the order given (skl2onnx's are sorted; these need not be)."""
    rng = np.random.default_rng(len(labels))
    strings = isinstance(labels[0], str)
    classes = {"classlabels_strings": labels} if strings else {"classlabels_ints": labels}
    coefficients = rng.normal(size=(len(labels), FEATURES)).astype(np.float32)
    nodes = [
        helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain=ML, name="linear",
                         coefficients=coefficients.reshape(-1).tolist(),
                         intercepts=rng.normal(size=len(labels)).tolist(), multi_class=1,
                         post_transform="LOGISTIC" if len(labels) == 2 else "SOFTMAX", **classes),
        helper.make_node("Normalizer", ["scores"], ["probabilities"], domain=ML, name="normalize", norm="L1"),
        helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML, name="zipmap",
                         **({"classlabels_strings": labels} if strings else {"classlabels_int64s": labels})),
    ]
    label_type = T.STRING if strings else T.INT64
    if not strings:
        nodes.insert(1, helper.make_node("Cast", ["label"], ["output_label"], to=T.INT64, name="cast"))
    else:
        nodes.insert(1, helper.make_node("Identity", ["label"], ["output_label"], name="label_out"))
    graph = helper.make_graph(nodes, "classifier", [value("X", T.FLOAT, [None, FEATURES])],
                              [value("output_label", label_type, [None]),
                               value("output_probability", "seq_map_string" if strings else "seq_map_int64", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(ML, 1)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def stacked(maps: list, labels: list) -> np.ndarray:
    return np.asarray([[m[k] for k in labels] for m in maps], np.float32)


def _rows(n: int = 7) -> np.ndarray:
    return np.random.default_rng(3).normal(size=(n, FEATURES)).astype(np.float32) * 2


CASES = [[0, 1], [3, 1, 2], ["a", "b"], ["b", "a", "c"], [7, -2, 0, 5]]


@pytest.mark.parametrize("labels", CASES, ids=str)
def test_maps_become_their_tensor_in_label_order(labels):
    model = classifier(labels)
    feeds = {"X": _rows()}
    label, maps = ort_run(model, feeds)
    lowered, report = lower_ops(model)
    onnx.checker.check_model(lowered, full_check=True)
    assert only_standard(lowered) and not any(n.op_type == "ZipMap" for n in lowered.graph.node)
    got_label, got = ort_run(lowered, feeds)
    assert np.asarray(label).tolist() == np.asarray(got_label).tolist()
    assert got.dtype == np.float32 and got.shape == (len(maps), len(labels))
    assert np.array_equal(got.view(np.uint32), stacked(maps, labels).view(np.uint32))
    out = lowered.graph.output[1]
    assert out.name == "output_probability" and out.type.tensor_type.elem_type == T.FLOAT
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [0, len(labels)]
    meta = {p.key: p.value for p in lowered.metadata_props}
    assert json.loads(meta["rewriter.zipmap.output_probability"]) == labels
    assert json.dumps(labels) in out.doc_string
    assert report.retyped == [report.retyped[0]] and report.retyped[0].startswith(
        f"output_probability: sequence of maps -> tensor float [N, {len(labels)}]")


def test_unsorted_labels_are_not_the_sorted_keys():
    """The oracle's own check: ONNX Runtime's dicts list their keys sorted, so an order taken from
    them (or sorted labels) would give other columns than the node's."""
    labels = ["b", "a", "c"]
    model = classifier(labels)
    _, maps = ort_run(model, {"X": _rows()})
    assert list(maps[0]) == sorted(labels)
    lowered, _ = lower_ops(model)
    got = ort_run(lowered, {"X": _rows()})[1]
    assert not np.array_equal(got, stacked(maps, sorted(labels)))


def test_a_rank_one_input_is_one_row():
    model = one_node("ZipMap", [("P", T.FLOAT, [3])], [("M", "seq_map_int64", None)], classlabels_int64s=[5, 1, 9])
    p = np.array([0.25, 0.5, 0.125], np.float32)
    maps = ort_run(model, {"P": p})[0]
    lowered, _ = lower_ops(model)
    onnx.checker.check_model(lowered, full_check=True)
    got = ort_run(lowered, {"P": p})[0]
    assert got.shape == (1, 3) and np.array_equal(got, stacked(maps, [5, 1, 9]))


def test_the_declared_batch_dim_is_kept():
    model = one_node("ZipMap", [("P", T.FLOAT, ["batch", 2])], [("M", "seq_map_string", None)],
                     classlabels_strings=["no", "yes"])
    lowered, report = lower_ops(model)
    dims = lowered.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["batch", ""] and dims[1].dim_value == 2
    assert "[batch, 2]" in report.retyped[0]


def test_a_stale_value_info_of_the_output_goes():
    model = classifier([0, 1])
    model.graph.value_info.append(model.graph.output[1])
    lowered, _ = lower_ops(model)
    assert "output_probability" not in {v.name for v in lowered.graph.value_info}
    onnx.checker.check_model(lowered, full_check=True)


def _read_by(reader: onnx.NodeProto, outputs) -> onnx.ModelProto:
    model = one_node("ZipMap", [("P", T.FLOAT, [None, 2])], [("M", "seq_map_int64", None)], name="zm",
                     classlabels_int64s=[0, 1])
    model.graph.node.append(reader)
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model


def test_maps_another_node_reads_block_naming_the_node():
    reader = helper.make_node("Consume", ["M"], ["Y"], domain="example.custom")
    with pytest.raises(RewriterError, match=r"'zm'.*another node reads them"):
        lower_ops(_read_by(reader, [value("Y", T.FLOAT, None)]))


def test_maps_a_graph_output_and_read_by_a_node_block():
    reader = helper.make_node("Consume", ["M"], ["Y"], domain="example.custom")
    with pytest.raises(RewriterError, match="another node reads them"):
        lower_ops(_read_by(reader, [value("Y", T.FLOAT, None), value("M", "seq_map_int64", None)]))


def test_a_subgraph_output_blocks():
    inner = helper.make_node("ZipMap", ["P"], ["M"], domain=ML, name="inner_zm", classlabels_int64s=[0, 1])
    branch = helper.make_graph([inner], "branch", [], [value("M", "seq_map_int64", None)])
    node = helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=branch, name="if")
    graph = helper.make_graph([node], "g", [value("c", T.BOOL, []), value("P", T.FLOAT, [None, 2])],
                              [value("out", "seq_map_int64", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(ML, 1)])
    with pytest.raises(RewriterError, match=r"'inner_zm'.*subgraph"):
        lower_ops(model)


def test_a_column_count_other_than_the_labels_blocks():
    model = one_node("ZipMap", [("P", T.FLOAT, [None, 3])], [("M", "seq_map_int64", None)], classlabels_int64s=[0, 1])
    with pytest.raises(RewriterError, match="3 columns for 2 class labels"):
        lower_ops(model)


def test_the_cli_warns_that_the_output_type_changed(tmp_path, capsys):
    path, out = tmp_path / "clf.onnx", tmp_path / "out.onnx"
    onnx.save(classifier(["b", "a", "c"]), str(path))
    assert main(["convert", str(path), "--lower-ops", "ai.onnx.ml", "-o", str(out), "--verify",
                 "--input-shape", f"X:5,{FEATURES}"]) == 0
    err = capsys.readouterr().err
    assert "warning: output_probability: sequence of maps -> tensor float [5, 3]" in err
    assert '["b", "a", "c"]' in err and "rewriter.zipmap.output_probability" in err


def test_convert_for_a_runtime_without_zipmap_warns_in_json(tmp_path, capsys):
    path, out = tmp_path / "clf.onnx", tmp_path / "out.onnx"
    onnx.save(classifier([3, 1, 2]), str(path))
    assert main(["convert", str(path), "--target", "openvino==2026.4", "-o", str(out), "--json", "--verify",
                 "--input-shape", f"X:5,{FEATURES}"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert any(w.startswith("output_probability: sequence of maps -> tensor float [5, 3]") for w in printed["warnings"])
    lowered = onnx.load(str(out))
    assert {p.key: json.loads(p.value) for p in lowered.metadata_props}["rewriter.zipmap.output_probability"] == [3, 1, 2]
    feeds = {"X": _rows(5)}
    assert np.array_equal(ort_run(lowered, feeds)[1], stacked(ort_run(classifier([3, 1, 2]), feeds)[1], [3, 1, 2]))


def test_convert_dtype_for_a_runtime_without_zipmap_warns_too(tmp_path, capsys):
    path, out = tmp_path / "clf.onnx", tmp_path / "out.onnx"
    onnx.save(classifier([0, 1]), str(path))
    assert main(["convert", str(path), "--dtype", "float16", "--target", "openvino==2026.4", "-o", str(out)]) == 0
    assert "warning: output_probability: sequence of maps -> tensor float [N, 2]" in capsys.readouterr().err
    assert "rewriter.zipmap.output_probability" in {p.key for p in onnx.load(str(out)).metadata_props}
