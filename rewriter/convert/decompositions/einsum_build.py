"""The nodes of the Einsum decomposition (``einsum.py``): each operand is a :class:`Term`, a
value with one label per axis, and every step (diagonal, sum, transpose, product) makes a new
term by inserting one node (a few for a run-time shape) valid at opset 11.

- **Diagonal** of a label repeated ``r`` times in one term (static size ``n``): its axes are
  transposed last, flattened into one of ``n**r`` elements by Reshape (the other dims copied
  with ``0``), and Gather takes the elements ``i * (1 + n + ... + n**(r-1))``: a copy, exact.
- **Sum** over labels: ReduceSum with ``keepdims=0``.
- **Size-1 broadcast** of a contracted label (static size 1 in one operand only): the size-1 axis
  is squeezed out (the term is constant along that label) and the other operand summed over it
  first, as numpy and ONNX Runtime compute it (with an inf, ``sum(a * b)`` would be NaN where
  ``a * sum(b)`` is inf). Other labels broadcast in Mul and MatMul as in Einsum.
- **Product without a contraction**, or where one side has no free label: both terms are
  transposed into one label order, size-1 axes inserted (Unsqueeze) where the other has a label,
  multiplied with broadcasting (Mul), and the contracted labels summed (ReduceSum): the
  product is no larger than the larger operand then.
- **Contraction** otherwise: ``[batch, free, contracted]`` times ``[batch, contracted, free]``
  by MatMul, the free and contracted labels each merged into one axis by Reshape (none when a
  group is one label; with no batch label the left operand keeps its free axes, which MatMul
  broadcasts), and the result reshaped to one axis per label. Batch labels stay axes of their
  own: MatMul broadcasts them as Einsum does. A Reshape writes ``0`` for a dim it keeps, static
  sizes as they are, one unknown size as ``-1``, and takes more than one from
  ``Shape``/``Gather``/``ReduceProd``/``Concat`` at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

__all__ = ["Term", "TermBuilder", "broadcast_dim", "known_equal"]

_INT64 = onnx.TensorProto.INT64


@dataclass
class Term:
    """A value of the decomposition with one label per axis and what is known of each size."""

    name: str
    labels: list[str]
    dims: list  # per axis: a static size (int), a dim_param (str) or None (unknown)


def known_equal(a, b) -> bool:
    """Whether two sizes are known to be equal: the same static size or the same dim_param."""
    return a is not None and a == b


def broadcast_dim(a, b):
    """The size of a label after a product whose operands have sizes ``a`` and ``b`` (1 broadcasts)."""
    if a == 1:
        return b
    if b == 1 or known_equal(a, b) or isinstance(a, int):
        return a
    return b if isinstance(b, int) else None


def _order_changes(labels: list[str], order: list[str]) -> bool:
    return [x for x in order if x in labels] != list(labels)


def _unsqueezes(labels: list[str], order: list[str]) -> bool:
    present = [i for i, x in enumerate(order) if x in labels]
    return bool(present) and len(present) != len(order) - present[0]


class TermBuilder:
    """Inserts the nodes of the decomposition into ``ctx`` for values of ``elem_type``; the
    contraction uses MatMul only when ``matmul`` (the type allows it), else Mul and ReduceSum."""

    def __init__(self, ctx, elem_type: int, matmul: bool):
        self.ctx, self.elem, self.matmul = ctx, elem_type, matmul
        self._shapes: dict[str, str] = {}

    def _emit(self, op: str, inputs, labels, dims, elem=None, **attrs) -> Term:
        node = self.ctx.insert_before(op, inputs, 1, **attrs)
        out = node.output[0]
        self.ctx.set_type(out, onnx.helper.make_tensor_type_proto(elem or self.elem, list(dims)))
        return Term(out, list(labels), list(dims))

    # ------------------------------------------------------------ one term

    def transpose(self, t: Term, order: list[str]) -> Term:
        perm = [t.labels.index(x) for x in order]
        if perm == list(range(len(perm))):
            return t
        return self._emit("Transpose", [t.name], order, [t.dims[p] for p in perm], perm=perm)

    def reduce(self, t: Term, labels) -> Term:
        axes = [i for i, x in enumerate(t.labels) if x in labels]
        if not axes:
            return t
        keep = [i for i in range(len(t.labels)) if i not in axes]
        return self._emit("ReduceSum", [t.name], [t.labels[i] for i in keep], [t.dims[i] for i in keep],
                          axes=axes, keepdims=0)

    def squeeze(self, t: Term, labels) -> Term:
        axes = [i for i, x in enumerate(t.labels) if x in labels]
        if not axes:
            return t
        keep = [i for i in range(len(t.labels)) if i not in axes]
        return self._emit("Squeeze", [t.name], [t.labels[i] for i in keep], [t.dims[i] for i in keep], axes=axes)

    def align(self, t: Term, order: list[str]) -> Term:
        """``t`` transposed into ``order``'s relative order, with size-1 axes where ``order`` has
        labels ``t`` lacks (leading ones left to broadcasting)."""
        t = self.transpose(t, [x for x in order if x in t.labels])
        if not _unsqueezes(t.labels, order):
            return t
        first = next(i for i, x in enumerate(order) if x in t.labels)
        tail = order[first:]
        axes = [i for i, x in enumerate(tail) if x not in t.labels]
        dims = [t.dims[t.labels.index(x)] if x in t.labels else 1 for x in tail]
        return self._emit("Unsqueeze", [t.name], tail, dims, axes=axes)

    def diagonal(self, t: Term, label: str) -> Term:
        """The diagonal of ``label``, repeated in ``t`` with one static size (checked before)."""
        axes = [i for i, x in enumerate(t.labels) if x == label]
        others = [i for i in range(len(t.labels)) if i not in axes]
        n, r = t.dims[axes[0]], len(axes)
        moved = Term(t.name, t.labels, t.dims)
        perm = others + axes
        if perm != list(range(len(perm))):
            moved = self._emit("Transpose", [t.name], [t.labels[p] for p in perm], [t.dims[p] for p in perm],
                               perm=perm)
        k = len(others)
        labels, dims = [t.labels[i] for i in others] + [label], [t.dims[i] for i in others] + [n]
        shape = self.ctx.ints_constant("einsum_shape", tuple([0] * k + [n ** r]))
        if n == 1:
            return self._emit("Reshape", [moved.name, shape], labels, dims)
        flat = self._emit("Reshape", [moved.name, shape], labels[:-1] + ["#diag"], dims[:-1] + [n ** r])
        step = sum(n ** j for j in range(r))
        indices = self.ctx.add_constant("einsum_diagonal", np.arange(n, dtype=np.int64) * step)
        return self._emit("Gather", [flat.name, indices], labels, dims, axis=k)

    # ------------------------------------------------------------ reshapes

    def _shape_of(self, t: Term) -> str:
        if t.name not in self._shapes:
            self._shapes[t.name] = self._emit("Shape", [t.name], ["#rank"], [len(t.dims)], elem=_INT64).name
        return self._shapes[t.name]

    def reshape(self, t: Term, entries, labels, dims) -> Term:
        """``t`` reshaped so that output axis ``i`` is the product of the sizes ``entries[i]``,
        a list of ``(term, axis)`` (all of one term)."""
        values: list = []
        for i, factors in enumerate(entries):
            if len(factors) == 1 and factors[0][0] is t and factors[0][1] == i:
                values.append(0)
                continue
            sizes = [f.dims[axis] for f, axis in factors]
            if all(isinstance(d, int) for d in sizes):
                size = math.prod(sizes)
                if size == 0 and not (i < len(t.dims) and t.dims[i] == 0):
                    raise ValueError("a Reshape to a zero-size dim that is not copied (0 means 'copy' "
                                     "before opset 14)")
                values.append(size)
            else:
                values.append(None)
        unknown = [i for i, v in enumerate(values) if v is None]
        if unknown:
            values[unknown[-1]] = -1
        if len(unknown) <= 1:
            shape = self.ctx.ints_constant("einsum_shape", tuple(values))
        else:
            pieces, run = [], []
            for i, v in enumerate(values):
                if v is not None:
                    run.append(v)
                    continue
                if run:
                    pieces.append(self.ctx.ints_constant("einsum_shape", tuple(run)))
                    run = []
                source = entries[i][0][0]
                assert all(f is source for f, _ in entries[i])
                axes = tuple(axis for _, axis in entries[i])
                part = self._emit("Gather", [self._shape_of(source), self.ctx.ints_constant("einsum_axes", axes)],
                                  ["#dims"], [len(axes)], elem=_INT64, axis=0)
                if len(axes) > 1:
                    part = self._emit("ReduceProd", [part.name], ["#dims"], [1], elem=_INT64, axes=[0], keepdims=1)
                pieces.append(part.name)
            if run:
                pieces.append(self.ctx.ints_constant("einsum_shape", tuple(run)))
            shape = self._emit("Concat", pieces, ["#rank"], [len(values)], elem=_INT64, axis=0).name
        return self._emit("Reshape", [t.name, shape], labels, dims)

    # ------------------------------------------------------------ two terms

    def contract(self, a: Term, b: Term, later: set[str], final: list[str] | None) -> Term:
        """The product of ``a`` and ``b`` summed over the labels they share that ``later``
        (the output's and the remaining operands' labels) lacks. ``final``: the output's order
        when this is the last product (orders are chosen to save the last Transpose)."""
        # a contracted label of static size 1 on one side only: that side is constant along it,
        # so it is squeezed out and the other side summed first (as numpy and ONNX Runtime do)
        drop_a = [x for x in a.labels if x in b.labels and x not in later and a.dims[a.labels.index(x)] == 1
                  and b.dims[b.labels.index(x)] != 1]
        drop_b = [x for x in b.labels if x in a.labels and x not in later and b.dims[b.labels.index(x)] == 1
                  and a.dims[a.labels.index(x)] != 1]
        a, b = self.squeeze(a, drop_a), self.squeeze(b, drop_b)
        a = self.reduce(a, [x for x in a.labels if x not in b.labels and x not in later])
        b = self.reduce(b, [x for x in b.labels if x not in a.labels and x not in later])
        batch, contr, fa, fb = _classify(a.labels, b.labels, later)
        if self.matmul and contr and fa and fb:  # batch labels broadcast in MatMul as in Einsum
            unverified = [x for x in contr if not known_equal(a.dims[a.labels.index(x)], b.dims[b.labels.index(x)])]
            extra = unverified[1:]  # merged with another unverified size, a broadcast could hide: batch them
            contr = [x for x in contr if x not in extra]
            return self.reduce(self._matmul(a, b, batch + extra, contr, fa, fb, final), extra)
        return self._mul(a, b, contr, fa, fb, final)

    def _mul(self, a, b, contr, fa, fb, final) -> Term:
        candidates = [a.labels + fb, b.labels + fa]
        if final is not None:
            candidates.append(final + [x for x in a.labels if x in contr])

        def cost(order):
            kept = [x for x in order if x not in contr]
            return sum(_order_changes(t.labels, order) + _unsqueezes(t.labels, order) for t in (a, b)) + \
                (final is not None and kept != final)

        order = min(candidates, key=cost)
        x, y = self.align(a, order), self.align(b, order)
        dims = []
        for label in order:
            da = a.dims[a.labels.index(label)] if label in a.labels else 1
            db = b.dims[b.labels.index(label)] if label in b.labels else 1
            dims.append(broadcast_dim(da, db))
        return self.reduce(self._emit("Mul", [x.name, y.name], order, dims), contr)

    def _matmul(self, a, b, batch, contr, fa, fb, final) -> Term:
        def orders(t, labels):
            got = [[x for x in t.labels if x in labels]]
            if final is not None and set(labels) <= set(final):
                got.append([x for x in final if x in labels])
            return got

        def cost(plan):
            left, right, bo, co, fl, fr = plan
            n = _order_changes(left.labels, bo + fl + co) + _order_changes(right.labels, bo + co + fr)
            n += (len(contr) > 1 or (bool(bo) and len(fl) > 1)) + (len(contr) > 1 or len(fr) > 1)
            n += (bool(bo) and len(fl) > 1) or len(fr) > 1
            return n + (final is not None and bo + fl + fr != final)

        plans = []
        for left, right, fl, fr in ((a, b, fa, fb), (b, a, fb, fa)):
            for bo in orders(a, batch) + orders(b, batch):
                for co in [[x for x in a.labels if x in contr], [x for x in b.labels if x in contr]]:
                    for fl_o in orders(left, fl):
                        for fr_o in orders(right, fr):
                            plans.append((left, right, bo, co, fl_o, fr_o))
        left, right, bo, co, fl, fr = min(plans, key=cost)
        nb = len(bo)
        lt, rt = self.transpose(left, bo + fl + co), self.transpose(right, bo + co + fr)
        k_axes = [(lt, nb + len(fl) + i) for i in range(len(co))]
        k_dim = _product([lt.dims[ax] for _, ax in k_axes])
        if nb == 0:  # MatMul broadcasts the left operand's leading (free) axes
            lm = lt if len(co) == 1 else self.reshape(lt, [[(lt, i)] for i in range(len(fl))] + [k_axes],
                                                         fl + ["#K"], lt.dims[:len(fl)] + [k_dim])
            m_labels, m_dims = fl, lt.dims[:len(fl)]
        else:
            m_labels = ["#M"] if len(fl) > 1 else fl
            m_dims = [_product(lt.dims[nb:nb + len(fl)])]
            lm = lt if len(co) == 1 and len(fl) == 1 else self.reshape(
                lt, [[(lt, i)] for i in range(nb)] + [[(lt, nb + i) for i in range(len(fl))], k_axes],
                bo + m_labels + ["#K"], lt.dims[:nb] + m_dims + [k_dim])
        n_labels = ["#N"] if len(fr) > 1 else fr
        n_dims = [_product(rt.dims[nb + len(co):])]
        rm = rt if len(co) == 1 and len(fr) == 1 else self.reshape(
            rt, [[(rt, i)] for i in range(nb)] + [[(rt, nb + i) for i in range(len(co))],
                                                [(rt, nb + len(co) + j) for j in range(len(fr))]],
            bo + ["#K"] + n_labels, rt.dims[:nb] + [k_dim] + n_dims)
        batch_dims = [broadcast_dim(lt.dims[i], rt.dims[i]) for i in range(nb)]
        out = self._emit("MatMul", [lm.name, rm.name], bo + m_labels + n_labels, batch_dims + m_dims + n_dims)
        labels = bo + fl + fr
        if out.labels == labels:
            return out
        entries = [[(out, i)] for i in range(nb)] + [[(lt, nb + i)] for i in range(len(fl))] + \
            [[(rt, nb + len(co) + j)] for j in range(len(fr))]
        if nb == 0:
            entries[:len(fl)] = [[(out, i)] for i in range(len(fl))]
        dims = batch_dims + lt.dims[nb:nb + len(fl)] + rt.dims[nb + len(co):]
        return self.reshape(out, entries, labels, dims)


def _classify(la: list[str], lb: list[str], later: set[str]):
    """(batch, contracted, free in a, free in b) labels of a product of terms labelled ``la``
    and ``lb`` whose labels not in ``later`` and in one term only are summed out before."""
    batch = [x for x in la if x in lb and x in later]
    contr = [x for x in la if x in lb and x not in later]
    return batch, contr, [x for x in la if x not in lb and x in later], [x for x in lb if x not in la and x in later]


def _product(dims):
    if len(dims) == 1:
        return dims[0]
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None
