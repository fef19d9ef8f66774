"""libsvm's pairwise coupling as ONNX Runtime writes it (``ml_common.h``: ``sigmoid_probability``,
``multiclass_probability``), operation for operation in float, for every row at once.

Each pair's score s gives r = clamp(1 - logistic(s * prob_a + prob_b), 1e-7, 1 - 1e-7) (std::max and
std::min's rules); Q from r as the kernel fills it; then up to 100 rounds of the kernel's iteration
in an ONNX Loop: every round recomputes Qp and pQp (sums left to right: CumSum), stops a row whose
largest |Qp - pQp| is below 0.005 / k (that row keeps its p from then on; the Loop ends when every
row has stopped), and otherwise updates p class after class as the kernel does. Only the logistic's
exp is the runtime's (ONNX Runtime's Exp against expf).

For a runtime without Loop (:mod:`rewriter.convert.lowering.avoid`: tract, TVM, LiteRT) the 100
rounds are written one after the other (``unrolled``): each round is the Loop body's nodes, and a
row that has stopped keeps its p through the rest (the same selection as the body's), so the result
is the Loop's bit for bit, for any input. The rounds after every row has stopped are computed and
discarded (the Loop skips them): all 100 are needed, as nothing bounds the rounds a row may take."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rewriter.convert.lowering import avoid, ml_post
from rewriter.convert.lowering.emit import BOOL, F32, I64, Emitter

__all__ = ["LOOPS", "coupling"]

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


class _Round(_Body):
    """An emitter for one unrolled round: the enclosing emitter's nodes and constants, names of its
    own (``PREFIX_rN_...``: fresh names stay quick among thousands of nodes)."""

    def __init__(self, outer: Emitter, n: int):
        super().__init__(outer)
        self.prefix = f"{outer.prefix}_r{n}"
        self.nodes = outer.nodes


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


def _q_rows(e: Emitter, q: str, k: int) -> list[tuple[str, str]]:
    """Per class i: (Q[i][.] [N, k], Q[i][i] [N, 1]); the same in every round."""
    rows = [e.op("Gather", [q, e.const(np.array(i, np.int64), hint="row")], axis=1) for i in range(k)]
    return [(row, _column(e, row, i)) for i, row in enumerate(rows)]


def _round(b: Emitter, q: str, rows: list, p: str, k: int):
    """One round for every row: (converged [N, 1], p after the kernel's updates [N, k])."""
    qp = b.squeeze(_last_sum(b, b.op("Mul", [q, b.unsqueeze(p, [1])]), 2), [2])  # [N, k]
    pqp = _last_sum(b, b.op("Mul", [p, qp]), 1)  # [N, 1]
    err = b.op("Abs", [b.op("Sub", [qp, pqp])])
    # the kernel's max_error (from 0, `error > max_error` skips NaN) < eps: no error >= eps, a NaN none
    far = b.op("GreaterOrEqual", [err, b.const(_F(0.005) / _F(k), hint="eps")])
    converged = b.op("Less", [b.reduce("ReduceMax", b.cast(far, F32), [1]), b.const(_F(0.5), hint="half")])
    one, two = b.const(_F(1), hint="one"), b.const(_F(2), hint="two")
    for i in range(k):
        row, qii = rows[i]
        qpi = _column(b, qp, i)
        diff = b.op("Div", [b.op("Add", [b.op("Neg", [qpi]), pqp]), qii])
        parts = b.columns(p, 1, k)
        parts[i] = b.op("Add", [parts[i], diff])
        p = b.concat(parts, 1)
        grow = b.op("Add", [one, diff])
        inner = b.op("Add", [b.op("Mul", [diff, qii]), b.op("Mul", [two, qpi])])
        pqp = b.op("Div", [b.op("Div", [b.op("Add", [pqp, b.op("Mul", [diff, inner])]), grow]), grow])
        qp = b.op("Div", [b.op("Add", [qp, b.op("Mul", [diff, row])]), grow])
        p = b.op("Div", [p, grow])
    return converged, p


def _tensor_info(name: str, elem: int, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _stop_or_step(b: Emitter, q: str, rows: list, p: str, done: str, k: int) -> tuple[str, str]:
    """One round as the Loop body writes it: (p after it, done after it)."""
    converged, p_next = _round(b, q, rows, p, k)
    done = b.op("Or", [done, converged])
    return b.select(done, p, p_next), done  # a stopped row keeps its p, -0.0 included


def _loop(e: Emitter, q: str, rows: list, p0: str, done0: str, k: int) -> str:
    b = _Body(e)
    names = [b.fresh(h) for h in ("iter", "cond", "p", "done")]
    p_out, done = _stop_or_step(b, q, rows, names[2], names[3], k)
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


def coupling(e: Emitter, scores: str, prob_a: np.ndarray, prob_b: np.ndarray, k: int,
             unrolled: bool | None = None) -> str:
    """[N, k] class probabilities from the [N, C] pair scores: through a Loop, or its rounds
    written out when ``unrolled`` (None: when the target lacks Loop, :func:`avoid.avoids`)."""
    q = _q_matrix(e, _pair_probabilities(e, scores, prob_a, prob_b), k)
    rows = _q_rows(e, q, k)
    n_rows = _rows(e, scores)
    p = e.op("Expand", [e.const(_F(1) / _F(k), hint="uniform"), e.op("Concat", [n_rows, e.ints([k])], axis=0)])
    unrolled = avoid.avoids(avoid.LOOP) if unrolled is None else unrolled
    # written out, a row's done flag is [N, k], the shape of what it selects (LiteRT's SELECT takes a
    # condition of a lower rank only when it is a scalar or one value per row of rank 1: measured)
    done = e.op("Expand", [e.const(np.zeros((), bool), hint="false"),
                           e.op("Concat", [n_rows, e.ints([k if unrolled else 1])], axis=0)])
    if not unrolled:
        return _loop(e, q, rows, p, done, k)
    for n in range(LOOPS):
        p, done = _stop_or_step(_Round(e, n), q, rows, p, done, k)
    return p
