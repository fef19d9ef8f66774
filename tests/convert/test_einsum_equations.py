"""Einsum decomposed for opset 11 (and 9, 7): equations one by one, each converted model run in
ONNX Runtime against numpy.einsum (and the original Einsum-12 in ONNX Runtime against it too)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import rewriter
from rewriter.convert import convert_model
from tests.convert.support.einsum_util import NP, close, einsum_model, oracle, ort_run, random_feeds
from tests.oracle import assert_valid

EQUATIONS = [  # (equation, shapes)
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # matmul
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),  # batch matmul
    ("bij, bjk -> bik", [(2, 2, 3), (2, 3, 4)]),  # spaces
    ("ij->ji", [(3, 4)]),  # transpose
    ("ij->i", [(3, 4)]), ("ij->j", [(3, 4)]), ("ij->", [(3, 4)]),  # sums
    ("i,i", [(5,), (5,)]),  # inner product (implicit scalar)
    ("i,j->ij", [(3,), (4,)]),  # outer product
    ("ii", [(3, 3)]), ("ii->", [(4, 4)]),  # trace
    ("ii->i", [(3, 3)]), ("iii->i", [(3, 3, 3)]), ("jii->ij", [(2, 3, 3)]), ("ijij->ij", [(2, 3, 2, 3)]),  # diagonals
    ("...ii->...i", [(3, 5, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 6)]),  # ellipsis with broadcast
    ("...j,...j->...", [(1, 3), (2, 3)]), ("a...b,b...c->...ac", [(2, 3, 4), (4, 3, 5)]),
    ("i...->...", [(2, 3, 4)]), ("...,...->...", [(2, 1), (1, 3)]), ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]), ("ij...->", [(2, 3)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("i,i,i->", [(4,), (4,), (4,)]),  # an index in three operands
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 5)]),
    ("ij,ik,il->jkl", [(3, 2), (3, 4), (3, 5)]), ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("ba", [(2, 3)]), ("Ab,bA", [(2, 3), (3, 2)]), ("ji,kj", [(3, 2), (4, 3)]),  # implicit
    ("ij,ij->", [(2, 3), (2, 3)]), ("->", [()]), (",ij->ij", [(), (2, 3)]), ("ij,->ji", [(2, 3), ()]),  # scalars
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),  # attention
    ("bld,dhk->blhk", [(2, 3, 4), (4, 5, 6)]), ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),  # merged axes
    ("ibnd,jbnd->bnij", [(4, 2, 3, 5), (6, 2, 3, 5)]),  # Transformer-XL
    ("bij,bj->bi", [(2, 3, 4), (2, 4)]), ("bj,bjk->bk", [(2, 4), (2, 4, 5)]),  # matrix-vector
    ("ij,ij->ij", [(1, 3), (2, 3)]), ("ij,jk", [(2, 1), (3, 4)]), ("ij,jk->ik", [(2, 3), (1, 4)]),  # size-1 broadcast
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)]), ("ijk,jkl->il", [(2, 1, 4), (3, 4, 5)]),
    ("iij,jkk->ik", [(3, 3, 2), (2, 4, 4)]), ("ij,ji->", [(3, 4), (4, 3)]),
]


def _check(eq, shapes, target, elem=TensorProto.FLOAT):
    m = einsum_model(eq, shapes, elem)
    feeds = random_feeds(shapes, elem)
    expected = np.einsum(eq, *feeds.values())
    result, report = convert_model(m, target)
    assert_valid(result)
    assert all(o.version == target for o in result.opset_import if o.domain == "")
    assert "Einsum" not in [n.op_type for n in result.graph.node]
    close(expected, ort_run(result, feeds)[0], NP[elem])
    return m, feeds, expected, result


@pytest.mark.parametrize("eq,shapes", EQUATIONS, ids=[f"{e}|{s}" for e, s in EQUATIONS])
def test_equation_to_11(eq, shapes):
    m, feeds, expected, result = _check(eq, shapes, 11)
    close(expected, ort_run(m, feeds)[0], np.float32)  # the original in ONNX Runtime agrees with numpy
    for n in result.graph.node:  # no identity permutation, no Reshape to the shape it has
        if n.op_type == "Transpose":
            perm = list(onnx.helper.get_attribute_value(n.attribute[0]))
            assert perm != sorted(perm), (eq, perm)
    assert oracle(m, 11) is None


@pytest.mark.parametrize("eq,shapes", EQUATIONS[::3], ids=[f"{e}|{s}" for e, s in EQUATIONS[::3]])
@pytest.mark.parametrize("target", [7, 9])
def test_equation_to_older_opsets(eq, shapes, target):
    _check(eq, shapes, target)


@pytest.mark.parametrize("eq,ops", [
    ("ij,jk->ik", ["MatMul"]), ("bij,bjk->bik", ["MatMul"]), ("ij->ji", ["Transpose"]), ("ij->i", ["ReduceSum"]),
    ("ij->ij", ["Identity"]), ("->", ["Identity"]), ("i,j->ij", ["Unsqueeze", "Mul"]), ("ii->i", ["Reshape", "Gather"]),
    ("bhqd,bhkd->bhqk", ["Transpose", "MatMul"]), ("bhqk,bhkd->bhqd", ["MatMul"]),
    ("bld,dhk->blhk", ["Reshape", "MatMul", "Reshape"]), ("ij,kj->ki", ["Transpose", "MatMul"]),  # the operands swapped
    ("ij,ij->ij", ["Mul"]),
])
def test_node_counts(eq, ops):
    shapes = {"ij,jk->ik": [(2, 3), (3, 4)], "bij,bjk->bik": [(2, 2, 3), (2, 3, 4)], "ij->ji": [(2, 3)],
              "ij->i": [(2, 3)], "ij->ij": [(2, 3)], "->": [()], "i,j->ij": [(2,), (3,)], "ii->i": [(3, 3)],
              "bhqd,bhkd->bhqk": [(1, 2, 3, 4), (1, 2, 5, 4)], "bhqk,bhkd->bhqd": [(1, 2, 3, 5), (1, 2, 5, 4)],
              "bld,dhk->blhk": [(2, 3, 4), (4, 5, 6)], "ij,kj->ki": [(2, 3), (4, 3)], "ij,ij->ij": [(2, 3), (2, 3)]}[eq]
    _, _, _, result = _check(eq, shapes, 11)
    assert [n.op_type for n in result.graph.node] == ops


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE, TensorProto.FLOAT16])
@pytest.mark.parametrize("target", [7, 9, 11])
@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
                                       ("ii", [(3, 3)]), ("i,j->ij", [(2,), (3,)])])
def test_types(elem, target, eq, shapes):
    _, _, _, result = _check(eq, shapes, target, elem)
    is_int = elem in (TensorProto.INT32, TensorProto.INT64)
    if is_int and target < 9:  # MatMul takes integers from opset 9: Mul then ReduceSum below
        assert "MatMul" not in [n.op_type for n in result.graph.node]


def test_integer_products_wrap_as_einsum_does():
    m = einsum_model("ij,jk->ik", [(2, 3), (3, 2)], TensorProto.INT32)
    feeds = {"x0": np.full((2, 3), 2**20, np.int32), "x1": np.full((3, 2), 2**12 + 1, np.int32)}
    expected = np.einsum("ij,jk->ik", *feeds.values())
    for target in (7, 11):
        result, _ = convert_model(m, target)
        np.testing.assert_array_equal(ort_run(result, feeds)[0], expected)


def test_small_integers_without_arithmetic_convert():
    for eq, shapes in [("ij->ji", [(2, 3)]), ("ii->i", [(3, 3)]), ("ij->ij", [(2, 3)])]:
        m = einsum_model(eq, shapes, TensorProto.INT8)
        feeds = random_feeds(shapes, TensorProto.INT8)
        result, _ = convert_model(m, 11)
        np.testing.assert_array_equal(ort_run(result, feeds)[0], np.einsum(eq, *feeds.values()))
        assert oracle(m, 11) is None


def test_converted_model_runs_after_the_cli_with_verify(tmp_path):
    from rewriter import cli

    m = einsum_model("bhqd,bhkd->bhqk", [("B", 2, "Q", 4), ("B", 2, "K", 4)], out_rank=4)
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert cli.main(["convert", str(src), "-o", str(out), "--opset", "11", "--verify"]) == 0
    result = onnx.load(out)
    feeds = random_feeds([(3, 2, 5, 4), (3, 2, 6, 4)])
    close(np.einsum("bhqd,bhkd->bhqk", *feeds.values()), ort_run(result, feeds)[0], np.float32)


def test_runtime_target_without_einsum(tmp_path):
    profile = tmp_path / "npu.json"
    profile.write_text('{"name": "npu", "opsets": {"": 13}, "unsupported": {"": ["Einsum"]}}')
    m = einsum_model("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)], opset=13)
    result = rewriter.convert_opset(m, target=str(profile))
    assert "Einsum" not in [n.op_type for n in result.graph.node]
    feeds = random_feeds([(2, 2, 3), (2, 3, 4)])
    close(np.einsum("bij,bjk->bik", *feeds.values()), ort_run(result, feeds)[0], np.float32)


def test_in_a_function_and_an_if_branch():
    """Constants of a diagonal become Constant nodes in a function; If branches convert too."""
    from onnx import helper as h

    fn = h.make_function("local", "Diag", ["a"], ["y"], [h.make_node("Einsum", ["a"], ["y"], equation="bii->bi")],
                         [h.make_opsetid("", 12)])
    then = h.make_graph([h.make_node("Einsum", ["x0", "x1"], ["t"], equation="ij,jk->ik")], "then", [],
                        [h.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])])
    other = h.make_graph([h.make_node("Einsum", ["x0", "x1"], ["e"], equation="ij,jk->ki"),
                          h.make_node("Transpose", ["e"], ["e2"], perm=[1, 0])], "else", [],
                         [h.make_tensor_value_info("e2", TensorProto.FLOAT, [2, 4])])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
                      h.make_node("Diag", ["x2"], ["d"], domain="local")], "g",
                     [h.make_tensor_value_info("c", TensorProto.BOOL, []),
                      h.make_tensor_value_info("x0", TensorProto.FLOAT, [2, 3]),
                      h.make_tensor_value_info("x1", TensorProto.FLOAT, [3, 4]),
                      h.make_tensor_value_info("x2", TensorProto.FLOAT, [2, 3, 3])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
                      h.make_tensor_value_info("d", TensorProto.FLOAT, [2, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 12), h.make_opsetid("local", 1)], functions=[fn])
    m.ir_version = 8
    result, _ = convert_model(m, 11)
    assert_valid(result)
    assert [n.op_type for n in result.functions[0].node] == ["Constant", "Constant", "Reshape", "Gather"]
    feeds = random_feeds([(2, 3), (3, 4), (2, 3, 3)])
    for c in (True, False):
        y, d = ort_run(result, dict(feeds, c=np.array(c)))
        close(feeds["x0"] @ feeds["x1"], y, np.float32)
        close(np.einsum("bii->bi", feeds["x2"]), d, np.float32)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 0), (0, 4)]), ("ijk,jkl->il", [(2, 0, 3), (0, 3, 4)]),
                                       ("ii->i", [(0, 0)]), ("bij,bjk->bik", [(0, 2, 3), (0, 3, 4)])])
def test_zero_size_dims(eq, shapes):
    _check(eq, shapes, 11)


@pytest.mark.parametrize("eq,a,b", [
    ("ij,k->ik", [[0.0, 1.0]], [np.inf]),  # a label of one operand summed before the product
    ("ij,jk->ik", [[np.inf]], [[0.0], [1.0]]),  # a size-1 contracted label: the other side summed first
    ("ij,jk->ik", [[np.inf, 1.0]], [[0.0], [2.0]]),  # a plain contraction: the sum of the products (NaN)
])
def test_non_finite_values_as_numpy_and_onnx_runtime(eq, a, b):
    """With an inf, sum(a * b) and a * sum(b) differ (NaN against inf): the decomposition sums where
    numpy and ONNX Runtime's Einsum do."""
    a, b = np.array(a, np.float32), np.array(b, np.float32)
    m = einsum_model(eq, [a.shape, b.shape])
    result, _ = convert_model(m, 11)
    feeds = {"x0": a, "x1": b}
    expected = np.einsum(eq, a, b)
    np.testing.assert_array_equal(ort_run(m, feeds)[0], expected)
    np.testing.assert_array_equal(ort_run(result, feeds)[0], expected)
