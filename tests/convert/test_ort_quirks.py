"""Float16 models converted for ONNX Runtime 1.15 / 1.16 load there (issue 27, section 4).

Those releases have no float16 CPU kernel for LayerNormalization-17, Softmax-13, LogSoftmax-13 or
SoftmaxCrossEntropyLoss-13, replace such a node by the op's function body written for the opset it
was first defined at, and so refuse it at opset 18 or 19 ("Unrecognized attribute: axes for operator
ReduceMean"); 1.15 also refuses any float16 node without a float16 kernel at opset 19, because the
Casts it inserts around it are Cast-19, which it lacks. The conversion expands those nodes itself
(into the body for the target opset) and takes such a model to opset 18 for 1.15.

Oracles: the releases themselves in their venvs (``tools/ort_venvs.py``; skipped when absent), and
the current ONNX Runtime on the source; without a venv, the structure of the result (no node left
that the measured data says the release inlines wrongly, every Reduce* in its opset-18 form).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_for, registry
from rewriter.targets import blockers, parse_target
from rewriter.targets.inlining import inlines_wrongly, inlining_releases
from tests import old_ort

H, F = TensorProto.FLOAT16, TensorProto.FLOAT
INSTALLED = old_ort.releases()
OPS = ["LayerNormalization", "Softmax", "LogSoftmax", "SoftmaxCrossEntropyLoss"]


def _model(op: str, opset: int, elem: int = H, in_if: bool = False) -> onnx.ModelProto:
    dt = np.float16 if elem == H else np.float32
    inits, inputs = [], [helper.make_tensor_value_info("x", elem, [2, 3, 8])]
    out = helper.make_tensor_value_info("y", elem, [2, 3, 8])
    if op == "LayerNormalization":
        node = helper.make_node(op, ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5, name="norm")
        inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, 8).astype(dt), "s"),
                 numpy_helper.from_array(np.linspace(-1, 1, 8).astype(dt), "b")]
    elif op == "SoftmaxCrossEntropyLoss":
        node = helper.make_node(op, ["x", "labels"], ["y"], reduction="mean", name="loss")
        inputs = [helper.make_tensor_value_info("x", elem, [4, 5]),
                  helper.make_tensor_value_info("labels", TensorProto.INT64, [4])]
        out = helper.make_tensor_value_info("y", elem, [])
    else:
        node = helper.make_node(op, ["x"], ["y"], axis=-1, name="soft")
    nodes = [node]
    if in_if:  # the node in both branches of an If
        branch = lambda tag: helper.make_graph(  # noqa: E731
            [helper.make_node(node.op_type, list(node.input), [f"y_{tag}"], name=f"{node.name}_{tag}",
                              **{a.name: helper.get_attribute_value(a) for a in node.attribute})],
            tag, [], [helper.make_tensor_value_info(f"y_{tag}", elem, None)])
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
        nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch("then"), else_branch=branch("else"))]
    graph = helper.make_graph(nodes, "g", inputs, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        elem = i.type.tensor_type.elem_type
        feeds[i.name] = (rng.integers(0, 5, shape).astype(np.int64) if elem == TensorProto.INT64 else
                         np.array(True) if elem == TensorProto.BOOL else
                         rng.standard_normal(shape).astype(np.float16 if elem == H else np.float32))
    return feeds


def _all_nodes(graph: onnx.GraphProto):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)


def _wrongly_inlined(model: onnx.ModelProto, release: str) -> list[str]:
    """The nodes of ``model`` that the measured data says ``release`` inlines wrongly in float16
    (every value of a float16 model is float16 here, but for the integer labels)."""
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return [n.op_type for n in _all_nodes(model.graph)
            if (v := registry.schema_version_at(n.op_type, opset)) is not None
            and inlines_wrongly(release, n.op_type, v, opset, "float16")]


# ---------------------------------------------------------------- the structure, no venv needed


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("release", ["1.15", "1.16"])
def test_a_float16_function_op_at_18_is_expanded_for_the_release(op, release):
    result, report = convert_for(_model(op, 18), runtime=f"onnxruntime=={release}")
    assert result.opset_import[0].version == 18
    assert _wrongly_inlined(result, release) == []
    assert op not in {n.op_type for n in result.graph.node}
    assert report.inlined_for_runtime[op] == 1 and not report.expanded
    for n in result.graph.node:  # the body is the one for opset 18: axes as an input, never an attribute
        if n.op_type.startswith("Reduce"):
            assert "axes" not in {a.name for a in n.attribute}, n
    onnx.checker.check_model(result, full_check=True)
    assert any("would inline wrongly" in line for line in report.summary_lines())


def test_softmax_cross_entropy_expands_the_log_softmax_of_its_body_too():
    result, report = convert_for(_model("SoftmaxCrossEntropyLoss", 18), runtime="onnxruntime==1.15")
    assert dict(report.inlined_for_runtime) == {"SoftmaxCrossEntropyLoss": 1, "LogSoftmax": 1}
    assert {"LogSoftmax", "Softmax"} & {n.op_type for n in result.graph.node} == set()


def test_a_node_in_a_subgraph_is_expanded_too():
    result, report = convert_for(_model("LayerNormalization", 18, in_if=True), runtime="onnxruntime==1.15")
    assert report.inlined_for_runtime["LayerNormalization"] == 2
    assert _wrongly_inlined(result, "1.15") == []
    assert "LayerNormalization" not in {n.op_type for n in _all_nodes(result.graph)}


@pytest.mark.parametrize("case", [
    ("float32 has a kernel", "LayerNormalization", 18, F, "1.15"),
    ("opset 17: its own inlining is right", "LayerNormalization", 17, H, "1.15"),
    ("1.17 inlines it right", "LayerNormalization", 18, H, "1.17"),
    ("1.17 inlines it right", "Softmax", 18, H, "1.17"),
    ("not onnxruntime", "Softmax", 18, H, "tensorrt==10.0"),
], ids=lambda c: f"{c[1]}-{c[2]}-{c[4]}: {c[0]}")
def test_a_node_the_release_runs_is_kept(case):
    _, op, opset, elem, release = case
    target = release if "==" in release else f"onnxruntime=={release}"
    try:
        result, report = convert_for(_model(op, opset, elem), runtime=target)
    except Exception as e:  # noqa: BLE001 - a target that cannot take the model at all is not the case
        pytest.skip(str(e))
    assert [n.op_type for n in result.graph.node] == [op]
    assert not report.inlined_for_runtime


@pytest.mark.parametrize("axis", [-1, 1])
def test_a_softmax_11_taken_up_to_18_for_the_release_is_expanded_after_its_steps(axis):
    # Softmax-11 has no function body: it takes its steps to Softmax-13 (at 13), which is expanded
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=axis, name="sm")], "g",
                              [helper.make_tensor_value_info("x", H, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", H, [2, 3, 4])])
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    result, report = convert_for(source, 18, runtime="onnxruntime==1.15")
    assert _wrongly_inlined(result, "1.15") == [] and report.inlined_for_runtime["Softmax"] == 1
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float16)
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]  # noqa: E731
    np.testing.assert_allclose(run(result).astype(np.float32), run(source).astype(np.float32), atol=1e-3)


def test_without_a_runtime_nothing_is_expanded():
    result, report = convert_for(_model("LayerNormalization", 17), 18)
    assert [n.op_type for n in result.graph.node] == ["LayerNormalization"]
    assert not report.inlined_for_runtime


def _relu(opset: int, elem: int) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", elem, [4])],
                              [helper.make_tensor_value_info("y", elem, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


@pytest.mark.parametrize("elem, release, opset", [(H, "1.15", 18), (F, "1.15", 19), (TensorProto.DOUBLE, "1.15", 19),
                                                  (H, "1.16", 19)])
def test_a_float16_node_without_a_kernel_takes_1_15_to_opset_18(elem, release, opset):
    # 1.15 computes a float16 Relu in float32 between Casts of the model's opset, and has no Cast-19
    result, _ = convert_for(_relu(19, elem), runtime=f"onnxruntime=={release}")
    assert result.opset_import[0].version == opset


def test_the_float16_nodes_are_found_by_shape_inference():
    from rewriter.targets.ort_quirks import float16_ops

    model = _relu(19, F)  # float32 in and out, float16 in between, no value_info saying so
    model.graph.node[0].output[0] = "r"
    model.graph.node.extend([helper.make_node("Cast", ["r"], ["h"], to=H),
                             helper.make_node("Relu", ["h"], ["h2"]), helper.make_node("Cast", ["h2"], ["y"], to=F)])
    assert float16_ops(model) == {"Cast", "Relu"}
    assert float16_ops(_relu(19, F)) == set()


@pytest.mark.parametrize("op", OPS)
def test_check_target_names_the_node_the_release_would_inline_wrongly(op):
    source = _model(op, 18)
    found = blockers(source, parse_target("onnxruntime==1.15"))
    assert len(found) == 1 and found[0].startswith(f"{op}-") and "in float16 at opset 18" in found[0], found
    assert not blockers(convert_for(source, runtime="onnxruntime==1.15")[0], parse_target("onnxruntime==1.15"))
    assert not blockers(source, parse_target("onnxruntime==1.17"))
    assert not blockers(_model(op, 18, F), parse_target("onnxruntime==1.15"))


def test_check_target_names_the_float16_nodes_whose_casts_1_15_lacks():
    found = blockers(_relu(19, H), parse_target("onnxruntime==1.15"))
    assert len(found) == 1 and "no Cast-19" in found[0] and "node 'r' (Relu)" in found[0], found
    assert not blockers(_relu(19, H), parse_target("onnxruntime==1.16"))
    assert not blockers(_relu(19, F), parse_target("onnxruntime==1.15"))


def _transpose_gather_relu(opset: int) -> onnx.ModelProto:
    """float32; Transpose and Gather have float16 kernels in 1.15, Relu has none: --dtype float16
    halves the first two and puts Casts between them and the rest."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0], name="tr"),
             helper.make_node("Gather", ["t", "i"], ["g"], axis=0, name="ga"), helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 4])],
                              [numpy_helper.from_array(np.array([0, 2], np.int64), "i")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def test_convert_dtype_for_1_15_takes_an_opset_whose_casts_it_has(tmp_path):
    from rewriter import cli

    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "h.onnx")
    onnx.save(_transpose_gather_relu(21), src)
    assert cli.main(["convert", src, "--dtype", "float16", "--target", "onnxruntime==1.15", "-o", out]) == 0
    result = onnx.load(out)
    assert result.opset_import[0].version == 18 and "Cast" in {n.op_type for n in result.graph.node}
    assert convert_for(_transpose_gather_relu(21), runtime="onnxruntime==1.15")[0].opset_import[0].version == 19
    assert convert_for(_transpose_gather_relu(21), runtime="onnxruntime==1.16", half="float16")[0] \
        .opset_import[0].version == 19
    if "1.15" in INSTALLED:  # the release runs it, and computes what the source does
        x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
        there = old_ort.run("1.15", out, {"x": x})
        assert there["ok"], there["error"]
        np.testing.assert_allclose(there["outputs"]["y"], np.maximum(x.T[[0, 2]], 0), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- the data


def test_the_data_names_the_releases_and_opsets_measured():
    assert inlining_releases()[:3] == ["1.15", "1.16", "1.17"]
    for release in ("1.15", "1.16"):
        for op, v in (("LayerNormalization", 17), ("Softmax", 13), ("LogSoftmax", 13), ("SoftmaxCrossEntropyLoss", 13)):
            assert [o for o in range(13, 21) if inlines_wrongly(release, op, v, o, "float16")] == [18, 19], (release, op)
    assert not inlines_wrongly("1.17", "LayerNormalization", 17, 18, "float16")
    assert not inlines_wrongly("1.15", "Relu", 14, 18, "float16")


def test_releases_between_newer_and_older_than_the_measured_ones():
    assert inlines_wrongly("1.16.3", "Softmax", 13, 18, "float16")  # a patch number is ignored
    assert not inlines_wrongly("1.99", "Softmax", 13, 18, "float16")  # newer than all: as the newest
    assert not inlines_wrongly("1.14", "Softmax", 13, 18, "float16")  # older than all: not known
    assert not inlines_wrongly("next", "Softmax", 13, 18, "float16")
    assert not inlines_wrongly("1.15", "Softmax", 13, 18, "float32")


# ---------------------------------------------------------------- the releases themselves


QUIRKY = [r for r in INSTALLED if r in ("1.15", "1.16")]


@pytest.mark.skipif(not QUIRKY, reason="no onnxruntime 1.15 / 1.16 venv (python tools/ort_venvs.py 1.15 1.16)")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [18, 19])
def test_the_converted_model_loads_and_matches_in_the_release(op, opset):
    source = _model(op, opset)
    feeds = _feeds(source)
    want = ort.InferenceSession(source.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for release in QUIRKY:
        ok, error = old_ort.loads(release, source)
        assert not ok and "Unrecognized attribute" in error, (release, error)  # the quirk, reproduced
        result, _ = convert_for(source, runtime=f"onnxruntime=={release}")
        there = old_ort.run(release, result, feeds)
        assert there["ok"], (release, there["error"])
        got = there["outputs"]["y"]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.skipif("1.15" not in INSTALLED, reason="no onnxruntime 1.15 venv")
def test_a_float16_relu_at_19_is_refused_by_1_15_and_its_conversion_runs():
    source = _relu(19, H)
    ok, error = old_ort.loads("1.15", source)
    assert not ok and "Cast(19)" in error
    x = np.array([-1.0, 0.0, 2.5, -3.0], np.float16)
    there = old_ort.run("1.15", convert_for(source, runtime="onnxruntime==1.15")[0], {"x": x})
    assert there["ok"], there["error"]
    np.testing.assert_array_equal(there["outputs"]["y"], np.maximum(x, 0))


@pytest.mark.skipif("1.17" not in INSTALLED, reason="no onnxruntime 1.17 venv")
def test_1_17_loads_the_float16_function_ops_as_they_are():
    for op in OPS:
        assert old_ort.loads("1.17", _model(op, 18))[0], op
