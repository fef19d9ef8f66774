"""libsvm's pairwise coupling as ONNX Runtime writes it (``ml_common.h``: ``sigmoid_probability``,
``multiclass_probability``), operation for operation in float, for every row at once.

Each pair's score s gives r = clamp(1 - logistic(s * prob_a + prob_b), 1e-7, 1 - 1e-7) (std::max and
std::min's rules); Q from r as the kernel fills it; then up to 100 rounds of the kernel's iteration
in an ONNX Loop: every round recomputes Qp and pQp (sums left to right: CumSum), stops a row whose
largest |Qp - pQp| is below 0.005 / k (that row keeps its p from then on; the Loop ends when every
row has stopped), and otherwise updates p class after class as the kernel does. Only the logistic's
exp is the runtime's (ONNX Runtime's Exp against expf)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rewriter.convert.lowering import ml_post
from rewriter.convert.lowering.emit import BOOL, F32, I64, Emitter

__all__ = ["coupling", "LOOPS"]

LOOPS = 100  # multiclass_probability's iteration limit
_F = np.float32


class _Body(Emitter):
    """An emitter for a Loop body: its constants are the enclosing scope's (a body reads them from
    there), its nodes are its own."""

    def __init__(self, outer: Emitter):
        super().__init__(outer.writer, outer.prefix)
        self._outer = outer

    def const(self, value, dtype=None, hint: str = "const") -> str:
        return self._outer.const(value, dtype, hint)


def _pair_probabilities(e: Emitter, scores: str, prob_a, prob_b) -> str:
    """[N, C]: clamp(1 - ComputeLogistic(score * A + B)) per pair."""
    val = e.op("Add", [e.op("Mul", [scores, e.const(prob_a, hint="prob_a")]), e.const(prob_b, hint="prob_b")])
    val = e.op("Sub", [e.const(_F(1), hint="one"), ml_post.logistic(e, val)])
    lo, hi = e.const(_F(1e-7), hint="lo"), e.const(_F(1) - _F(1e-7), hint="hi")
    val = e.op("Where", [e.op("Less", [val, lo]), lo, val])  # std::max(val, 1e-7f)
    return e.op("Where", [e.op("Less", [hi, val]), hi, val])  # std::min(val, 1 - 1e-7f)


def _last_sum(e: Emitter, x: str, axis: int) -> str:
    """0 + x0 + x1 + ... along ``axis`` (kept as 1): the last CumSum, +0.0 added (the kernel's sum
    starts at +0.0, so it is never -0.0)."""
    sums = e.op("CumSum", [x, e.const(np.array(axis, np.int64), hint="axis")])
    last = e.op("Gather", [sums, e.const(np.array([-1], np.int64), hint="last1")], axis=axis)
    return e.op("Add", [last, e.const(_F(0), hint="zero")])


def _q_matrix(e: Emitter, r: str, k: int) -> str:
    """[N, k, k]: Q[i][i] = sum over j != i (in order) of r[j][i]^2, Q[i][j] = -r[j][i] r[i][j]."""
    pairs = [(i, j) for i in range(k - 1) for j in range(i + 1, k)]
    c = len(pairs)
    index = np.full((k, k), 2 * c, np.int64)  # the diagonal reads a zero
    for p, (i, j) in enumerate(pairs):
        index[i, j], index[j, i] = p, c + p  # r[i][j] = r_p, r[j][i] = 1 - r_p
    n_rows = _rows(e, r)
    zero = e.op("Expand", [e.const(np.zeros((1, 1), _F), hint="zero11"), e.op("Concat", [n_rows, e.ints([1])],
                                                                                axis=0)])
    table = e.op("Concat", [r, e.op("Sub", [e.const(_F(1), hint="one"), r]), zero], axis=1)
    rm = e.op("Gather", [table, e.const(index, hint="coupling_index")], axis=1)  # [N, k, k]: r[a][b]
    diag = _last_sum(e, e.op("Mul", [rm, rm]), 1)  # [N, 1, k]: Q[i][i] at column i
    rt = e.op("Transpose", [rm], perm=[0, 2, 1])
    off = e.op("Neg", [e.op("Mul", [rt, rm])])
    return e.op("Where", [e.const(np.eye(k, dtype=bool), hint="eye"), diag, off])


def _rows(e: Emitter, x: str) -> str:
    """[1] int64: x's first dimension."""
    return e.op("Slice", [e.op("Shape", [x]), e.ints([0]), e.ints([1])])


def _column(e: Emitter, x: str, i: int) -> str:
    return e.op("Gather", [x, e.const(np.array([i], np.int64), hint="col")], axis=1)


def _round(b: Emitter, q: str, p: str, k: int):
    """One round for every row: (converged [N, 1], p after the kernel's updates [N, k])."""
    qp = b.squeeze(_last_sum(b, b.op("Mul", [q, b.unsqueeze(p, [1])]), 2), [2])  # [N, k]
    pqp = _last_sum(b, b.op("Mul", [p, qp]), 1)  # [N, 1]
    err = b.op("Abs", [b.op("Sub", [qp, pqp])])
    err = b.op("Where", [b.op("IsNaN", [err]), b.const(_F(0), hint="zero"), err])  # `error > max_error` skips NaN
    top = b.reduce("ReduceMax", err, [1])
    converged = b.op("Less", [top, b.const(_F(0.005) / _F(k), hint="eps")])
    one, two = b.const(_F(1), hint="one"), b.const(_F(2), hint="two")
    for i in range(k):
        row = b.op("Gather", [q, b.const(np.array(i, np.int64), hint="row")], axis=1)  # [N, k]: Q[i][.]
        qii, qpi = _column(b, row, i), _column(b, qp, i)
        diff = b.op("Div", [b.op("Add", [b.op("Neg", [qpi]), pqp]), qii])
        parts = ([b.op("Slice", [p, b.ints([0]), b.ints([i]), b.ints([1])])] if i else []) + \
            [b.op("Add", [_column(b, p, i), diff])] + \
            ([b.op("Slice", [p, b.ints([i + 1]), b.ints([k]), b.ints([1])])] if i + 1 < k else [])
        p = b.concat(parts, 1)
        grow = b.op("Add", [one, diff])
        inner = b.op("Add", [b.op("Mul", [diff, qii]), b.op("Mul", [two, qpi])])
        pqp = b.op("Div", [b.op("Div", [b.op("Add", [pqp, b.op("Mul", [diff, inner])]), grow]), grow])
        qp = b.op("Div", [b.op("Add", [qp, b.op("Mul", [diff, row])]), grow])
        p = b.op("Div", [p, grow])
    return converged, p


def _tensor_info(name: str, elem: int, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def coupling(e: Emitter, scores: str, prob_a: np.ndarray, prob_b: np.ndarray, k: int) -> str:
    """[N, k] class probabilities from the [N, C] pair scores."""
    q = _q_matrix(e, _pair_probabilities(e, scores, prob_a, prob_b), k)
    n_rows = _rows(e, scores)
    p0 = e.op("Expand", [e.const(_F(1) / _F(k), hint="uniform"), e.op("Concat", [n_rows, e.ints([k])], axis=0)])
    done0 = e.op("Expand", [e.const(np.zeros((), bool), hint="false"), e.op("Concat", [n_rows, e.ints([1])], axis=0)])
    b = _Body(e)
    names = [b.fresh(h) for h in ("iter", "cond", "p", "done")]
    converged, p_next = _round(b, q, names[2], k)
    done = b.op("Or", [names[3], converged])
    p_out = b.select(done, names[2], p_next)  # a stopped row keeps its p, -0.0 included
    all_done = b.op("Cast", [b.reduce("ReduceMin", b.cast(done, TensorProto.INT32), [0, 1], keepdims=0)], to=BOOL)
    cond = b.op("Not", [all_done])
    body = helper.make_graph(
        b.nodes, b.fresh("coupling_body"),
        [_tensor_info(names[0], I64, []), _tensor_info(names[1], BOOL, []),
         _tensor_info(names[2], F32, [None, k]), _tensor_info(names[3], BOOL, [None, 1])],
        [_tensor_info(cond, BOOL, []), _tensor_info(p_out, F32, [None, k]), _tensor_info(done, BOOL, [None, 1])])
    trips = e.const(np.array(LOOPS, np.int64), hint="loops")
    start = e.const(np.array(True), hint="true")
    return e.op("Loop", [trips, start, p0, done0], n_out=2, body=body)[0]
