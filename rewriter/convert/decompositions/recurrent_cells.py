"""One step of RNN, GRU and LSTM in ONNX ops, for their unrolled form (``recurrent.py``): each cell
takes one direction's weights (``W`` [dirs, gates*H, I], ``R`` [dirs, gates*H, H], ``B``
[dirs, 2*gates*H], LSTM's ``P`` [dirs, 3*H]), computes ``X·W^T`` and the biases that add to it
for every step at once (:meth:`input_product`), then one step from a [1, batch, gates*H] slice
of it and the states (:meth:`step`). The equations are the ONNX operator docs', as ONNX Runtime
computes them: GRU's gates z, r, h (``linear_before_reset`` puts ``Rbh`` inside the reset
product), LSTM's i, o, f, c with peepholes (o's on the new cell state) and ``input_forget``
(f = 1 - i), ``clip`` on every gate's input before its activation.
"""

from __future__ import annotations

import dataclasses

from rewriter.convert.decompositions.recurrent_values import Builder, Val

__all__ = ["CELLS", "States"]


@dataclasses.dataclass
class States:
    """The hidden state (and LSTM's cell state), each [1, batch, hidden]."""

    h: str
    c: str | None = None


class _Cell:
    gates = 1

    def __init__(self, b: Builder, s, d: int, w: Val, r: Val, bias: Val | None, peep: Val | None):
        self.b, self.s, self.d = b, s, d
        self.funcs = s.funcs[d]
        hidden = s.hidden
        self.wt = b.transposed(b.direction(w, d))  # [I, gates*H]
        self.rt = b.transposed(b.direction(r, d))  # [H, gates*H]
        self.wb = self.rb = None
        if bias is not None:
            self.wb, self.rb = b.split(b.direction(bias, d), [self.gates * hidden] * 2, axis=0)
        self.peep = b.split(b.direction(peep, d), [hidden] * 3, axis=0) if peep is not None else None

    def input_bias(self) -> Val | None:
        """What adds to ``X·W^T`` for every step: both biases."""
        return None if self.wb is None else self.b.add(self.wb, self.rb)

    def input_product(self, x: str) -> str:
        b = self.b
        xw = b.node("MatMul", [x, b.name(self.wt)])
        bias = self.input_bias()
        return xw if bias is None else b.node("Add", [xw, b.name(bias)])

    def act(self, x: str, k: int) -> str:
        return self.b.activate(x, self.funcs[k], self.s.clip)


class _RNN(_Cell):
    gates = 1

    def step(self, xw: str, st: States) -> States:
        b = self.b
        return States(self.act(b.node("Add", [xw, b.node("MatMul", [st.h, b.name(self.rt)])]), 0))


class _GRU(_Cell):
    gates = 3

    def __init__(self, *args):
        super().__init__(*args)
        hidden, b = self.s.hidden, self.b
        self.rt_zr, self.rt_h = b.split(self.rt, [2 * hidden, hidden], axis=1)
        self.rbh = None if self.rb is None else b.split(self.rb, [2 * hidden, hidden], axis=0)[1]

    def input_bias(self) -> Val | None:
        """z and r: both biases; h: Wbh, and Rbh too unless linear_before_reset (then it is inside)."""
        if self.wb is None:
            return None
        hidden, b = self.s.hidden, self.b
        w_zr, w_h = b.split(self.wb, [2 * hidden, hidden], axis=0)
        r_zr, r_h = b.split(self.rb, [2 * hidden, hidden], axis=0)
        return b.concat([b.add(w_zr, r_zr), w_h if self.s.linear_before_reset else b.add(w_h, r_h)], axis=0)

    def step(self, xw: str, st: States) -> States:
        b, hidden = self.b, self.s.hidden
        x_zr, x_h = b.nodes("Split", [xw, b.ints([2 * hidden, hidden])], 2, axis=2)
        if self.s.linear_before_reset:
            h_zr, h_h = b.nodes("Split", [b.node("MatMul", [st.h, b.name(self.rt)]),
                                          b.ints([2 * hidden, hidden])], 2, axis=2)
        else:
            h_zr = b.node("MatMul", [st.h, b.name(self.rt_zr)])
        z, r = b.nodes("Split", [self.act(b.node("Add", [x_zr, h_zr]), 0), b.ints([hidden, hidden])], 2, axis=2)
        if self.s.linear_before_reset:
            if self.rbh is not None:
                h_h = b.node("Add", [h_h, b.name(self.rbh)])
            gate = b.node("Add", [x_h, b.node("Mul", [r, h_h])])
        else:
            gate = b.node("Add", [x_h, b.node("MatMul", [b.node("Mul", [r, st.h]), b.name(self.rt_h)])])
        candidate = self.act(gate, 1)
        keep = b.node("Sub", [b.scalar(1.0), z])  # H = (1 - z) * h + z * H_prev
        return States(b.node("Add", [b.node("Mul", [keep, candidate]), b.node("Mul", [z, st.h])]))


class _LSTM(_Cell):
    gates = 4

    def step(self, xw: str, st: States) -> States:
        b, hidden = self.b, self.s.hidden
        pre = b.node("Add", [xw, b.node("MatMul", [st.h, b.name(self.rt)])])
        i, o, f, c = b.nodes("Split", [pre, b.ints([hidden] * 4)], 4, axis=2)
        if self.peep is not None:
            p_i, p_o, p_f = (b.name(p) for p in self.peep)
            i = b.node("Add", [i, b.node("Mul", [p_i, st.c])])
            f = b.node("Add", [f, b.node("Mul", [p_f, st.c])])
        i = self.act(i, 0)
        f = b.node("Sub", [b.scalar(1.0), i]) if self.s.input_forget else self.act(f, 0)
        cell = b.node("Add", [b.node("Mul", [f, st.c]), b.node("Mul", [i, self.act(c, 1)])])
        if self.peep is not None:
            o = b.node("Add", [o, b.node("Mul", [p_o, cell])])
        o = self.act(o, 0)
        return States(b.node("Mul", [o, self.b.activate(cell, self.funcs[2], None)]), cell)


CELLS = {"RNN": _RNN, "GRU": _GRU, "LSTM": _LSTM}
