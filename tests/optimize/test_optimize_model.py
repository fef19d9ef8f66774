"""The whole pipeline on export-like models: same outputs as ONNX Runtime on the original, valid,
idempotent, nothing lost (names, doc strings, metadata, training info, lazy weights)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.io import load_model, save_model
from rewriter.optimize import OptimizeOptions, count_ops, optimize_proto
from tests.optimize.common import optimize_and_compare, parse
from tests.optimize.test_passes import DYNAMIC_FLATTEN, _cnn_bn, _projections

F = onnx.TensorProto.FLOAT


def _const(name, array):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(array), name + "_v"))


def legacy_flatten():
    """torch legacy export: Constant nodes, Shape/Gather/Unsqueeze/Concat/Reshape on a static shape."""
    rng = np.random.default_rng(2)
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Shape", ["r"], ["s"]),
             _const("i0", np.array(0, np.int64)), h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             _const("ax", np.array([0], np.int64)), h.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
             _const("m1", np.array([-1], np.int64)), h.make_node("Concat", ["bu", "m1"], ["shape"], axis=0),
             h.make_node("Reshape", ["r", "shape"], ["flat"], name="flatten"),
             h.make_node("Gemm", ["flat", "w", "bias"], ["y"], name="fc", transB=1)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2, 3, 4])],
                         [h.make_tensor_value_info("y", F, [2, 5])],
                         [nh.from_array(rng.standard_normal((5, 12)).astype(np.float32), "w"),
                          nh.from_array(rng.standard_normal(5).astype(np.float32), "bias")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def attention_block():
    m = _projections()
    g = m.graph
    del g.output[:]
    g.node[-1].CopyFrom(h.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]))
    g.node.extend([h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
                   h.make_node("MatMul", ["qt", "kt"], ["qk"]), _const("d", np.array(4.0, np.float32)),
                   h.make_node("Sqrt", ["d"], ["sd"]), h.make_node("Div", ["qk", "sd"], ["qs"]),
                   h.make_node("Softmax", ["qs"], ["y"], axis=-1)])
    g.output.append(h.make_tensor_value_info("y", F, [2, 2, 4, 4]))
    return m


def if_constant():
    return parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) {
          flag = Constant<value=bool {0}>()
          c = Not(flag)
          y = If(c) <then_branch = t () => (float[2] o) { k = Constant<value=float {2}>()  o = Mul(x, k) },
                     else_branch = e () => (float[2] o2) { o2 = Neg(x) }>
        }""")


MODELS = {"legacy_flatten": legacy_flatten, "cnn_bn": _cnn_bn, "attention": attention_block,
          "if_constant": if_constant, "dynamic_flatten": lambda: parse(DYNAMIC_FLATTEN)}
EXPECTED_AFTER = {"legacy_flatten": ["Relu", "Reshape", "Gemm"], "cnn_bn": ["Conv", "Relu"],
                  "if_constant": ["Mul"], "dynamic_flatten": ["Relu", "Reshape", "Div"]}


@pytest.mark.parametrize("name", MODELS)
def test_export_like_models_shrink_and_compute_the_same(name):
    model = MODELS[name]()
    result, report = optimize_and_compare(model, rtol=1e-4)
    assert report.nodes_after < report.nodes_before
    if name in EXPECTED_AFTER:
        assert [n.op_type for n in result.graph.node] == EXPECTED_AFTER[name]
    # idempotent: a second run finds nothing to do and gives the same model
    again, second = optimize_proto(result)
    assert count_ops(again) == count_ops(result) and second.fused == second.merged == 0
    assert not second.folded and second.removed_nodes == 0
    assert again.SerializeToString() == result.SerializeToString()


def test_names_doc_strings_and_metadata_are_kept_unless_stripped():
    model = legacy_flatten()
    model.doc_string = "model doc"
    onnx.helper.set_model_props(model, {"author": "me"})
    model.graph.doc_string = "graph doc"
    model.graph.metadata_props.add(key="graph_key", value="v")
    relu = model.graph.node[0]
    relu.doc_string = "relu doc"
    relu.metadata_props.add(key="source", value="model.py:12")
    result, _ = optimize_proto(model)
    assert result.doc_string == "model doc" and result.graph.doc_string == "graph doc"
    assert {p.key: p.value for p in result.metadata_props} == {"author": "me"}
    assert {p.key: p.value for p in result.graph.metadata_props} == {"graph_key": "v"}
    kept = {n.name: n for n in result.graph.node}
    assert set(kept) == {"relu", "flatten", "fc"}
    assert kept["relu"].doc_string == "relu doc"
    assert {p.key: p.value for p in kept["relu"].metadata_props} == {"source": "model.py:12"}
    assert [i.name for i in result.graph.input] == ["x"] and [o.name for o in result.graph.output] == ["y"]
    assert not any(p.key.startswith("pkg.onnxscript") for n in result.graph.node for p in n.metadata_props)
    stripped, _ = optimize_proto(model, OptimizeOptions(strip_metadata=True))
    assert not stripped.doc_string and not stripped.graph.doc_string and not stripped.graph.metadata_props
    assert {p.key: p.value for p in stripped.metadata_props} == {"author": "me"}  # model-level props stay
    assert not any(n.doc_string or n.metadata_props for n in stripped.graph.node)


def test_training_info_and_what_it_reads_survive():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) <float[2] w = {1, 2}, float[1] lr = {0.1}> { y = Add(x, w) }""")
    info = model.training_info.add()
    info.algorithm.CopyFrom(h.make_graph([h.make_node("Mul", ["w", "lr"], ["w_next"])], "algo", [], []))
    info.update_binding.add(key="w", value="w_next")
    result, _ = optimize_proto(model)
    assert result.training_info == model.training_info
    assert sorted(t.name for t in result.graph.initializer) == ["lr", "w"]


def test_big_weights_stay_lazy_references_and_are_not_rewritten(tmp_path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((512, 640)).astype(np.float32)  # 1.25 MiB: over the fold limit, external
    graph = h.make_graph([h.make_node("Transpose", ["w"], ["wt"]), h.make_node("MatMul", ["x", "w"], ["m"]),
                          h.make_node("Identity", ["m"], ["y"]), h.make_node("Add", ["x2", "wt"], ["z"])], "g",
                         [h.make_tensor_value_info("x", F, [2, 512]), h.make_tensor_value_info("x2", F, [640, 512])],
                         [h.make_tensor_value_info("y", F, [2, 640]), h.make_tensor_value_info("z", F, [640, 512])],
                         [nh.from_array(w, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    src = tmp_path / "m.onnx"
    onnx.save(model, src, save_as_external_data=True, location="m.data")
    loaded = load_model(src)
    result, report = optimize_proto(loaded, base_dir=str(tmp_path))
    (tensor,) = [t for t in result.graph.initializer if t.name == "w"]
    assert tensor.data_location == onnx.TensorProto.EXTERNAL and not tensor.raw_data
    assert report.skipped_for_size  # transposing w would add 1.25 MiB
    out = tmp_path / "out.onnx"
    save_model(result, str(out))
    feeds = {"x": rng.random((2, 512), dtype=np.float32), "x2": rng.random((640, 512), dtype=np.float32)}
    import onnxruntime as ort

    want = ort.InferenceSession(str(src)).run(None, feeds)
    got = ort.InferenceSession(str(out)).run(None, feeds)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_public_api_accepts_proto_ir_and_path(tmp_path):
    import onnx_ir as ir

    model = legacy_flatten()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert len(rewriter.optimize_model(model).graph.node) == 3
    assert len(rewriter.optimize_model(str(path)).graph.node) == 3
    assert len(list(rewriter.optimize_model(ir.serde.deserialize_model(model)).graph)) == 3
    assert len(model.graph.node) == 10  # the argument is not changed
    manager = ir.passes.PassManager([rewriter.OptimizePass()])
    assert len(list(manager(ir.serde.deserialize_model(model)).model.graph)) == 3


def test_a_folded_graph_output_keeps_its_name():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y, float[2] z, float[2] w) <float[2] k = {1, 2}> {
          y = Neg(k)
          z = Identity(x)
          w = Add(x, y)
        }""")
    result, _ = optimize_and_compare(m)
    assert [o.name for o in result.graph.output] == ["y", "z", "w"]
    assert {t.name for t in result.graph.initializer} == {"y"}
    assert [n.op_type for n in result.graph.node] == ["Identity", "Add"]  # an input is no output


def test_ir_version_3_folds_into_constant_nodes():
    """Before IR 4 an initializer must be a graph input: folded values become Constant nodes."""
    model = h.make_model(h.make_graph(
        [_const("k", np.array([1.0, 2.0], np.float32)), h.make_node("Neg", ["k"], ["n"]),
         h.make_node("Add", ["x", "n"], ["y"])], "g",
        [h.make_tensor_value_info("x", F, [2])], [h.make_tensor_value_info("y", F, [2])]),
        opset_imports=[h.make_opsetid("", 8)])
    model.ir_version = 3
    result, _ = optimize_and_compare(model)
    assert [n.op_type for n in result.graph.node] == ["Constant", "Add"] and not result.graph.initializer
    assert result.ir_version == 3
