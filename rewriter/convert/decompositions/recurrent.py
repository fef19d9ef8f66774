"""RNN, GRU and LSTM (no function body in ONNX) unrolled over a static sequence length, for targets
that lack them (TVM 0.27) or run them only with constant inputs after the first (tract 0.23: a
``sequence_lens`` computed at run time).

Per direction, ``X·W^T`` (plus the biases that add to it) is one MatMul over every step, cut into
steps by one Split; each step is then the op's equations in ONNX ops (``recurrent_cells.py``):
a MatMul by ``R^T``, the gates' activations (``activations`` / ``activation_alpha`` /
``activation_beta`` / ``clip`` as ONNX Runtime reads them), the state update. The reverse
direction runs the steps from the last to the first. ``layout`` 1 is transposed to 0 and back.

``sequence_lens`` (constant or computed at run time): step ``t`` of a row counts only when
``t < len``; a step that does not count keeps the states (Where) and writes zeros to ``Y``, so
``Y_h`` / ``Y_c`` are the states after the row's last valid step, and the reverse direction,
which meets the padding first, starts from ``initial_h`` at the row's own last valid step. A row
of length 0 gets zero ``Y_h`` / ``Y_c``, as ONNX Runtime's kernels give. A length above the
sequence length is not checked (ONNX Runtime refuses it at run time).

Needs (else refused with the reason): the sequence length static (from the model's shapes, or
``--input-shape``; the refusal names the inputs to give) and at most :data:`MAX_STEPS` steps
over all directions; the input's rank 3; ``hidden_size`` given or read from a static ``W``; known
activations, as many as the op takes per direction (or per direction once, for both).
Exactness: the same operations as ONNX Runtime's kernels, the float sums of a gate
(``x·W + h·R + biases``) added in another order: equal within float roundoff.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from rewriter.convert.decompositions import decomposition
from rewriter.convert.decompositions.recurrent_cells import CELLS, States
from rewriter.convert.decompositions.recurrent_values import ACTIVATIONS, Builder, Val
from rewriter.graph.attributes import attribute_value

__all__ = ["MAX_STEPS", "OPSET"]

OPSET = 13
MAX_STEPS = 4096  # steps over all directions (the unrolled graph grows by ~15 nodes a step)

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULTS = {"RNN": ["tanh"], "GRU": ["sigmoid", "tanh"], "LSTM": ["sigmoid", "tanh", "tanh"]}
_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
          onnx.TensorProto.FLOAT16: np.float16}


@dataclasses.dataclass
class Spec:
    """One node's attributes, read and checked."""

    op: str
    hidden: int
    directions: list[str]
    layout: int
    clip: float | None
    funcs: list[list[tuple]]  # per direction: (activation, alpha, beta) per function
    linear_before_reset: int
    input_forget: int
    steps: int
    dtype: type


def _functions(ctx, op: str, directions: int) -> list[list[tuple]]:
    """Per direction, its activations with their alpha and beta, consumed in order by the
    functions that take them (ONNX's rule: defaults where the lists run out)."""
    names = [n.lower() for n in attribute_value(ctx.node, "activations", [], decode=True)] or \
        _DEFAULTS[op] * directions
    per = len(_DEFAULTS[op])
    if len(names) == per and directions == 2:
        names = names * 2
    if len(names) != per * directions:
        ctx.block(f"{len(names)} activations given where {op} takes {per} per direction ({directions})")
    alphas = list(attribute_value(ctx.node, "activation_alpha", []))
    betas = list(attribute_value(ctx.node, "activation_beta", []))
    funcs = []
    for name in names:
        if name not in ACTIVATIONS:
            ctx.block(f"the activation '{name}' is not one ONNX defines for {op}")
        _, takes_alpha, takes_beta, alpha, beta = ACTIVATIONS[name]
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        funcs.append((name, alpha, beta))
    return [funcs[k * per:(k + 1) * per] for k in range(directions)]


def _spec(ctx) -> Spec:
    node, op = ctx.node, ctx.node.op_type
    direction = attribute_value(node, "direction", "forward", decode=True)
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.block(f"direction '{direction}' is not one ONNX defines")
    directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    layout = int(attribute_value(node, "layout", 0))
    dims = ctx.shape(node.input[0])
    if dims is None or len(dims) != 3:
        ctx.block(f"the rank of input '{node.input[0]}' is {'unknown' if dims is None else len(dims)}, not 3")
    steps = dims[1 if layout else 0]
    if steps is None:
        from rewriter.targets.static_dims import dynamic_inputs

        inputs = ", ".join(dynamic_inputs(ctx.model)) or "the inputs"
        ctx.block(f"the sequence length (axis {1 if layout else 0} of input '{node.input[0]}') is not static, and "
                  f"the unrolled form needs it: give --input-shape NAME:DIMS for {inputs} (or --fix-dim SYMBOL=N)")
    if steps == 0 or steps * len(directions) > MAX_STEPS:
        ctx.block(f"a sequence of {steps} steps ({len(directions)} direction(s)) is not unrolled "
                  f"(from 1 to {MAX_STEPS} steps over all directions)")
    elem = ctx.elem_type(node.input[0])
    if elem not in _TYPES:
        ctx.block(f"the element type {onnx.TensorProto.DataType.Name(elem or 0).lower()} of input "
                  f"'{node.input[0]}' is not one {op} takes")
    hidden = attribute_value(node, "hidden_size")
    if hidden is None:
        w = ctx.shape(node.input[1])
        hidden = w[1] // _GATES[op] if w and w[1] else None
    if not hidden:
        ctx.block("hidden_size is not given and W's shape does not tell it")
    clip = attribute_value(node, "clip")
    return Spec(op, int(hidden), directions, layout, None if clip is None else float(clip),
                _functions(ctx, op, len(directions)), int(attribute_value(node, "linear_before_reset", 0)),
                int(attribute_value(node, "input_forget", 0)), int(steps), _TYPES[elem])


def _input(node, k: int) -> str:
    return node.input[k] if len(node.input) > k and node.input[k] else ""


def _masks(b: Builder, lens: str, steps: int) -> tuple[list[str], str]:
    """Per step t, the [1, batch, 1] bool ``t < len``; and ``0 < len`` (the rows with a valid step)."""
    lens = b.node("Unsqueeze", [lens, b.ints([0, 2])])
    ts = b.const(np.arange(steps, dtype=np.int32).reshape(steps, 1, 1), "rnn_steps")
    valid = b.node("Less", [ts, lens])
    masks = b.nodes("Split", [valid, b.ints([1] * steps)], steps, axis=0) if steps > 1 else [valid]
    return masks, b.node("Less", [b.const(np.array(0, dtype=np.int32), "rnn_zero"), lens])


def _zeros(b: Builder, x: str, hidden: int) -> str:
    """A [1, batch, hidden] zero state, the batch read from the time-major input ``x``."""
    batch = b.node("Gather", [b.node("Shape", [x]), b.ints([1])], axis=0)
    shape = b.node("Concat", [b.ints([1]), batch, b.ints([hidden])], axis=0)
    return b.node("ConstantOfShape", [shape], value=onnx.numpy_helper.from_array(np.zeros(1, dtype=b.dtype)))


def _initial(b: Builder, name: str, d: int, x: str, s: Spec) -> str:
    """Direction ``d``'s initial state as [1, batch, hidden] (layout 1 gives [batch, dirs, hidden])."""
    if not name:
        return _zeros(b, x, s.hidden)
    return b.node("Unsqueeze", [b.name(b.direction(b.read(name), d, axis=s.layout)), b.ints([0])])


def _direction(b: Builder, s: Spec, d: int, x: str, masks, valid) -> tuple[str | None, list[str]]:
    """One direction unrolled: (its Y as [T, 1, batch, hidden] or None when unused, its final states)."""
    node = b.ctx.node
    cell = CELLS[s.op](b, s, d, b.read(node.input[1]), b.read(node.input[2]),
                       b.read(_input(node, 3)) if _input(node, 3) else None,
                       b.read(_input(node, 7)) if s.op == "LSTM" and _input(node, 7) else None)
    xw = cell.input_product(x)
    pieces = b.nodes("Split", [xw, b.ints([1] * s.steps)], s.steps, axis=0) if s.steps > 1 else [xw]
    states = States(_initial(b, _input(node, 5), d, x, s),
                    _initial(b, _input(node, 6), d, x, s) if s.op == "LSTM" else None)
    order = range(s.steps) if s.directions[d] == "forward" else range(s.steps - 1, -1, -1)
    ys: dict[int, str] = {}
    for t in order:
        new = cell.step(pieces[t], states)
        if masks is not None:
            ys[t] = b.node("Where", [masks[t], new.h, b.scalar(0.0)])
            new = States(b.node("Where", [masks[t], new.h, states.h]),
                         None if new.c is None else b.node("Where", [masks[t], new.c, states.c]))
        else:
            ys[t] = new.h
        states = new
    y = None
    if node.output and node.output[0]:
        whole = b.node("Concat", [ys[t] for t in range(s.steps)], axis=0) if s.steps > 1 else ys[0]
        y = b.node("Unsqueeze", [whole, b.ints([1])])
    finals = [states.h] + ([states.c] if states.c is not None else [])
    if valid is not None:  # a row of length 0: zero states, as ONNX Runtime gives
        finals = [b.node("Where", [valid, f, b.scalar(0.0)]) for f in finals]
    return y, finals


def _unrolled(node: onnx.NodeProto, ctx) -> None:
    s = _spec(ctx)
    b = Builder(ctx, s.dtype)
    x = node.input[0] if not s.layout else b.node("Transpose", [node.input[0]], perm=[1, 0, 2])
    lens = _input(node, 4)
    masks = valid = None
    if lens:
        known = ctx.constant(lens)
        if known is None or not np.all(known == s.steps):
            masks, valid = _masks(b, lens, s.steps)
    ys, finals = [], []
    for d in range(len(s.directions)):
        y, states = _direction(b, s, d, x, masks, valid)
        ys.append(y)
        finals.append(states)
    results = []
    if ys[0] is not None:
        y = b.node("Concat", ys, axis=1) if len(ys) > 1 else ys[0]
        results.append((0, b.node("Transpose", [y], perm=[2, 0, 1, 3]) if s.layout else y))
    for k in range(len(finals[0])):
        state = b.node("Concat", [f[k] for f in finals], axis=0) if len(finals) > 1 else finals[0][k]
        results.append((k + 1, b.node("Transpose", [state], perm=[1, 0, 2]) if s.layout else state))
    for k, value in results:
        if len(node.output) > k and node.output[k]:
            ctx.insert_before("Identity", [value], [node.output[k]])
    for name in node.input:
        if name:
            ctx.maybe_unused(name)
    ctx.remove()


@decomposition("RNN", OPSET)
def rnn_unrolled(node: onnx.NodeProto, ctx) -> None:
    """RNN unrolled over its static sequence length (see the module doc)."""
    _unrolled(node, ctx)


@decomposition("GRU", OPSET)
def gru_unrolled(node: onnx.NodeProto, ctx) -> None:
    """GRU unrolled over its static sequence length (see the module doc)."""
    _unrolled(node, ctx)


@decomposition("LSTM", OPSET)
def lstm_unrolled(node: onnx.NodeProto, ctx) -> None:
    """LSTM unrolled over its static sequence length (see the module doc)."""
    _unrolled(node, ctx)
