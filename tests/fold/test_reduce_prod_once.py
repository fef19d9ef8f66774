"""In ``optimize``, each ReduceProd is decided by exactly one of the two folders: rewriter's exact
fold (step 1, on ModelProto) when its inputs are constant in the input, whether it folds it or
leaves it (an overflow under "skip"); the pipeline's FoldConstantsPass (on onnx_ir) only when its
inputs become constant through other folds.

Oracles: ONNX Runtime runs the original and the result on the same inputs (integers: equal);
exact Python integers say which products overflow.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter import fold, kernels
from rewriter.fold import SETTLED
from rewriter.optimize import pipeline

SMALL = np.array([[2, 3, 5]], np.int64)
BIG = np.array([[3037000500, 3037000500, 1]], np.int64)  # 3037000500^2 > 2^63 - 1
X = helper.make_tensor_value_info("x", TensorProto.INT64, [1])
Y = helper.make_tensor_value_info("y", TensorProto.INT64, [1])
OPSETS = [helper.make_opsetid("", 13), helper.make_opsetid("local", 1)]


def _rp(data: str, out: str = "p"):
    return helper.make_node("ReduceProd", [data], [out], name=f"rp_{out}", axes=[1], keepdims=0)


def _graph_model(nodes, inits, inputs=(X,)):
    return helper.make_model(helper.make_graph(nodes, "g", list(inputs), [Y], inits), opset_imports=OPSETS[:1])


def constant(data=SMALL):
    return _graph_model([_rp("d"), helper.make_node("Add", ["p", "x"], ["y"])], [numpy_helper.from_array(data, "d")])


def after_add(data=SMALL):
    """Its data is an Add of constants: constant only once the Add is folded."""
    return _graph_model([helper.make_node("Add", ["d", "d"], ["s"]), _rp("s"), helper.make_node("Add", ["p", "x"], ["y"])],
                        [numpy_helper.from_array(data, "d")])


def in_function(data=BIG):
    body = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(data, "c")), _rp("c"),
            helper.make_node("Add", ["p", "fx"], ["fy"])]
    fn = helper.make_function("local", "f", ["fx"], ["fy"], body, OPSETS[:1])
    graph = helper.make_graph([helper.make_node("f", ["x"], ["y"], domain="local")], "g", [X], [Y])
    return helper.make_model(graph, opset_imports=OPSETS, functions=[fn])


def in_branch(data=BIG):
    then = helper.make_graph([_rp("d", "t")], "then", [], [helper.make_tensor_value_info("t", TensorProto.INT64, [1])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.INT64, [1])])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=other)]
    return _graph_model(nodes, [numpy_helper.from_array(data, "d")], inputs=(X, cond))


def _feeds(model):
    names = {i.name for i in model.graph.input}
    return {"x": np.array([7], np.int64), **({"cond": np.array(True)} if "cond" in names else {})}


def _run(model):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, _feeds(model))[0]


def _reduce_prods(model) -> int:
    return sum(n.op_type == "ReduceProd" for body in (model.graph, *model.functions)
               for n in _nodes(body))


def _nodes(body):
    for node in body.node:
        yield node
        for attr in node.attribute:
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _nodes(g)


@pytest.fixture
def calls(monkeypatch):
    """Calls of the exact kernel, by who made them: the exact fold (inside ``fold_model``) or the
    pipeline (anything after it)."""
    counts = {"exact fold": 0, "pipeline": 0}
    inside = []

    def counting(fn):
        def wrapper(*args, **kwargs):
            counts["exact fold" if inside else "pipeline"] += 1
            return fn(*args, **kwargs)
        return wrapper

    def fold_model(*args, **kwargs):
        inside.append(True)
        try:
            return real_fold_model(*args, **kwargs)
        finally:
            inside.pop()

    real_fold_model = fold.fold_model
    monkeypatch.setattr(fold, "fold_model", fold_model)
    for name in ("reduce_prod", "reduce_prod_checked"):
        monkeypatch.setattr(kernels, name, counting(getattr(kernels, name)))
    return counts


CASES = [  # (model, int_overflow, who decides it, whether it is folded)
    pytest.param(constant(), "skip", "exact fold", True, id="constant"),
    pytest.param(after_add(), "skip", "pipeline", True, id="constant-after-a-fold"),
    pytest.param(constant(BIG), "skip", "exact fold", False, id="overflow-skip"),
    pytest.param(constant(BIG), "wrap", "exact fold", True, id="overflow-wrap"),
    pytest.param(after_add(BIG), "skip", "pipeline", False, id="overflow-after-a-fold"),
    pytest.param(in_function(), "skip", "exact fold", False, id="overflow-in-a-function"),
    pytest.param(in_function(SMALL), "skip", "exact fold", True, id="in-a-function"),
    pytest.param(in_branch(), "skip", "exact fold", False, id="overflow-in-an-if-branch"),
]


@pytest.mark.parametrize("model, int_overflow, decider, folds", CASES)
def test_each_reduce_prod_is_decided_by_exactly_one_folder(calls, model, int_overflow, decider, folds):
    result = rewriter.optimize_model(model, int_overflow=int_overflow)
    other = "pipeline" if decider == "exact fold" else "exact fold"
    assert calls[other] == 0 and calls[decider] >= 1, calls  # (the pipeline may retry a node it left)
    assert _reduce_prods(result) == (0 if folds else 1)
    if int_overflow == "wrap":  # ONNX Runtime saturates: the oracle is the exact product modulo 2^64
        product = int(np.prod([int(v) for v in BIG.reshape(-1)], dtype=object)) % (1 << 64)
        expected = product - (1 << 64) if product >= 1 << 63 else product
        np.testing.assert_array_equal(_run(result), np.array([expected + 7], np.int64))
    else:
        np.testing.assert_array_equal(_run(result), _run(model))


@pytest.mark.parametrize("model, marked", [
    pytest.param(constant(BIG), True, id="overflow"), pytest.param(in_function(), True, id="overflow-in-a-function"),
    pytest.param(in_branch(), True, id="overflow-in-an-if-branch"),
    pytest.param(after_add(BIG), False, id="not-constant-yet"), pytest.param(constant(), False, id="folded")])
def test_what_the_exact_fold_left_is_marked_for_the_pipeline(monkeypatch, model, marked):
    seen = []
    run = pipeline.run_pipeline

    def spy(ir_model, *args, **kwargs):
        graphs = [ir_model.graph, *ir_model.functions.values()]
        import onnx_ir as ir

        seen.extend((n.op_type, n.meta.get(SETTLED)) for g in graphs for n in ir.traversal.RecursiveGraphIterator(g)
                    if n.op_type == "ReduceProd")
        return run(ir_model, *args, **kwargs)

    monkeypatch.setattr(pipeline, "run_pipeline", spy)
    rewriter.optimize_model(model)
    if marked:
        assert len(seen) == 1 and "overflows" in seen[0][1]
    else:
        assert all(reason is None for _, reason in seen)


def test_the_models_are_valid():
    for case in CASES:
        onnx.checker.check_model(case.values[0], full_check=True)
