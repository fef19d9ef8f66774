"""The rewrites found on real exports: small ConstantOfShape folded, GatherElements folded,
identity Reshape / inference Dropout removed, Slices on disjoint axes merged, Reshape pairs
around element-wise ops removed, unit-dim reshapes around a Transpose folded into it.
Each one alone on a small onnx.helper model, compared with ONNX Runtime on the original,
then its edge cases (graph outputs, other readers, non-constant inputs, functions, subgraphs)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize.elementwise_reshapes import RemoveElementwiseReshapesPass
from rewriter.optimize.merge_slices import MergeSlicesPass
from rewriter.optimize.static_noops import RemoveStaticNoOpsPass
from rewriter.optimize.unit_reshapes import FoldUnitReshapesIntoTransposePass
from tests.optimize.common import ops, optimize_and_compare, run_pass

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def _i(name, values):
    return nh.from_array(np.asarray(values, np.int64), name)


def _f(name, values):
    return nh.from_array(np.asarray(values, np.float32), name)


def _model(nodes, inputs, outputs, inits=(), opset=18, functions=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *[h.make_opsetid(f.domain, 1) for f in functions]],
                     functions=list(functions))
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _vi(name, shape, dtype=F):
    return h.make_tensor_value_info(name, dtype, shape)


# ---------------------------------------------------------------- ConstantOfShape, GatherElements

def _legacy_expand(n=4):
    """torch legacy export of x.expand(1, 16, -1, -1): the -1s resolved at run time through
    ConstantOfShape/Mul/Equal/Where."""
    nodes = [h.make_node("ConstantOfShape", ["rank"], ["ones"], value=nh.from_array(np.array([1], np.int64))),
             h.make_node("Mul", ["ones", "m1"], ["neg"]),
             h.make_node("Equal", ["target", "neg"], ["eq"]),
             h.make_node("Where", ["eq", "ones", "target"], ["shape"]),
             h.make_node("Expand", ["x", "shape"], ["y"])]
    return _model(nodes, [_vi("x", [1, 1, 3, 3])], [_vi("y", [1, n, 3, 3])],
                  [_i("rank", [4]), _i("m1", -1), _i("target", [1, n, -1, -1])], opset=13)


def test_a_small_constant_of_shape_folds_and_the_expand_gets_a_constant_shape():
    result, _ = optimize_and_compare(_legacy_expand())
    assert ops(result) == ["Expand"]
    shape = {t.name: nh.to_array(t) for t in result.graph.initializer}[result.graph.node[0].input[1]]
    np.testing.assert_array_equal(shape, [1, 4, 1, 1])


def test_a_big_constant_of_shape_stays_a_node():
    m = _model([h.make_node("ConstantOfShape", ["s"], ["c"], value=nh.from_array(np.array([0.5], np.float32))),
                h.make_node("Add", ["x", "c"], ["y"])],
               [_vi("x", [64, 64])], [_vi("y", [64, 64])], [_i("s", [64, 64])])
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["ConstantOfShape", "Add"]


def test_gather_elements_of_constants_folds_like_onnx_runtime():
    """BERT's token_type_ids buffer: GatherElements(expand [1, 512], positions [1, 8], axis=1),
    a shape onnx.reference's own GatherElements fails on."""
    nodes = [h.make_node("GatherElements", ["buf", "pos"], ["tt"], axis=1),
             h.make_node("Gather", ["table", "tt"], ["e"], axis=0),
             h.make_node("Add", ["x", "e"], ["y"])]
    rng = np.random.default_rng(3)
    m = _model(nodes, [_vi("x", [1, 8, 4])], [_vi("y", [1, 8, 4])],
               [_i("buf", rng.integers(0, 2, (1, 512))), _i("pos", [list(range(3, 11))]),
                _f("table", rng.standard_normal((2, 4)))])
    result, report = optimize_and_compare(m)
    assert ops(result) == ["Add"] and report.folded["GatherElements"] == 1


def test_gather_elements_with_an_index_out_of_range_is_left_to_the_runtime():
    m = _model([h.make_node("GatherElements", ["buf", "pos"], ["g"], axis=1), h.make_node("Add", ["x", "g"], ["y"])],
               [_vi("x", [1, 2], I64)], [_vi("y", [1, 2], I64)], [_i("buf", [[1, 2, 3]]), _i("pos", [[0, 3]])])
    result, _ = run_pass(m, __import__("rewriter.optimize.constant_folding", fromlist=["x"]).FoldConstantsPass())
    assert ops(result) == ["GatherElements", "Add"]


# ---------------------------------------------------------------- identity Reshape, Dropout

def test_identity_reshapes_go_other_reshapes_and_graph_outputs_stay():
    nodes = [h.make_node("Reshape", ["x", "same"], ["a"], allowzero=1),   # [1, 8] -> [1, 8]
             h.make_node("Reshape", ["a", "copy"], ["b"]),                 # [0, -1]: the same dims
             h.make_node("Reshape", ["b", "flat"], ["c"]),                 # [8]: a real change
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Reshape", ["r", "flat"], ["y"])]                 # identity, but a graph output
    m = _model(nodes, [_vi("x", [1, 8])], [_vi("y", [8])], [_i("same", [1, 8]), _i("copy", [0, -1]), _i("flat", [8])])
    alone, _ = run_pass(m, RemoveStaticNoOpsPass())
    assert ops(alone) == ["Reshape", "Relu", "Reshape"]  # a, b gone; c changes the shape; y is an output
    result, _ = optimize_and_compare(m)
    assert [o.name for o in result.graph.output] == ["y"]


def test_identity_reshape_with_a_symbolic_dim_and_allowzero_zero():
    m = _model([h.make_node("Reshape", ["x", "s"], ["a"]), h.make_node("Relu", ["a"], ["y"])],
               [_vi("x", ["N", 8])], [_vi("y", ["N", 8])], [_i("s", [0, 8])])
    result, modified = run_pass(m, RemoveStaticNoOpsPass())
    assert modified and ops(result) == ["Relu"]
    m.graph.node[0].attribute.append(h.make_attribute("allowzero", 1))  # 0 is then a real 0
    assert not run_pass(m, RemoveStaticNoOpsPass())[1]


def test_inference_dropout_goes_unless_its_mask_is_read_or_training_mode_may_be_true():
    m = _model([h.make_node("Dropout", ["x"], ["d"], ratio=0.3), h.make_node("Relu", ["d"], ["y"])],
               [_vi("x", [2, 3])], [_vi("y", [2, 3])], opset=11)
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Relu"]
    mask = _model([h.make_node("Dropout", ["x"], ["d", "mask"]), h.make_node("Relu", ["d"], ["y"]),
                   h.make_node("Not", ["mask"], ["z"])],
                  [_vi("x", [2, 3])], [_vi("y", [2, 3]), _vi("z", [2, 3], onnx.TensorProto.BOOL)], opset=11)
    assert "Dropout" in ops(run_pass(mask, RemoveStaticNoOpsPass())[0])
    training = _model([h.make_node("Dropout", ["x", "r", "t"], ["d"]), h.make_node("Relu", ["d"], ["y"])],
                      [_vi("x", [2, 3]), _vi("t", [], onnx.TensorProto.BOOL)], [_vi("y", [2, 3])],
                      [_f("r", 0.5)], opset=13)
    assert "Dropout" in ops(run_pass(training, RemoveStaticNoOpsPass())[0])


def test_dropout_inside_a_function_and_identity_reshape_inside_an_if_branch():
    fn = h.make_function("local", "F", ["a"], ["o"],
                         [h.make_node("Dropout", ["a"], ["r"]), h.make_node("Neg", ["r"], ["o"])],
                         opset_imports=[h.make_opsetid("", 18)])
    then = h.make_graph([h.make_node("Reshape", ["x", "s2"], ["t0"]), h.make_node("Abs", ["t0"], ["t"])], "then", [],
                        [_vi("t", [2, 3])], [_i("s2", [2, 3])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e", [2, 3])])
    m = _model([h.make_node("F", ["x"], ["f"], domain="local"),
                h.make_node("If", ["c"], ["i"], then_branch=then, else_branch=other),
                h.make_node("Add", ["f", "i"], ["y"])],
               [_vi("x", [2, 3]), _vi("c", [], onnx.TensorProto.BOOL)], [_vi("y", [2, 3])], functions=[fn])
    result, _ = optimize_and_compare(m)
    assert [n.op_type for n in result.functions[0].node] == ["Neg"]
    branch = next(a.g for a in result.graph.node[1].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["Abs"]


# ---------------------------------------------------------------- Slices

def _two_slices(axes1=(2,), axes2=(3,), extra_reader=False):
    nodes = [h.make_node("Slice", ["x", "s0", "e", "a1", "st"], ["t"]),
             h.make_node("Slice", ["t", "s0", "e", "a2", "st"], ["y"])]
    outputs = [_vi("y", [1, 2, 3, 3] if set(axes1) != set(axes2) else [1, 2, 6, 2])]
    if extra_reader:
        nodes.append(h.make_node("Relu", ["t"], ["z"]))
        outputs.append(_vi("z", [1, 2, 3, 6]))
    return _model(nodes, [_vi("x", [1, 2, 6, 6])], outputs,
                  [_i("s0", [0]), _i("e", [2 ** 63 - 1]), _i("a1", list(axes1)), _i("a2", list(axes2)), _i("st", [2])])


def test_slices_on_disjoint_axes_become_one_slice():
    result, report = optimize_and_compare(_two_slices())
    assert ops(result) == ["Slice"] and report.fused >= 1
    node = result.graph.node[0]
    inits = {t.name: nh.to_array(t) for t in result.graph.initializer}
    np.testing.assert_array_equal(inits[node.input[3]], [2, 3])
    assert node.output[0] == "y"


def test_negative_axes_merge_with_a_known_rank_same_axis_and_shared_results_do_not():
    result, _ = optimize_and_compare(_two_slices(axes1=(-2,)))
    assert ops(result) == ["Slice"]
    assert run_pass(_two_slices(axes1=(3,)), MergeSlicesPass())[1] is False  # same axis
    assert run_pass(_two_slices(extra_reader=True), MergeSlicesPass())[1] is False  # t is read twice


def test_slices_merge_inside_a_function_with_constant_nodes():
    fn = h.make_function("local", "F", ["a"], ["o"],
                         [h.make_node("Constant", [], [n], value=_i(n, v)) for n, v in
                          (("s0", [0]), ("e", [4]), ("a1", [0]), ("a2", [1]))] +
                         [h.make_node("Slice", ["a", "s0", "e", "a1"], ["t"]), h.make_node("Slice", ["t", "s0", "e", "a2"], ["o"])],
                         opset_imports=[h.make_opsetid("", 18)])
    m = _model([h.make_node("F", ["x"], ["y"], domain="local")], [_vi("x", [6, 6])], [_vi("y", [4, 4])], functions=[fn])
    result, _ = optimize_and_compare(m)
    assert [n.op_type for n in result.functions[0].node].count("Slice") == 1


# ---------------------------------------------------------------- Reshape pairs around element-wise ops

def _gelu_between_reshapes(bias=None, extra_reader=False):
    """GPT-2's MLP in a dynamo export: Gemm [8, 16] -> Reshape [1, 8, 16] -> tanh GELU -> Reshape [8, 16]."""
    nodes = [h.make_node("Gemm", ["x", "w"], ["g"]), h.make_node("Reshape", ["g", "up"], ["v"]),
             h.make_node("Mul", ["v", "half"], ["m"]), h.make_node("Pow", ["v", "three"], ["p"]),
             h.make_node("Mul", ["p", "k"], ["pk"]), h.make_node("Add", ["v", "pk"], ["s"]),
             h.make_node("Tanh", ["s"], ["t"]), h.make_node("Add", ["t", bias or "one"], ["t1"]),
             h.make_node("Mul", ["m", "t1"], ["gelu"]), h.make_node("Reshape", ["gelu", "down"], ["flat"]),
             h.make_node("Gemm", ["flat", "w2"], ["y"])]
    outputs = [_vi("y", [8, 4])]
    if extra_reader:
        outputs.append(_vi("t", [1, 8, 16]))
    rng = np.random.default_rng(4)
    inits = [_f("w", rng.standard_normal((4, 16))), _f("w2", rng.standard_normal((16, 4))), _i("up", [1, 8, 16]),
             _i("down", [-1, 16]), _f("half", 0.5), _f("three", 3.0), _f("k", [0.044715]), _f("one", 1.0),
             _f("bias", rng.standard_normal(16))]
    return _model(nodes, [_vi("x", [8, 4])], outputs, inits)


def test_reshapes_around_element_wise_ops_with_scalar_constants_go():
    result, _ = optimize_and_compare(_gelu_between_reshapes())
    assert "Reshape" not in ops(result)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in result.graph.value_info}
    assert shapes.get("gelu", [8, 16]) == [8, 16]


def test_reshapes_stay_with_a_per_element_constant_or_a_region_value_read_elsewhere():
    assert not run_pass(_gelu_between_reshapes(bias="bias"), RemoveElementwiseReshapesPass())[1]
    assert not run_pass(_gelu_between_reshapes(extra_reader=True), RemoveElementwiseReshapesPass())[1]


# ---------------------------------------------------------------- unit-dim reshapes around a Transpose

def test_reshape_transpose_reshape_on_unit_dims_becomes_one_transpose():
    """Dynamo's k.transpose(-2, -1): [1, 2, 8, 16] -> [2, 8, 16] -> perm (0, 2, 1) -> [1, 2, 16, 8]."""
    nodes = [h.make_node("Reshape", ["x", "s1"], ["a"]), h.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1]),
             h.make_node("Reshape", ["b", "s2"], ["c"]), h.make_node("Relu", ["c"], ["y"])]
    m = _model(nodes, [_vi("x", [1, 2, 8, 16])], [_vi("y", [1, 2, 16, 8])], [_i("s1", [-1, 8, 16]), _i("s2", [1, 2, 16, 8])])
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Transpose", "Relu"]
    assert list(result.graph.node[0].attribute[0].ints) == [0, 1, 3, 2] and result.graph.node[0].output[0] == "c"


def test_unsqueeze_transpose_squeeze_becomes_one_transpose():
    """torch's unflatten + select of packed q/k/v: [7, 2, 3, 32] -> [1, 7, 2, 3, 32] -> [3, 7, 2, 1, 32] -> [3, 7, 2, 32]."""
    nodes = [h.make_node("Unsqueeze", ["x", "zero"], ["u"]), h.make_node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4]),
             h.make_node("Squeeze", ["t", "three"], ["y"]), h.make_node("Neg", ["y"], ["z"])]
    m = _model(nodes, [_vi("x", [7, 2, 3, 32])], [_vi("z", [3, 7, 2, 32])], [_i("zero", [0]), _i("three", [3])])
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Transpose", "Neg"]


def test_a_reshape_that_merges_dims_is_not_a_unit_reshape():
    nodes = [h.make_node("Reshape", ["x", "s1"], ["a"]), h.make_node("Transpose", ["a"], ["b"], perm=[1, 0]),
             h.make_node("Reshape", ["b", "s2"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [4, 2, 3])], [_i("s1", [6, 4]), _i("s2", [4, 2, 3])])
    m = onnx.shape_inference.infer_shapes(m)
    assert not run_pass(m, FoldUnitReshapesIntoTransposePass())[1]
    optimize_and_compare(m)
    optimize_and_compare(m)


# ---------------------------------------------------------------- nearest upsample undone by a strided Slice

def _upsample_subsample(mode="nearest", coord="asymmetric", nearest="floor", start=0, step=2, scale=2.0):
    """F.interpolate(x, scale_factor=2, mode="nearest")[:, :, ::2, ::2], as torch exports it."""
    resize = h.make_node("Resize", ["x", "", "scales"], ["u"], mode=mode, coordinate_transformation_mode=coord,
                         nearest_mode=nearest)
    nodes = [resize, h.make_node("Slice", ["u", "st", "en", "ax", "sp"], ["s"]), h.make_node("Relu", ["s"], ["y"])]
    n = int(4 * scale)
    kept = len(range(n)[start::step])
    return _model(nodes, [_vi("x", [1, 2, 4, 4])], [_vi("y", [1, 2, kept, kept])],
                  [_f("scales", [1, 1, scale, scale]), _i("st", [start, start]), _i("en", [2 ** 63 - 1] * 2),
                   _i("ax", [2, 3]), _i("sp", [step, step])], opset=13)


def test_a_strided_slice_that_undoes_a_nearest_upsample_goes_with_it():
    for coord, nearest, start in (("asymmetric", "floor", 0), ("asymmetric", "floor", 1),
                                  ("half_pixel", "round_prefer_floor", 0), ("pytorch_half_pixel", "round_prefer_ceil", 1)):
        result, _ = optimize_and_compare(_upsample_subsample(coord=coord, nearest=nearest, start=start))
        assert ops(result) == ["Relu"], (coord, nearest, start)


def test_upsample_stays_when_the_slice_picks_other_elements_or_the_mode_interpolates():
    for model in (_upsample_subsample(step=1), _upsample_subsample(mode="linear"),
                  _upsample_subsample(nearest="ceil", start=1), _upsample_subsample(scale=3.0, step=3)):
        result, _ = optimize_and_compare(model)
        assert "Resize" in ops(result)


def test_a_transpose_inside_a_subgraph_is_not_pulled_out():
    then = h.make_graph([h.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1]), h.make_node("Reshape", ["b", "s2"], ["t"])],
                        "then", [], [_vi("t", [1, 2, 16, 8])], [_i("s2", [1, 2, 16, 8])])
    other = h.make_graph([h.make_node("Transpose", ["x"], ["e"], perm=[0, 1, 3, 2])], "else", [], [_vi("e", [1, 2, 16, 8])])
    m = _model([h.make_node("Reshape", ["x", "s1"], ["a"]),
                h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
               [_vi("x", [1, 2, 8, 16]), _vi("c", [], onnx.TensorProto.BOOL)], [_vi("y", [1, 2, 16, 8])],
               [_i("s1", [-1, 8, 16])])
    m = onnx.shape_inference.infer_shapes(m)
    assert not run_pass(m, FoldUnitReshapesIntoTransposePass())[1]
    optimize_and_compare(m)


# ---------------------------------------------------------------- shape vectors of dynamic-batch exports

_DYNAMIC_HEADS = """<ir_version: 8, opset_import: ["": 17]>
    g (float[N,8] x) => (float[M,2] y) {
      s = Shape(x)
      zero = Constant<value=int64 {0}>()
      b = Gather<axis=0>(s, zero)
      four = Constant<value=int64 {4}>()
      m = Mul(b, four)
      ax = Constant<value=int64[1] {0}>()
      u = Unsqueeze(m, ax)
      two = Constant<value=int64[1] {2}>()
      shape = Concat<axis=0>(u, two)
      r = Reshape(x, shape)
      y = Relu(r)
    }"""


def test_one_run_time_element_of_a_reshape_shape_becomes_minus_one():
    """torch legacy export with a dynamic batch: Reshape(x, [N * 4, 2]) is Reshape(x, [-1, 2])."""
    result, _ = optimize_and_compare(onnx.parser.parse_model(_DYNAMIC_HEADS))
    assert ops(result) == ["Reshape", "Relu"]
    shape = {t.name: nh.to_array(t) for t in result.graph.initializer}[result.graph.node[0].input[1]]
    np.testing.assert_array_equal(shape, [-1, 2])


def test_minus_one_is_not_used_next_to_a_dim_that_may_be_zero_at_run_time():
    """[N, N * 4 / N, 2]: the copied N could be 0, so the run-time element stays computed."""
    text = _DYNAMIC_HEADS.replace("float[N,8] x) => (float[M,2] y)", "float[N,8] x) => (float[N,4,2] y)").replace(
        "u = Unsqueeze(m, ax)", "q = Div(m, b)\n      u = Unsqueeze(q, ax)\n      n1 = Unsqueeze(b, ax)").replace(
        "shape = Concat<axis=0>(u, two)", "shape = Concat<axis=0>(n1, u, two)")
    result, _ = optimize_and_compare(onnx.parser.parse_model(text))
    assert "Concat" in ops(result)


def test_a_slice_of_a_shape_is_followed():
    m = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 17]>
        g (float[N,3,4] x) => (float[N,12] y) {
          s = Shape(x)
          st = Constant<value=int64[1] {0}>()
          en = Constant<value=int64[1] {1}>()
          head = Slice(s, st, en)
          m1 = Constant<value=int64[1] {-1}>()
          shape = Concat<axis=0>(head, m1)
          y0 = Reshape(x, shape)
          y = Relu(y0)
        }""")
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Reshape", "Relu"]


def test_upsample_subsample_and_unit_reshapes_with_a_symbolic_batch():
    m = _upsample_subsample(coord="half_pixel", nearest="round_prefer_floor")
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Relu"]
    nodes = [h.make_node("Unsqueeze", ["x", "zero"], ["u"]), h.make_node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4]),
             h.make_node("Squeeze", ["t", "three"], ["y"]), h.make_node("Neg", ["y"], ["z"])]
    m = _model(nodes, [_vi("x", [7, "N", 3, 32])], [_vi("z", [3, 7, "N", 32])], [_i("zero", [0]), _i("three", [3])])
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["Transpose", "Neg"]


def test_reshapes_around_element_wise_ops_with_a_symbolic_batch():
    """[M, 16] -> [-1, 2, 16] -> GELU -> [-1, 16]: the dims are matched by name."""
    m = _gelu_between_reshapes()
    inits = {t.name: t for t in m.graph.initializer}
    inits["up"].CopyFrom(_i("up", [-1, 2, 16]))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "M"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "M"
    m.graph.value_info.extend([_vi("g", ["M", 16]), _vi("v", ["B", 2, 16]), _vi("gelu", ["B", 2, 16]),
                               _vi("flat", ["M", 16])])
    alone, modified = run_pass(m, RemoveElementwiseReshapesPass())
    assert modified and "Reshape" not in ops(alone)
    result, _ = optimize_and_compare(m)
    assert "Reshape" not in ops(result)


def test_and_with_true_and_or_with_false_go_other_constants_stay():
    B = onnx.TensorProto.BOOL
    nodes = [h.make_node("And", ["t", "x"], ["a"]), h.make_node("Or", ["a", "f"], ["b"]), h.make_node("And", ["b", "mixed"], ["c"]),
             h.make_node("Not", ["c"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 3], B)], [_vi("y", [2, 3], B)],
               [nh.from_array(np.array(True), "t"), nh.from_array(np.zeros(3, bool), "f"),
                nh.from_array(np.array([True, False, True]), "mixed")])
    result, _ = optimize_and_compare(m)
    assert ops(result) == ["And", "Not"]


def test_chained_unsqueezes_merge_into_one():
    from rewriter.optimize.merge_unsqueezes import MergeUnsqueezesPass
    for a1, a2, opset in (([1, 2], [3], 18), ([0], [0], 18), ([1], [0], 18), ([1], [-1], 18), ([0], [2], 11)):
        if opset >= 13:
            nodes = [h.make_node("Unsqueeze", ["x", "a1"], ["u"]), h.make_node("Unsqueeze", ["u", "a2"], ["v"])]
            inits = [_i("a1", a1), _i("a2", a2)]
        else:
            nodes = [h.make_node("Unsqueeze", ["x"], ["u"], axes=a1), h.make_node("Unsqueeze", ["u"], ["v"], axes=a2)]
            inits = []
        nodes.append(h.make_node("Neg", ["v"], ["y"]))
        graph = h.make_graph(nodes, "g", [_vi("x", [3, 4])], [h.make_tensor_value_info("y", F, None)], inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        m.ir_version = 8
        m = onnx.shape_inference.infer_shapes(m)
        assert run_pass(m, MergeUnsqueezesPass())[1], (a1, a2)
        result, _ = optimize_and_compare(m)
        assert ops(result) == ["Unsqueeze", "Neg"], (a1, a2)
