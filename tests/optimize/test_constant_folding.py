"""FoldConstantsPass: what folds, what never does, and how values are computed."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnx_ir as ir

from rewriter.optimize.constant_folding import FoldConstantsPass
from rewriter.optimize.remove_unused import RemoveUnusedPass
from tests.optimize.common import ops, optimize_and_compare, parse


def run_pass(model, fold: FoldConstantsPass):
    """The fold, then the unused sweep, composed as onnx_ir passes."""
    m = ir.serde.deserialize_model(model)
    result = ir.passes.PassManager([fold, RemoveUnusedPass()])(m)
    return result.model, result.modified


def test_cast_identity_chain_on_a_constant_folds_to_an_initializer_under_the_output_name():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) {
          k = Constant<value=double[2] {1.5, 2.5}>()
          c = Cast<to=1>(k)
          i = Identity(c)
          y = Add(x, i)
        }""")
    result, modified = run_pass(m, FoldConstantsPass())
    assert modified and ops(result) == ["Add"]
    folded = result.graph.node(0).inputs[1]
    assert folded.const_value is not None
    np.testing.assert_array_equal(folded.const_value.numpy(), np.array([1.5, 2.5], np.float32))


def test_static_shape_chain_folds_symbolic_does_not():
    text = """<ir_version: 8, opset_import: ["": 13]>
        g (float[{dim},3,4] x) => (float[{dim},12] y) {{
          s = Shape(x)
          i = Constant<value=int64 {{0}}>()
          d = Gather<axis=0>(s, i)
          a = Constant<value=int64[1] {{0}}>()
          u = Unsqueeze(d, a)
          m = Constant<value=int64[1] {{-1}}>()
          c = Concat<axis=0>(u, m)
          y = Reshape(x, c)
        }}"""
    static, _ = run_pass(parse(text.format(dim=2)), FoldConstantsPass())
    assert ops(static) == ["Reshape"]
    np.testing.assert_array_equal(static.graph.node(0).inputs[1].const_value.numpy(), [2, -1])
    dynamic, _ = run_pass(parse(text.format(dim="N")), FoldConstantsPass())
    assert "Shape" in ops(dynamic) and "Gather" in ops(dynamic)


def test_an_initializer_that_is_also_a_graph_input_is_never_folded():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x, float[2] w) => (float[2] y) <float[2] w = {1, 2}> {
          n = Neg(w)
          y = Add(x, n)
        }""")
    result, _ = run_pass(m, FoldConstantsPass())
    assert ops(result) == ["Neg", "Add"]
    assert result.graph.initializers["w"].const_value is not None  # the value is still there


def test_folds_inside_a_subgraph_reading_an_outer_constant():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (bool b, float[2] x) => (float[2] y) <float[2] k = {1, 2}> {
          y = If(b) <
            then_branch = t () => (float[2] o) { n = Neg(k)  o = Add(x, n) },
            else_branch = e () => (float[2] o2) { o2 = Identity(x) }>
        }""")
    optimized, report = optimize_and_compare(m)
    then_ops = [n.op_type for n in optimized.graph.node[0].attribute[0].g.node]
    assert then_ops == ["Add"] and report.folded["Neg"] == 1


def test_inside_a_function_folded_values_become_constant_nodes():
    m = parse("""<ir_version: 8, opset_import: ["": 13, "local": 1]>
        g (float[2] x) => (float[2] y) { y = local.F(x) }
        <domain: "local", opset_import: ["": 13]>
        F (a) => (b) { k = Constant<value=float[2] {1, 2}>()  n = Neg(k)  b = Add(a, n) }""")
    optimized, _ = optimize_and_compare(m)
    body = [n.op_type for n in optimized.functions[0].node]
    assert body == ["Constant", "Add"] and not optimized.graph.initializer


def test_if_on_a_constant_condition_is_replaced_by_its_branch_keeping_the_output_name():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) {
          c = Constant<value=bool {1}>()
          y = If(c) <
            then_branch = t () => (float[2] o) { o = Relu(x) },
            else_branch = e () => (float[2] o2) { o2 = Neg(x) }>
        }""")
    optimized, _ = optimize_and_compare(m)
    assert ops(optimized) == ["Relu"] and optimized.graph.node[0].output[0] == "y"


@pytest.mark.parametrize("mode,folded", [("skip", False), ("wrap", True)])
def test_integer_overflow_is_skipped_unless_wrap(mode, folded):
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (int32[2] x) => (int32[2] y) <int32[2] a = {65536, 3}> {
          p = Mul(a, a)
          y = Add(x, p)
        }""")
    result, _ = run_pass(m, pass_ := FoldConstantsPass(int_overflow=mode))
    assert (ops(result) == ["Add"]) is folded
    if folded:
        np.testing.assert_array_equal(result.graph.node(0).inputs[1].const_value.numpy(),
                                      np.array([0, 9], np.int32))  # wrapped, as NumPy and ORT compute it
    else:
        assert any("overflows" in reason for _, reason in pass_.stats.skipped)


def test_integer_division_by_zero_is_never_folded():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (int64[2] x) => (int64[2] y) <int64[2] a = {4, 6}, int64[2] z = {2, 0}> {
          q = Div(a, z)
          y = Add(x, q)
        }""")
    result, _ = run_pass(m, FoldConstantsPass(int_overflow="wrap"))
    assert ops(result) == ["Div", "Add"]


def test_custom_domain_and_random_nodes_are_never_folded():
    m = parse("""<ir_version: 8, opset_import: ["": 13, "custom": 1]>
        g (float[2] x) => (float[2] y, float[2] r) <float[2] k = {1, 2}> {
          c = custom.Neg(k)
          y = Add(x, c)
          r = RandomUniformLike(k)
        }""")
    result, _ = run_pass(m, FoldConstantsPass())
    assert ops(result) == ["Neg", "Add", "RandomUniformLike"]


def test_a_fold_over_the_limit_is_skipped_and_reported():
    h = onnx.helper
    # k (16 KiB) stays, as another node reads it: folding Exp(k) would add 16 KiB
    m = h.make_model(h.make_graph(
        [h.make_node("Exp", ["k"], ["e"]), h.make_node("Add", ["x", "e"], ["a"]), h.make_node("Add", ["a", "k"], ["y"])],
        "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [64, 64])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [64, 64])],
        [onnx.numpy_helper.from_array(np.ones((64, 64), np.float32), "k")]), opset_imports=[h.make_opsetid("", 13)])
    p = FoldConstantsPass(fold_limit=1024)
    result, _ = run_pass(m, p)
    assert "Exp" in ops(result)
    assert p.stats.skipped_for_size and "fold limit" in p.stats.skipped_for_size[0][1]
    result, _ = run_pass(m, FoldConstantsPass())  # the default limit (1 MiB) lets 16 KiB through
    assert "Exp" not in ops(result)


def test_transcendental_ops_are_folded_with_onnx_runtimes_kernel():
    values = np.linspace(-3, 3, 101, dtype=np.float32)
    m = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Tanh", ["k"], ["t"]), onnx.helper.make_node("Add", ["x", "t"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [101])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [101])],
        [onnx.numpy_helper.from_array(values, "k")]), opset_imports=[onnx.helper.make_opsetid("", 13)])
    result, _ = run_pass(m, FoldConstantsPass())
    assert ops(result) == ["Add"]
    alone = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Tanh", ["k"], ["t"])], "g",
        [onnx.helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [101])],
        [onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [101])]),
        opset_imports=[onnx.helper.make_opsetid("", 13)])
    want = ort.InferenceSession(alone.SerializeToString()).run(None, {"k": values})[0]
    np.testing.assert_array_equal(result.graph.node(0).inputs[1].const_value.numpy(), want)  # bit for bit


def test_reduce_prod_uses_the_exact_kernel():
    big = np.array([2.0**100, 2.0**100, 2.0**-100, 2.0**-100], np.float32)
    m = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["k"], ["k2"]),  # only constant after a first fold
         onnx.helper.make_node("ReduceProd", ["k2"], ["p"], keepdims=0),
         onnx.helper.make_node("Add", ["x", "p"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])],
        [onnx.numpy_helper.from_array(big, "k")]), opset_imports=[onnx.helper.make_opsetid("", 13)])
    result, _ = run_pass(m, FoldConstantsPass())
    assert ops(result) == ["Add"]
    assert result.graph.node(0).inputs[1].const_value.numpy() == 1.0  # no overflow on the way


def test_a_loop_body_folds_what_it_reads_from_outside_and_keeps_its_carried_values():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) <int64 n = {3}, float[2] k = {1, 2}> {
          t = Constant<value=bool {1}>()
          y = Loop(n, t, x) <body = b (int64 i, bool c, float[2] acc) => (bool c2, float[2] acc2) {
            c2 = Identity(c)
            kk = Neg(k)
            two = Constant<value=float {2}>()
            s = Mul(kk, two)
            acc2 = Add(acc, s)
          }>
        }""")
    optimized, report = optimize_and_compare(m)
    body = [n.op_type for n in optimized.graph.node[-1].attribute[0].g.node]
    assert body == ["Identity", "Add"] and report.folded["Neg"] == 1


def test_a_node_whose_attribute_comes_from_the_function_call_is_not_folded():
    m = parse("""<ir_version: 8, opset_import: ["": 13, "local": 1]>
        g (float[3,2] x) => (float[3,2] y) { y = local.F<p = [1, 0]>(x) }
        <domain: "local", opset_import: ["": 13]>
        F <p> (a) => (b) { k = Constant<value=float[2,3] {1, 2, 3, 4, 5, 6}>()  t = Transpose<perm: ints = @p>(k)
                           b = Add(a, t) }""")
    optimized, _ = optimize_and_compare(m)
    assert "Transpose" in [n.op_type for n in optimized.functions[0].node]


def test_float_to_integer_cast_is_folded_by_the_runtime_not_numpy():
    values = np.array([2.5, -2.5, 1e10, np.nan], np.float32)
    m = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Cast", ["k"], ["c"], to=onnx.TensorProto.INT32),
         onnx.helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.INT32, [4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [4])],
        [onnx.numpy_helper.from_array(values, "k")]), opset_imports=[onnx.helper.make_opsetid("", 13)])
    optimize_and_compare(m)  # the folded values are ORT's own (its saturating/NaN rules), compared on ORT


def test_the_private_onnxscript_hooks_the_folder_overrides_exist():
    """FoldConstantsPass overrides onnxscript 0.7's private ``process_node``, ``_do_inference``
    and ``_prepare_folded_tensor`` (pinned below 0.8 in pyproject.toml): a rename would silently
    bypass them."""
    from onnxscript.optimizer import _constant_folding

    from rewriter.optimize.constant_folding import FoldConstantsPass

    for name in ("process_node", "_do_inference", "_prepare_folded_tensor"):
        assert callable(getattr(_constant_folding.FoldConstantsPass, name, None)), name
        assert name in vars(FoldConstantsPass), name


def test_inference_is_skipped_only_for_outputs_already_typed_and_static(monkeypatch):
    import onnx_ir as ir
    from onnxscript.optimizer import _constant_folding

    from rewriter.optimize.constant_folding import FoldConstantsPass

    calls = []
    monkeypatch.setattr(_constant_folding.FoldConstantsPass, "_do_inference",
                        lambda self, node: calls.append(node.op_type))
    folder = FoldConstantsPass()
    static = ir.Value(name="a", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    symbolic = ir.Value(name="b", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["n"]))
    untyped = ir.Value(name="c")
    for op, out in (("Relu", static), ("Sigmoid", symbolic), ("Tanh", untyped)):
        folder._do_inference(ir.Node("", op, [], outputs=[out]))
    assert calls == ["Sigmoid", "Tanh"]


def _shared_weight_model(branches: bool):
    """A 64 KiB weight Unsqueezed in both branches of an If (as silero-vad's LSTM weights are),
    or, without branches, by a single Unsqueeze that is its only reader."""
    import numpy as np
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh

    weight = nh.from_array(np.arange(128 * 128, dtype=np.float32).reshape(128, 128), "w")
    axes = nh.from_array(np.array([0], np.int64), "axes")

    def branch(name):
        return h.make_graph([h.make_node("Unsqueeze", ["w", "axes"], [f"{name}_u"]),
                             h.make_node("MatMul", ["x", f"{name}_u"], [f"{name}_y"])], name, [],
                            [h.make_tensor_value_info(f"{name}_y", onnx.TensorProto.FLOAT, [1, 2, 128])])
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 128])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 128])
    if branches:
        nodes = [h.make_node("If", ["c"], ["y"], then_branch=branch("t"), else_branch=branch("e"))]
        inputs = [h.make_tensor_value_info("c", onnx.TensorProto.BOOL, []), x]
    else:
        nodes = list(branch("t").node)
        nodes[-1].output[0] = "y"
        inputs = [x]
    model = h.make_model(h.make_graph(nodes, "g", inputs, [y], [weight, axes]),
                         opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_fold_that_would_store_a_shared_weight_twice_is_skipped():
    import onnx

    from tests.optimize.common import optimize_and_compare

    model = _shared_weight_model(branches=True)
    result, report = optimize_and_compare(model)
    assert result.ByteSize() <= model.ByteSize()
    assert any("would copy the data of 'w'" in reason for _, reason in report.skipped)
    # in one graph every reader of the weight folds, and the weight goes: nothing is stored twice
    two = _shared_weight_model(branches=False)
    two.graph.node.extend([onnx.helper.make_node("Unsqueeze", ["w", "axes"], ["w2"]),
                           onnx.helper.make_node("MatMul", ["x", "w2"], ["y2"])])
    two.graph.output.extend([onnx.helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, [1, 2, 128])])
    folded, _ = optimize_and_compare(two)
    assert "Unsqueeze" not in [n.op_type for n in folded.graph.node]
    single, _ = optimize_and_compare(_shared_weight_model(branches=False))
    assert [n.op_type for n in single.graph.node] == ["MatMul"]  # its only reader: folded, nothing copied
    assert single.ByteSize() <= _shared_weight_model(branches=False).ByteSize()
