"""Einsum below 12 with symbolic dims (Reshape from 0/-1 or Shape at run time; broadcasting never
turned into a wrong value), the refusals with their reasons, and the oracle's route agreeing
with the converter on each."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

import rewriter
from rewriter.convert import convert_model
from tests.convert.support.einsum_util import close, einsum_model, oracle, ort_run, random_feeds
from tests.convert.support.expressible import why_inexpressible
from tests.oracle import assert_valid

SYMBOLIC = [  # (equation, declared shapes, shapes to run with)
    ("bhqd,bhkd->bhqk", [("B", "H", "Q", 8), ("B", "H", "K", 8)], [[(2, 3, 4, 8), (2, 3, 5, 8)]]),
    ("bld,dhk->blhk", [("B", "L", 4), (4, 5, 6)], [[(2, 3, 4), (4, 5, 6)], [(1, 7, 4), (4, 5, 6)]]),
    ("bxyk,bkz->bxyz", [("B", "X", "Y", 4), ("B", 4, 5)], [[(2, 3, 2, 4), (2, 4, 5)], [(1, 3, 2, 4), (3, 4, 5)]]),
    ("xjk,jky->xy", [("X", "J", "K"), ("J", "K", 3)], [[(2, 3, 4), (3, 4, 3)]]),  # one dim_param each: merged
    ("xjk,jky->xy", [("X", "J", "K"), ("P", "Q", 3)], [[(2, 3, 4), (3, 4, 3)]]),  # unrelated: one batched
    ("xab,ayb->xy", [("X", "A", 4), ("A2", "Y", 4)], [[(2, 3, 4), (3, 5, 4)]]),
    ("...ij,...jk->...ik", [("N", "M", 3, 4), ("N", "M", 4, 5)], [[(2, 3, 3, 4), (2, 3, 4, 5)],
                                                                  [(2, 1, 3, 4), (1, 3, 4, 5)]]),
    ("bi,bj->bij", [("B", 3), ("B2", 4)], [[(2, 3), (2, 4)], [(1, 3), (5, 4)]]),  # Mul broadcasts
    ("ij,jk->ik", [("I", "J"), ("J2", "K")], [[(2, 3), (3, 4)], [(2, 1), (3, 4), "fails"]]),
    ("ibnd,jbnd->bnij", [("I", "B", 2, 8), ("J", "B", 2, 8)], [[(3, 2, 2, 8), (5, 2, 2, 8)]]),
]


@pytest.mark.parametrize("eq,declared,runs", SYMBOLIC, ids=[s[0] + "|" + str(s[1]) for s in SYMBOLIC])
def test_symbolic_dims(eq, declared, runs):
    m = einsum_model(eq, declared, out_rank=np.einsum(eq, *[np.zeros(s) for s in runs[0]]).ndim)
    result, _ = convert_model(m, 11)
    assert_valid(result)
    for shapes in runs:
        if shapes[-1] == "fails":  # documented: a contracted label that broadcasts at run time is
            with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="MatMul dimension mismatch"):
                ort_run(result, random_feeds(shapes[:-1]))  # refused by MatMul, not computed wrong
            continue
        feeds = random_feeds(shapes, seed=len(shapes))
        close(np.einsum(eq, *feeds.values()), ort_run(result, feeds)[0], np.float32)
    assert oracle(m, 11) is None


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bqhd,bkhd->bhqk", [(2, 3, 2, 4), (2, 5, 2, 4)]),
                                       ("bld,dhk->blhk", [(2, 3, 4), (4, 5, 6)]), ("i,j->ij", [(3,), (4,)])])
def test_unknown_ranks_from_terms_without_ellipsis(eq, shapes):
    """ONNX's inference leaves a Reshape below 14 with a computed shape rankless (legacy exports at
    opset 12 are full of them): a term without an ellipsis still binds one label per axis."""
    m = einsum_model(eq, [tuple(f"d{i}_{j}" for j in range(len(s))) for i, s in enumerate(shapes)],
                     out_rank=len(eq.split("->")[1]))
    for i, s in enumerate(shapes):  # x_i -> Reshape(x_i, shape_i) -> Einsum: the Reshape's output has no rank
        m.graph.input.append(onnx.helper.make_tensor_value_info(f"s{i}", TensorProto.INT64, [len(s)]))
        m.graph.node.insert(0, onnx.helper.make_node("Reshape", [f"x{i}", f"s{i}"], [f"r{i}"]))
        m.graph.node[-1].input[i] = f"r{i}"
    inferred = onnx.shape_inference.infer_shapes(m)
    assert not [v for v in inferred.graph.value_info if v.name.startswith("r") and v.type.tensor_type.HasField("shape")]
    result, _ = convert_model(m, 11)
    assert_valid(result)
    feeds = random_feeds(shapes)
    feeds.update({f"s{i}": np.array(s, np.int64) for i, s in enumerate(shapes)})
    close(np.einsum(eq, *[feeds[f"x{i}"] for i in range(len(shapes))]), ort_run(result, feeds)[0], np.float32)
    types = {v.name: v.type for v in [*inferred.graph.input, *inferred.graph.value_info]}
    assert why_inexpressible(m.graph.node[-1], 12, 11, types.get, lambda name: None) is None


def test_run_time_shape_when_two_symbolic_sizes_meet():
    m = einsum_model("bxyk,bkz->bxyz", [("B", "X", "Y", 4), ("B", 4, 5)], out_rank=4)
    result, _ = convert_model(m, 11)
    assert "Shape" in [n.op_type for n in result.graph.node]  # [b, x, y, 5] from Shape(x) at run time


def test_a_run_time_broadcast_of_a_contracted_label_is_never_a_wrong_value():
    """Sizes (1, 6) against (6, 1) of two contracted labels multiply to the same count: merged into
    one axis they would pair the wrong elements. The decomposition keeps one as a batch axis, so
    ONNX Runtime either computes Einsum's value or refuses the shapes."""
    m = einsum_model("xjk,jky->xy", [("X", "J", "K"), ("P", "Q", 3)], out_rank=2)
    result, _ = convert_model(m, 11)
    computed = 0
    for shapes in ([(2, 1, 6), (6, 1, 3)], [(2, 6, 1), (1, 6, 3)], [(2, 1, 1), (6, 6, 3)], [(2, 3, 1), (3, 6, 3)],
                   [(2, 3, 6), (3, 1, 3)]):
        feeds = random_feeds(shapes)
        try:
            got = ort_run(result, feeds)[0]
        except ort.capi.onnxruntime_pybind11_state.Fail as e:
            assert "MatMul dimension mismatch" in str(e)
            continue
        close(np.einsum("xjk,jky->xy", *feeds.values()), got, np.float32)
        computed += 1
    assert computed == 2  # the second contracted label, a batch axis of MatMul, broadcasts as Einsum's


REFUSED = [  # (equation, shapes, element type, target, fragments of the reason)
    ("...ij,jk->...ik", [None, (3, 4)], TensorProto.FLOAT, 11, ["rank of input 'x0' is unknown and its term has an ellipsis"]),
    ("ii->i", [("N", "N")], TensorProto.FLOAT, 11, ["diagonal of i (repeated in term 0) needs one static size"]),
    ("ij,jk->ik", [(2, 3), (3, 4)], TensorProto.INT8, 11, ["needs Mul, which does not allow int8 at opset 11"]),
    ("ij->i", [(2, 3)], TensorProto.UINT8, 11, ["needs ReduceSum, which does not allow uint8 at opset 11"]),
    ("ij,jk->ik", [(2, 3), (4, 5)], TensorProto.FLOAT, 11, ["sizes [3, 4] of j do not broadcast"]),
    ("ij,jk->ii", [(2, 3), (3, 4)], TensorProto.FLOAT, 11, ["names 'i' more than once"]),
    ("ij,jk->iz", [(2, 3), (3, 4)], TensorProto.FLOAT, 11, ["names 'z', which no input term has"]),
    ("...i->i", [(2, 3)], TensorProto.FLOAT, 11, ["no '...' for the 1 dim(s)"]),
    ("ij,jk", [(2, 3)], TensorProto.FLOAT, 11, ["2 term(s) for 1 input(s)"]),
    ("ijk->i", [(2, 3)], TensorProto.FLOAT, 11, ["does not fit input 0 of rank 2"]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)], TensorProto.FLOAT, 11, ["cover [1, 2] dims"]),
    ("i1->i", [(2, 3)], TensorProto.FLOAT, 11, ["character '1'"]),
]


@pytest.mark.parametrize("eq,shapes,elem,target,fragments", REFUSED, ids=[r[0] + "|" + str(r[1]) for r in REFUSED])
def test_refused(eq, shapes, elem, target, fragments):
    m = einsum_model(eq, shapes, elem, out_rank=2)
    with pytest.raises(rewriter.RewriterError) as info:
        convert_model(m, target)
    message = str(info.value)
    for fragment in ["'e' (Einsum)", "Einsum decompose", *fragments]:
        assert fragment in message, (fragment, message)
    assert oracle(m, target) is not None  # the oracle calls it inexpressible too


def test_bfloat16_source_28_refused_below_13():
    m = einsum_model("ij->ji", [(2, 3)], TensorProto.BFLOAT16, opset=28)
    for target in (7, 11):
        with pytest.raises(rewriter.RewriterError, match="needs Transpose, which does not allow bfloat16"):
            convert_model(m, target)
        assert oracle(m, target) is not None


@pytest.mark.parametrize("target", [7, 8, 9, 10, 11])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT32, TensorProto.INT16,
                                  TensorProto.FLOAT16])
@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij->j", [(2, 3)]), ("ij->ji", [(2, 3)]),
                                       ("ii->i", [(3, 3)]), ("i,j->ij", [(2,), (3,)])])
def test_oracle_agrees_with_the_converter(target, elem, eq, shapes):
    """The route of tests/convert/support/routes_einsum.py, derived from onnx.defs, and the converter
    decide the same: converted exactly when expressible."""
    m = einsum_model(eq, shapes, elem)
    why = oracle(m, target)
    try:
        result, _ = convert_model(m, target)
    except rewriter.RewriterError as e:
        assert why is not None, str(e)
        return
    assert why is None, why
    assert_valid(result)
    feeds = random_feeds(shapes, elem)
    if elem != TensorProto.UINT32 or target >= 9:  # ONNX Runtime lacks some uint32 kernels of older opsets
        try:
            got = ort_run(result, feeds)[0]
        except ort.capi.onnxruntime_pybind11_state.NotImplemented:
            return
        close(np.einsum(eq, *feeds.values()), got, {TensorProto.FLOAT16: np.float16}.get(elem, np.float32))
