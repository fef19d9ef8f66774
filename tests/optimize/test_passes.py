"""CSE, unused removal, fusions, neutral constants, batched Gemm: each pass alone, edge cases one by one."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize import optimize_proto
from rewriter.optimize.batched_gemm import BatchedMatMulAddToGemmPass
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.fusions import FusionsPass
from rewriter.optimize.neutral_constants import RemoveNeutralArithmeticPass
from rewriter.optimize.remove_unused import RemoveUnusedPass
from tests import oracle
from tests.optimize.common import ops, optimize_and_compare, parse, run_pass

F = onnx.TensorProto.FLOAT


# ---------------------------------------------------------------- CSE

def test_cse_merges_repeated_nodes_and_reports_no_change_when_there_is_none():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] y) { a = Relu(x)  b = Relu(x)  y = Add(a, b) }""")
    result, modified = run_pass(m, CommonSubexpressionEliminationPass())
    assert modified and ops(result) == ["Relu", "Add"]
    again, modified = run_pass(ir.serde.serialize_model(result), CommonSubexpressionEliminationPass())
    assert not modified


def test_cse_keeps_a_repeat_that_is_a_graph_output():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] a, float[2] b) { a = Relu(x)  b = Relu(x) }""")
    result, modified = run_pass(m, CommonSubexpressionEliminationPass())
    assert not modified and ops(result) == ["Relu", "Relu"]


def test_cse_works_in_subgraphs_and_functions_but_not_on_custom_or_random_ops():
    m = parse("""<ir_version: 8, opset_import: ["": 13, "custom": 1, "local": 1]>
        g (bool c, float[2] x) => (float[2] y, float[2] z, float[2] r) {
          y = If(c) <then_branch = t () => (float[2] o) { p = Neg(x)  q = Neg(x)  o = Add(p, q) },
                     else_branch = e () => (float[2] o2) { o2 = Identity(x) }>
          u = custom.Op(x)
          v = custom.Op(x)
          z = local.F(u, v)
          r1 = RandomUniformLike(x)
          r2 = RandomUniformLike(x)
          r = Add(r1, r2)
        }
        <domain: "local", opset_import: ["": 13]>
        F (a, b) => (o) { s = Sigmoid(a)  t = Sigmoid(a)  w = Add(s, t)  o = Add(w, b) }""")
    result, modified = run_pass(m, CommonSubexpressionEliminationPass())
    then = result.graph.node(0).attributes["then_branch"].as_graph()
    assert [n.op_type for n in then] == ["Neg", "Add"]
    assert ops(result).count("Op") == 2 and ops(result).count("RandomUniformLike") == 2
    assert [n.op_type for n in next(iter(result.functions.values()))] == ["Sigmoid", "Add", "Add"]


# ---------------------------------------------------------------- unused

CUSTOM = """<ir_version: 8, opset_import: ["": 13, "custom": 1]>
    g (float[2] x) => (float[2] y) { d = custom.Log(x)  n = Neg(x)  y = Relu(x) }"""


def test_unused_custom_domain_nodes_stay_unless_allowed():
    result, _ = run_pass(parse(CUSTOM), RemoveUnusedPass())
    assert ops(result) == ["Log", "Relu"]
    result, _ = run_pass(parse(CUSTOM), RemoveUnusedPass(allow_removing_custom_ops=True))
    assert ops(result) == ["Relu"]


def test_unused_keeps_input_initializers_outputs_and_outer_values_read_by_subgraphs():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (bool c, float[2] x, float[2] w) => (float[2] y) <float[2] w = {1, 2}, float[2] dead = {3, 4}> {
          k = Neg(x)
          y = If(c) <then_branch = t () => (float[2] o) { o = Add(k, w) },
                     else_branch = e () => (float[2] o2) { o2 = Identity(x) }>
        }""")
    result, modified = run_pass(m, RemoveUnusedPass())
    assert modified and ops(result) == ["Neg", "If"]
    assert set(result.graph.initializers) == {"w"}


def test_an_unused_if_goes_with_what_only_its_branches_read():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (bool c, float[2] x) => (float[2] y) {
          k = Neg(x)
          z = If(c) <then_branch = t () => (float[2] o) { o = Abs(k) },
                     else_branch = e () => (float[2] o2) { o2 = Identity(x) }>
          y = Relu(x)
        }""")
    result, _ = run_pass(m, RemoveUnusedPass())
    assert ops(result) == ["Relu"]


# ---------------------------------------------------------------- fusions

def _cnn_bn(opset=13):
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             nh.from_array((rng.random(4) + 0.5).astype(np.float32), "s"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "bb"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "mu"),
             nh.from_array((rng.random(4) + 0.5).astype(np.float32), "var")]
    graph = h.make_graph([h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                          h.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"], name="bn"),
                          h.make_node("Relu", ["n"], ["y"], name="relu")], "g",
                         [h.make_tensor_value_info("x", F, [1, 3, 8, 8])], [h.make_tensor_value_info("y", F, [1, 4, 8, 8])],
                         inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def test_batch_normalization_folds_into_the_conv():
    result, report = optimize_and_compare(_cnn_bn(), rtol=1e-4)
    assert ops(result) == ["Conv", "Relu"] and report.fused >= 1


def test_matmul_add_rank_2_becomes_gemm_and_min_max_becomes_clip():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[4,3] x) => (float[4,2] y) <float[3,2] w = {1,2,3,4,5,6}, float[2] b = {1, -1},
                                             float lo = {0}, float hi = {6}> {
          p = MatMul(x, w)
          q = Add(p, b)
          r = Max(q, lo)
          y = Min(r, hi)
        }""")
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Gemm", "Clip"]


def test_fusions_leave_custom_domain_nodes_alone_even_when_unused():
    result, _ = run_pass(parse(CUSTOM), FusionsPass())
    assert "Log" in ops(result)


def _two_flattens(axis_b: int) -> onnx.ModelProto:
    z = "float[2,12] z" if axis_b == 1 else "float[6,4] z"
    return parse(f"""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3,4] x) => (float[2,12] y, {z}) {{
          a = Flatten(x)  b = Flatten<axis = {axis_b}>(x)  y = Relu(a)  z = Neg(b) }}""")


def _reads_are_made(model: ir.Model) -> bool:
    made = {v for v in (*model.graph.inputs, *model.graph.initializers.values())}
    for node in model.graph:
        if any(v is not None and v not in made for v in node.inputs):
            return False
        made.update(node.outputs)
    return True


def test_two_flattens_of_one_value_read_one_shape_initializer():
    """onnxscript names both Reshape shapes ``x/shape`` and drops the second (T5's encoder)."""
    result, modified = run_pass(_two_flattens(1), FusionsPass())
    assert modified and ops(result) == ["Reshape", "Reshape", "Relu", "Neg"] and _reads_are_made(result)
    assert list(result.graph.initializers) == ["x/shape"]
    optimized, report = optimize_and_compare(_two_flattens(1))
    assert report.failed_passes == [] and ops(optimized).count("Reshape") + ops(optimized).count("Flatten") == 1


def test_two_flattens_to_different_shapes_get_two_initializers():
    result, modified = run_pass(_two_flattens(2), FusionsPass())
    assert modified and _reads_are_made(result) and len(result.graph.initializers) == 2
    shapes = sorted(tuple(v.const_value.numpy()) for v in result.graph.initializers.values())
    assert shapes == [(2, 12), (6, 4)]
    _, report = optimize_and_compare(_two_flattens(2))
    assert report.failed_passes == []


def _reshape_to(shape_input_dims: str, opset: int, out: str, value_info: str = "") -> onnx.ModelProto:
    """``Reshape(x, s)`` with ``s`` a run-time input: only its result's known dims say the shape
    (and an Identity to remove: a result no smaller than its input is not written)."""
    return parse(f"""<ir_version: 8, opset_import: ["": {opset}]>
        g (float[2,3,4] x, int64[{shape_input_dims}] s) => ({out}) {value_info} {{
          i = Identity(x)  r = Reshape(i, s)  y = Relu(r) }}""")


def _run_with(model, s):
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12, "s": np.array(s, np.int64)}
    return oracle.run(model, feeds)[0]


def test_a_materialized_reshape_shape_has_no_allowzero_before_opset_14():
    """onnxscript's rule writes allowzero=1 (an attribute of Reshape-14) at every opset."""
    model = _reshape_to("2", 12, "float[6,4] y", "<float[6,4] r>")
    result, report = optimize_proto(model)
    oracle.assert_valid(result)
    np.testing.assert_array_equal(_run_with(result, [6, 4]), _run_with(model, [6, 4]))
    reshape = next(n for n in result.graph.node if n.op_type == "Reshape")
    assert report.failed_passes == [] and not reshape.attribute and reshape.input[1] != "s"
    at_14, _ = optimize_proto(_reshape_to("2", 14, "float[6,4] y", "<float[6,4] r>"))
    assert [a.name for a in next(n for n in at_14.graph.node if n.op_type == "Reshape").attribute] == ["allowzero"]


def test_a_zero_in_a_materialized_shape_before_opset_14_is_not_written():
    """[0, 4] with allowzero=1 is a zero dim; without the attribute (opset < 14) 0 copies x's dim."""
    model = parse("""<ir_version: 8, opset_import: ["": 12]>
        g (float[0,6] x, int64[2] s) => (float[0,4] y) <float[0,4] r> { i = Identity(x)  r = Reshape(i, s)  y = Relu(r) }""")
    result, _ = optimize_proto(model)
    oracle.assert_valid(result)
    assert next(n for n in result.graph.node if n.op_type == "Reshape").input[1] == "s"


def test_a_reshape_making_a_graph_output_keeps_its_computed_shape():
    """ddddocr declares [1, seqlen] for an output its Reshape makes [20, 1, 8210]: a declared
    output shape is no inference, and the Reshape keeps reading its shape."""
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3,4] x, int64[2] s) => (float[1,seqlen] r) { i = Identity(x)  r = Reshape(i, s) }""")
    result, _ = optimize_proto(model)
    assert [n.op_type for n in result.graph.node] == ["Reshape"] and result.graph.node[0].input[1] == "s"
    np.testing.assert_array_equal(_run_with(result, [2, 12]).reshape(2, 12), _run_with(model, [2, 12]).reshape(2, 12))


# ---------------------------------------------------------------- neutral constants

def test_neutral_arithmetic_needs_known_shapes():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x) => (float[2,3] y) <float[3] one = {1,1,1}> { a = Mul(x, one)  y = Relu(a) }""")
    m.graph.input[0].type.tensor_type.ClearField("shape")
    assert not run_pass(m, RemoveNeutralArithmeticPass())[1]  # x's rank unknown: 'one' might grow it
    m.graph.input[0].type.tensor_type.shape.dim.add().dim_param = "N"
    m.graph.input[0].type.tensor_type.shape.dim.add().dim_value = 3
    assert run_pass(m, RemoveNeutralArithmeticPass())[1]  # [N, 3] * ones(3) is [N, 3]


def test_mul_by_ones_and_add_zeros_tensors_go_when_broadcasting_changes_nothing():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x) => (float[2,3] y, float[2,2,3] z) <float[3] one = {1,1,1}, float[3] zero = {0,0,0},
                                                           float[2,1,1] grow = {1, 1}> {
          a = Mul(x, one)
          b = Add(zero, a)
          y = Sub(b, zero)
          z = Mul(x, grow)
        }""")
    result, modified = run_pass(onnx.shape_inference.infer_shapes(m), RemoveNeutralArithmeticPass())
    assert modified and ops(result) == ["Sub", "Mul"]  # Sub produces a graph output; Mul broadcasts


# ---------------------------------------------------------------- batched Gemm

def _projections():
    rng = np.random.default_rng(1)
    nodes, inits = [], [nh.from_array(np.array([2, 4, 2, 4], np.int64), "heads")]
    for p in "qk":
        inits += [nh.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"W{p}"),
                  nh.from_array(rng.standard_normal(8).astype(np.float32), f"B{p}")]
        nodes += [h.make_node("MatMul", ["x", f"W{p}"], [f"{p}0"], name=f"{p}_proj"),
                  h.make_node("Add", [f"{p}0", f"B{p}"], [f"{p}1"]),
                  h.make_node("Reshape", [f"{p}1", "heads"], [f"{p}"])]
    nodes.append(h.make_node("Add", ["q", "k"], ["y"]))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2, 4, 8])],
                         [h.make_tensor_value_info("y", F, [2, 4, 2, 4])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def test_projections_of_one_input_share_a_reshape_and_become_gemm():
    result, _ = optimize_and_compare(_projections(), rtol=1e-5)
    assert sorted(ops(result)) == ["Add", "Gemm", "Gemm", "Reshape", "Reshape", "Reshape"]
    assert {n.name for n in result.graph.node if n.op_type == "Gemm"} == {"q_proj", "k_proj"}


def test_batched_gemm_needs_reshape_readers():
    m = _projections()
    m.graph.node[-1].input[0] = "q1"  # the Add now reads q's projection directly
    m.graph.node[-1].input[1] = "q1"
    m.graph.output[0].type.tensor_type.shape.dim.pop()
    del m.graph.output[0].type.tensor_type.shape.dim[:]
    for d in (2, 4, 8):
        m.graph.output[0].type.tensor_type.shape.dim.add().dim_value = d
    result, _ = run_pass(onnx.shape_inference.infer_shapes(m), BatchedMatMulAddToGemmPass())
    assert ops(result).count("MatMul") == 1 and ops(result).count("Gemm") == 1


def test_no_rule_reads_an_initializer_that_is_also_a_graph_input():
    """IR 3 style: every weight is also an input, so it can be overridden: BatchNormalization stays."""
    m = _cnn_bn()
    m.graph.input.extend(h.make_tensor_value_info(t.name, F, list(t.dims)) for t in m.graph.initializer)
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Conv", "BatchNormalization", "Relu"]
    assert [i.name for i in result.graph.input] == [i.name for i in m.graph.input]


def test_absent_optional_inputs_are_kept_absent():
    m = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[3] x) => (float[3] y) <float hi = {1}, float[3] k = {-1, 0.5, 2}> {
          c = Clip(k, , hi)
          d = Clip(x, , hi)
          y = Add(c, d)
        }""")
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Clip", "Add"] and list(result.graph.node[0].input) == ["x", "", "hi"]


# ---------------------------------------------------------------- shape arithmetic

DYNAMIC_FLATTEN = """<ir_version: 8, opset_import: ["": 13]>
    g (float[N,3,4] x) => (float[N,12] y) {
      r = Relu(x)
      s = Shape(r)
      i0 = Constant<value=int64 {0}>()
      b = Gather<axis=0>(s, i0)
      ax = Constant<value=int64[1] {0}>()
      bu = Unsqueeze(b, ax)
      m1 = Constant<value=int64[1] {-1}>()
      shape = Concat<axis=0>(bu, m1)
      flat = Reshape(r, shape)
      i1 = Constant<value=int64 {1}>()
      c = Gather<axis=0>(s, i1)
      cf = Cast<to=1>(c)
      y = Div(flat, cf)
    }"""


def test_a_symbolic_batch_flatten_becomes_reshape_0_minus_1_and_static_dims_fold():
    result, report = optimize_and_compare(parse(DYNAMIC_FLATTEN))
    assert ops(result) == ["Relu", "Reshape", "Div"]
    shape = {t.name: nh.to_array(t) for t in result.graph.initializer}[result.graph.node[1].input[1]]
    np.testing.assert_array_equal(shape, [0, -1])
    assert report.folded["shape arithmetic"] >= 1


def test_reshape_keeps_a_computed_shape_whose_dim_comes_from_another_tensor():
    text = DYNAMIC_FLATTEN.replace("g (float[N,3,4] x)", "g (float[N,3,4] x, float[M] z)").replace(
        "s = Shape(r)", "s = Shape(r)\n      sz = Shape(z)").replace("b = Gather<axis=0>(s, i0)", "b = Gather<axis=0>(sz, i0)")
    result, _ = optimize_and_compare(parse(text.replace("=> (float[N,12] y)", "=> (float[N,12] y)")))
    assert "Concat" in ops(result)  # M is not known to equal N


def test_an_initializer_read_only_by_a_folded_away_branch_goes_in_one_run():
    """The untaken branch of a folded If keeps its nodes' reads of outer values: they are no
    reads, so what only they read goes in the same run (silero-vad grew 2.2 -> 3.1 MiB from them)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from rewriter.optimize import optimize_proto

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])

    def branch(op, weight, name):
        return helper.make_graph([helper.make_node(op, ["x", weight], ["out_" + name])], name, [],
                                 [helper.make_tensor_value_info("out_" + name, TensorProto.FLOAT, [4])])

    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True))),
         helper.make_node("If", ["cond"], ["y"], then_branch=branch("Add", "taken", "then"),
                          else_branch=branch("Mul", "untaken", "else"))],
        "g", [x], [y],
        [numpy_helper.from_array(np.arange(4, dtype=np.float32), "taken"),
         numpy_helper.from_array(np.arange(4, 8, dtype=np.float32), "untaken")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    once, _ = optimize_proto(model)
    assert [n.op_type for n in once.graph.node] == ["Add"]
    assert [i.name for i in once.graph.initializer] == ["taken"]
    twice, _ = optimize_proto(once)
    assert twice.SerializeToString() == once.SerializeToString()


def test_a_model_nothing_can_shrink_is_written_as_it_came():
    """A Flatten written as a Reshape adds its shape and shrinks nothing: the result would be a
    bigger file of as many nodes, so the input comes back as it was (a copy)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from rewriter.optimize import optimize_proto

    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("Gemm", ["f", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    result, report = optimize_proto(model)
    assert report.kept_input and result is not model
    assert result.SerializeToString() == model.SerializeToString()
    assert report.to_dict()["kept_input"] is True

    bigger = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    bigger.graph.node.append(helper.make_node("Identity", ["y"], ["z"]))
    bigger.graph.output[0].name = "z"
    shrunk, report = optimize_proto(bigger)  # one node fewer: the rewritten model, even if bytes grow
    assert not report.kept_input and len(shrunk.graph.node) < len(bigger.graph.node)


def test_a_folded_string_constant_is_written():
    """Identity of a string initializer folds into a string constant onnx_ir can serialize (it
    raised SerdeError), in the main graph and in a function (a Constant node there)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from rewriter.optimize import optimize_proto

    words = numpy_helper.from_array(np.array(["a", "bc"], dtype=object), "words")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["words"], ["y"]), helper.make_node("Relu", ["x"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])], [words])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result, _ = optimize_proto(model)
    onnx.checker.check_model(result, full_check=True)
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": np.zeros(2, np.float32)})[0]
    assert got.tolist() == ["a", "bc"]

    function = helper.make_function(
        "local", "f", ["a"], ["b", "w"],
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(["a", "bc"], dtype=object))),
         helper.make_node("Identity", ["c"], ["w"]), helper.make_node("Relu", ["a"], ["b"])],
        [helper.make_opsetid("", 17)])
    graph = helper.make_graph(
        [helper.make_node("f", ["x"], ["z", "y"], domain="local")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, functions=[function],
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    result, _ = optimize_proto(model)
    onnx.checker.check_model(result, full_check=True)
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": np.zeros(2, np.float32)})[0]
    assert got.tolist() == ["a", "bc"]
