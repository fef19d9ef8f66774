"""The values an unrolled RNN / GRU / LSTM computes with (``recurrent.py``): a weight or bias is
either a constant (sliced, transposed and summed here, in its own type, as the op's kernels
precompute them) or a value computed at run time (the same slices as Gather / Split / Transpose /
Add nodes), and the activation functions the ops name, written as ONNX ops.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["ACTIVATIONS", "Builder", "Val"]

# activation (lower case) -> (ONNX op or None, takes alpha, takes beta, default alpha, default beta):
# the defaults ONNX Runtime's kernels take (measured), those of the ONNX ops of the same name but for
# ThresholdedRelu (alpha 0, the op's is 1), Affine and ScaledTanh (0 and 0: they compute 0)
ACTIVATIONS = {
    "relu": ("Relu", False, False, None, None),
    "tanh": ("Tanh", False, False, None, None),
    "sigmoid": ("Sigmoid", False, False, None, None),
    "affine": (None, True, True, 0.0, 0.0),
    "leakyrelu": ("LeakyRelu", True, False, 0.01, None),
    "thresholdedrelu": ("ThresholdedRelu", True, False, 0.0, None),
    "scaledtanh": (None, True, True, 0.0, 0.0),
    "hardsigmoid": ("HardSigmoid", True, True, 0.2, 0.5),
    "elu": ("Elu", True, False, 1.0, None),
    "softsign": ("Softsign", False, False, None, None),
    "softplus": ("Softplus", False, False, None, None),
}


@dataclasses.dataclass(frozen=True)
class Val:
    """A constant (``array``) or the name of a value computed at run time (``name``)."""

    array: np.ndarray | None = None
    name: str | None = None


class Builder:
    """Nodes and constants of one decomposition (``ctx``), in the compute type ``dtype``."""

    def __init__(self, ctx, dtype):
        self.ctx, self.dtype = ctx, np.dtype(dtype)

    def node(self, op: str, inputs, **attrs) -> str:
        return self.ctx.insert_before(op, list(inputs), **attrs).output[0]

    def nodes(self, op: str, inputs, count: int, **attrs) -> list[str]:
        return list(self.ctx.insert_before(op, list(inputs), count, **attrs).output)

    def const(self, value, hint: str = "rnn_const") -> str:
        return self.ctx.add_constant(hint, np.asarray(value))

    def ints(self, values) -> str:
        return self.ctx.ints_constant("rnn_ints", tuple(int(v) for v in values))

    def scalar(self, value: float) -> str:
        return self.const(np.array(value, dtype=self.dtype), "rnn_scalar")

    def name(self, v: Val) -> str:
        return v.name if v.name is not None else self.const(v.array, "rnn_weight")

    # ------------------------------------------------------------ values, constant or not

    def read(self, name: str) -> Val:
        value = self.ctx.constant(name)
        return Val(array=value) if value is not None else Val(name=name)

    def direction(self, v: Val, d: int, axis: int = 0) -> Val:
        """Index ``d`` of ``v`` along ``axis`` (the axis taken)."""
        if v.array is not None:
            return Val(array=np.take(v.array, d, axis=axis))
        index = self.const(np.array(d, dtype=np.int64), "rnn_index")
        return Val(name=self.node("Gather", [v.name, index], axis=axis))

    def transposed(self, v: Val) -> Val:
        """A 2-D ``v`` transposed."""
        if v.array is not None:
            return Val(array=np.ascontiguousarray(v.array.T))
        return Val(name=self.node("Transpose", [v.name], perm=[1, 0]))

    def split(self, v: Val, sizes: list[int], axis: int) -> list[Val]:
        """``v`` cut along ``axis`` into pieces of ``sizes``."""
        if v.array is not None:
            edges = np.cumsum([0, *sizes])
            return [Val(array=np.take(v.array, range(a, b), axis=axis)) for a, b in zip(edges[:-1], edges[1:])]
        return [Val(name=n) for n in self.nodes("Split", [v.name, self.ints(sizes)], len(sizes), axis=axis)]

    def add(self, a: Val, b: Val) -> Val:
        if a.array is not None and b.array is not None:
            return Val(array=(a.array + b.array).astype(self.dtype))
        return Val(name=self.node("Add", [self.name(a), self.name(b)]))

    def concat(self, parts: list[Val], axis: int) -> Val:
        if all(p.array is not None for p in parts):
            return Val(array=np.concatenate([p.array for p in parts], axis=axis))
        return Val(name=self.node("Concat", [self.name(p) for p in parts], axis=axis))

    # ------------------------------------------------------------ activations

    def activate(self, x: str, fn: tuple[str, float | None, float | None], clip: float | None) -> str:
        """``fn`` = (activation, alpha, beta) of ``x``, its input clipped to [-clip, clip] first."""
        if clip is not None:
            x = self.node("Clip", [x, self.scalar(-clip), self.scalar(clip)])
        kind, alpha, beta = fn
        op = ACTIVATIONS[kind][0]
        if kind == "affine":
            return self.node("Add", [self.node("Mul", [x, self.scalar(alpha)]), self.scalar(beta)])
        if kind == "scaledtanh":
            return self.node("Mul", [self.node("Tanh", [self.node("Mul", [x, self.scalar(beta)])]),
                                     self.scalar(alpha)])
        attrs = {}
        if ACTIVATIONS[kind][1]:
            attrs["alpha"] = float(alpha)
        if ACTIVATIONS[kind][2]:
            attrs["beta"] = float(beta)
        return self.node(op, [x], **attrs)
