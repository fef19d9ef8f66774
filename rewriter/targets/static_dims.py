"""Forms a measured release refuses over symbolic dims and runs once the dims are static.

``needs_static_dims`` in a release's data (``tools/runtime_probe_symbolic.py`` runs the small
models of ``tools/symbolic_forms.py`` as they are and with ``--input-shape`` fixing their dims)
lists the forms the release refused with symbolic dims and ran with static ones: tract 0.23
refuses a Flatten of two symbolic dims ("square of symbols"), a Reshape or Expand whose shape is a
dim read through a Cast ("shape input is variable"), a GRU whose sequence_lens is read by Shape
("Non constant seq_len"), a Concat of a value with a copy Resize scaled back ("Impossible to
unify"); TVM 0.27 the last (and its Add); both a Pad whose pads are computed from a dim (whisper's
pad of the samples to 30 seconds) and a Concat of a symbolic dim with a static one off its axis
(onnxruntime-genai's Llama: the past key's "kv_cache_dim" against the new key's 16); TVM a Sub of
two Slices of one value with other bounds (nemo's preemphasis x[:, 1:] - 0.97 x[:, :-1]). Each
form has a recognizer here; a node of a model whose graph inputs have a dim that is not static is
blocked when it is in such a form, naming the inputs ``--input-shape`` must fix.

Beside the forms, ``clear_declared_symbols``: tract unifies the dims a model's value_info declares
with those it computes, and a symbol no graph input has (Paddle's ``DynamicDimension.0``) can
never be unified with the input's ("Impossible to unify Sym(DynamicDimension.0) with Sym(x_d0)"),
static or not, nor a wrong declaration of an input's symbol (onnxruntime-genai's float16 Llama);
the value_info dims named by symbols, and the outputs' dims named by foreign ones, are left
unnamed for it.
"""

from __future__ import annotations

import re

import onnx

from rewriter.graph import traversal
from rewriter.graph.static_shapes import is_dynamic

__all__ = ["CLEARS_FOREIGN_SYMBOLS", "FORMS", "clear_declared_symbols", "dynamic_inputs", "static_dims_blockers"]

# runtime -> why the symbols of value_info (and the outputs' that no graph input has) are cleared for it
CLEARS_FOREIGN_SYMBOLS = {"tract": "tract refuses a declared dim it cannot unify with the one it computes "
                                   "(a symbol no graph input has, or a wrong declaration)"}

# ops that keep their (first) input's shape, looked through from a Concat to the Resize behind it
# (Where through its condition: the explicit QuantizeLinear of convert's lowering is Where(IsNaN(x), ...))
_SAME_SHAPE = frozenset({"QuantizeLinear", "DequantizeLinear", "Cast", "Identity", "Relu", "LeakyRelu",
                         "Sigmoid", "Clip", "HardSwish", "HardSigmoid", "Tanh", "IsNaN", "Where", "Round", "Floor"})


class _Model:
    """What the recognizers read: the inferred dims of each value and its producer."""

    def __init__(self, model: onnx.ModelProto, inferred: onnx.ModelProto | None):
        graph = inferred.graph if inferred is not None else model.graph
        self.dims = {v.name: list(v.type.tensor_type.shape.dim)
                     for v in [*graph.input, *graph.output, *graph.value_info]
                     if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
        self.dims.update({t.name: [_static(d) for d in t.dims] for t in model.graph.initializer})

    def dynamic(self, name: str) -> list[int] | None:
        """The axes of ``name`` whose dim is not static, or None when its shape is unknown."""
        dims = self.dims.get(name)
        return None if dims is None else [i for i, d in enumerate(dims) if is_dynamic(d)]

    @staticmethod
    def producer(name: str, scope) -> onnx.NodeProto | None:
        kind, node, _ = traversal.definition(name, scope)
        return node if kind == "node" else None

    def cone(self, name: str, scope, limit: int = 64) -> tuple[list[onnx.NodeProto], bool]:
        """The nodes ``name`` is computed by (up to ``limit``), and whether a graph input's values
        (not only its shape) reach it."""
        nodes, fed, todo, seen = [], False, [name], set()
        while todo and len(nodes) < limit:
            value = todo.pop()
            if not value or value in seen:
                continue
            seen.add(value)
            kind, node, _ = traversal.definition(value, scope)
            if kind == "input":
                fed = True
            elif kind == "node":
                nodes.append(node)
                if node.op_type not in ("Shape", "Size"):
                    todo.extend(node.input)
        return nodes, fed


    def constant(self, name: str, scope):
        """The value of ``name`` when it is a small constant, else None."""
        from rewriter.graph.constants import constant_value

        try:
            return constant_value(name, scope, onnx.numpy_helper.to_array)
        except Exception:  # noqa: BLE001 - external or unreadable: not known here
            return None

    def carried(self, name: str, scope, depth: int = 0) -> tuple[bool, bool]:
        """Whether the integer value ``name`` holds a dim that is not static (computed from a Shape,
        Gather / Slice picking dims of it, and arithmetic), and whether such a dim went through a Cast."""
        node = self.producer(name, scope)
        if node is None or depth > 32:
            return False, False
        if node.op_type == "Shape":  # (a shape inference did not follow: not known to be dynamic)
            return bool(self.dynamic(node.input[0])), False
        if node.op_type == "Cast":
            dynamic, _ = self.carried(node.input[0], scope, depth + 1)
            return dynamic, dynamic
        source, cast = self.producer(node.input[0], scope) if node.input else None, False
        while source is not None and source.op_type == "Cast":  # (the dims keep their order)
            source, cast = self.producer(source.input[0], scope), True
        if source is not None and source.op_type == "Shape" and node.op_type in ("Gather", "Slice"):
            picked = self._picked(node, scope, self.dims.get(source.input[0]))
            if picked is not None:
                dynamic = any(is_dynamic(d) for d in picked)
                return dynamic, dynamic and cast
        found = [self.carried(i, scope, depth + 1) for i in node.input if i]
        return any(d for d, _ in found), any(c for _, c in found)

    def _picked(self, node, scope, dims):
        """The dims a Gather / Slice (constant indices, no steps) takes of a Shape of ``dims``."""
        if dims is None:
            return None
        values = [self.constant(i, scope) if i else None for i in node.input[1:]]
        if node.op_type == "Gather" and values and values[0] is not None:
            return [dims[int(i)] for i in values[0].reshape(-1) if -len(dims) <= int(i) < len(dims)]
        if node.op_type == "Slice" and len(values) >= 2 and values[0] is not None and values[1] is not None \
                and (len(values) < 3 or values[2] is None or values[2].reshape(-1).tolist() == [0]) \
                and (len(values) < 4 or values[3] is None or values[3].reshape(-1).tolist() == [1]):
            return dims[int(values[0].reshape(-1)[0]):int(min(values[1].reshape(-1)[0], len(dims)))]
        return None


def _static(size: int) -> onnx.TensorShapeProto.Dimension:
    d = onnx.TensorShapeProto.Dimension()
    d.dim_value = size
    return d


def _two_symbols(node, scope, m: _Model) -> str | None:
    dynamic = m.dynamic(node.input[0])
    if dynamic is not None:
        return f"its input '{node.input[0]}' has {len(dynamic)} dims that are not static" if len(dynamic) >= 2 \
            else None
    source = _through_same_shape(node.input[0], scope, m)  # a shape inference cannot follow: a Reshape's
    if source is not None and source.op_type == "Reshape":  # elements are its input's, symbols and all
        dynamic = m.dynamic(source.input[0])
        if dynamic is not None and len(dynamic) >= 2:
            return (f"its input is Reshape '{source.name or source.output[0]}' of '{source.input[0]}', which has "
                    f"{len(dynamic)} dims that are not static")
    return None


def _through_same_shape(name: str, scope, m: _Model) -> onnx.NodeProto | None:
    """The producer of ``name``, looking through ops that keep their input's shape."""
    for _ in range(8):
        node = m.producer(name, scope)
        if node is None or node.op_type not in _SAME_SHAPE or not node.input:
            return node
        name = node.input[0]
    return None


def _carried_input(node, scope, m: _Model, i: int, through_cast: bool) -> str | None:
    """Input ``i`` of ``node`` when it is computed from shapes only (no graph input's values) and
    carries a dim that is not static (``through_cast``: one read through a Cast), else None."""
    if len(node.input) <= i or not node.input[i]:
        return None
    _, fed = m.cone(node.input[i], scope)
    return None if fed or not m.carried(node.input[i], scope)[1 if through_cast else 0] else node.input[i]


def _shape_through_cast(node, scope, m: _Model) -> str | None:
    name = _carried_input(node, scope, m, 1, through_cast=True)
    return None if name is None else f"its shape '{name}' holds dims that are not static, read through a Cast"


def _seq_lens_of_shape(node, scope, m: _Model) -> str | None:
    name = _carried_input(node, scope, m, 4, through_cast=False)
    return None if name is None else f"its sequence_lens '{name}' is computed from dims that are not static"


def _pads_of_shape(node, scope, m: _Model) -> str | None:
    name = _carried_input(node, scope, m, 1, through_cast=False)
    return None if name is None else f"its pads '{name}' are computed from dims that are not static"


def _symbol_meets_value(node, scope, m: _Model) -> str | None:
    """Inputs of a Concat whose dims off its axis are a symbol in one and a value in another."""
    shapes = [(i, m.dims.get(i)) for i in node.input if i]
    shapes = [(i, d) for i, d in shapes if d is not None]
    if len(shapes) < 2 or len({len(d) for _, d in shapes}) != 1:
        return None
    rank = len(shapes[0][1])
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % max(rank, 1)
    for k in range(rank):
        if k == axis:  # (the lengths along it may differ)
            continue
        symbol = next(((i, d[k].dim_param) for i, d in shapes if d[k].HasField("dim_param")), None)
        value = next(((i, d[k].dim_value) for i, d in shapes if d[k].HasField("dim_value")), None)
        if symbol is not None and value is not None:
            return (f"its input '{symbol[0]}' has the symbolic dim {symbol[1]} on axis {k}, where '{value[0]}' "
                    f"has {value[1]}")
    return None


def _slice_of(name: str, scope, m: _Model, depth: int = 0):
    """(data, axes, starts, ends) of the Slice (constant bounds, steps 1) ``name`` is, looking
    through ops that keep its shape and a product by a constant scalar, else None."""
    node = m.producer(name, scope)
    if node is None or depth > 8:
        return None
    if node.op_type in ("Mul", "Div") and len(node.input) == 2:
        scalar = [i for i in node.input if (v := m.constant(i, scope)) is not None and v.size == 1]
        rest = [i for i in node.input if i not in scalar]
        return _slice_of(rest[0], scope, m, depth + 1) if len(scalar) == 1 and len(rest) == 1 else None
    if node.op_type in _SAME_SHAPE and node.input:
        return _slice_of(node.input[0], scope, m, depth + 1)
    if node.op_type != "Slice" or len(node.input) < 3:
        return None
    values = [m.constant(i, scope) if i else None for i in node.input[1:5]]
    if any(v is None for v in values[:2]) or (len(values) > 3 and values[3] is not None
                                             and set(values[3].reshape(-1).tolist()) != {1}):
        return None
    axes = tuple(values[2].reshape(-1).tolist()) if len(values) > 2 and values[2] is not None else None
    return node.input[0], axes, tuple(values[0].reshape(-1).tolist()), tuple(values[1].reshape(-1).tolist())


def _shifted_slices(node, scope, m: _Model) -> str | None:
    """A Sub of two Slices of one value along the same axes with other bounds, on a dim that is not static."""
    if len(node.input) != 2:
        return None
    a, b = (_slice_of(i, scope, m) for i in node.input)
    if a is None or b is None or a[:2] != b[:2] or a[2:] == b[2:]:
        return None
    dims = m.dims.get(a[0])
    axes = a[1] if a[1] is not None else tuple(range(len(a[2])))
    if dims is not None and not any(is_dynamic(dims[k]) for k in axes if -len(dims) <= k < len(dims)):
        return None
    return (f"its inputs are Slices of '{a[0]}' along axes {list(axes)} from {list(a[2])} to {list(a[3])} and from "
            f"{list(b[2])} to {list(b[3])}, of a dim that is not static")


def _resized(name: str, scope, m: _Model) -> onnx.NodeProto | None:
    """The Resize (by scales, of a value with a dim that is not static) ``name`` is, or is made
    from by ops that keep its shape."""
    node = _through_same_shape(name, scope, m)
    if node is None or node.op_type not in ("Resize", "Upsample") or len(node.input) < 2 or not node.input[-1]:
        return None
    if node.op_type == "Resize" and len(node.input) > 3 and node.input[3]:
        return None  # sizes: not scales
    return node if m.dynamic(node.input[0]) != [] else None


def _meets_resized(node, scope, m: _Model) -> str | None:
    inputs = [i for i in node.input if i]
    if len(inputs) < 2:
        return None
    for i, name in enumerate(inputs):
        resize = _resized(name, scope, m)
        if resize is not None and any(other != name for other in inputs[:i] + inputs[i + 1:]):
            return (f"its input '{name}' is scaled by {resize.op_type} '{resize.name or resize.output[0]}' from "
                    "dims that are not static, and meets another value's")
    return None


def _shape_cast_any_dims(node, scope, m: _Model) -> str | None:
    """A shape computed from a Shape through a Cast, whatever the dims (TVM 0.27 wants a shape it
    can read as one, and a Cast makes it a tensor: refused with static dims too)."""
    if len(node.input) < 2 or not node.input[1]:
        return None
    nodes, fed = m.cone(node.input[1], scope)
    ops = {n.op_type for n in nodes}
    if fed or "Cast" not in ops or not ops & {"Shape", "Size"}:
        return None
    return f"its shape '{node.input[1]}' is computed from a Shape through a Cast"


def _compares_dims(node, scope, m: _Model) -> str | None:
    """A comparison whose input is computed from a Shape only, whatever the dims (TVM 0.27 compares
    them as expressions: refused over symbolic dims, and over static ones the Where reading it)."""
    for name in node.input:
        nodes, fed = m.cone(name, scope) if name else ([], True)
        if not fed and any(n.op_type in ("Shape", "Size") for n in nodes):
            return f"its input '{name}' is computed from dims read by Shape"
    return None


# form (tools/symbolic_forms.py) -> (op, recognizer(node, scope, model) -> why, or None)
FORMS = {
    "flatten_two_symbols": ("Flatten", _two_symbols),
    "reshape_shape_through_cast": ("Reshape", _shape_through_cast),
    "expand_shape_through_cast": ("Expand", _shape_through_cast),
    "gru_shape_seq_lens": ("GRU", _seq_lens_of_shape),
    "concat_resized": ("Concat", _meets_resized),
    "add_resized": ("Add", _meets_resized),
    "pad_pads_of_shape": ("Pad", _pads_of_shape),
    "concat_symbol_meets_value": ("Concat", _symbol_meets_value),
    "sub_of_shifted_slices": ("Sub", _shifted_slices),
}
# a form refused with static dims too -> (op, its recognizer whatever the dims); forms without one
# (a GRU the release lacks anyway, tract's foreign symbols, which convert clears) are not named so
REFUSED_FORMS = {
    "reshape_shape_through_cast": ("Reshape", _shape_cast_any_dims),
    "expand_shape_through_cast": ("Expand", _shape_cast_any_dims),
    "lessorequal_dim_of_shape": ("LessOrEqual", _compares_dims),
}
# what runs instead, by form (default: a constant shape, which static dims make of a shape read through a Cast)
_RUNS_INSTEAD = {"lessorequal_dim_of_shape": "no comparison of dims: with --input-shape a lowering that compares "
                                             "them at run time (QLinearAdd's span order) decides it when converting"}


def dynamic_inputs(model: onnx.ModelProto) -> list[str]:
    """Each main-graph input with a dim that is not static, as ``'NAME' [dims]``."""
    inits = {t.name for t in model.graph.initializer}
    found = []
    for value in model.graph.input:
        tensor = value.type.tensor_type
        if value.name in inits or not value.type.HasField("tensor_type"):
            continue
        dims = list(tensor.shape.dim) if tensor.HasField("shape") else None
        if dims is None or any(is_dynamic(d) for d in dims):
            shown = "unknown rank" if dims is None else ", ".join(
                str(d.dim_value) if not is_dynamic(d) else (d.dim_param or "?") for d in dims)
            found.append(f"'{value.name}' [{shown}]")
    return found


def static_dims_blockers(model: onnx.ModelProto, needed: dict, release: str, inferred=None,
                         refused: dict | None = None) -> list[tuple]:
    """(node label, op, None, reason, name) for every node of ``model`` in a form of ``needed`` (form
    -> the release's refusal, measured) while a graph input has a dim that is not static, and in a
    form of ``refused`` (refused with static dims too) whatever the dims.
    ``inferred``: ``model``'s shape inference (None: the model's own value_info)."""
    inputs = dynamic_inputs(model)
    if not refused and not (needed and inputs):
        return []
    m = _Model(model, inferred)
    hint = f"give --input-shape NAME:DIMS for {', '.join(inputs)} (or --fix-dim SYMBOL=N)"
    folds = "a shape that is a constant runs" + (f": {hint}, and convert folds it into one" if inputs else "")
    found = _blocked(model, refused or {}, REFUSED_FORMS, m, lambda what, why, form: (  # (TVM's cast_shape_folded)
        f"{release} refuses this form with symbolic and with static dims alike: {what} (measured: "
        f"'{_last_cause(why)}'); {_RUNS_INSTEAD.get(form, folds)}"))
    if not needed or not inputs:
        return found
    named = {b[0] for b in found}
    return found + [b for b in _blocked(model, needed, FORMS, m, lambda what, why, form: (
        f"{release} needs static dims here: {what}, a form it refuses with symbolic dims and runs with static ones "
        f"(measured: '{_last_cause(why)}'); {hint}")) if b[0] not in named]


def _blocked(model: onnx.ModelProto, forms: dict, recognizers: dict, m: _Model, reason) -> list[tuple]:
    """(label, op, None, reason(what, the form's refusal, the form), name) of each node in one of ``forms``
    (form -> the release's refusal) that its recognizer in ``recognizers`` sees."""
    found = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            for form, why in forms.items():
                op, recognize = recognizers.get(form, (None, None))
                if op != node.op_type or node.domain not in ("", "ai.onnx"):
                    continue
                what = recognize(node, scope, m)
                if what is not None:
                    found.append((traversal.node_label(node, scope), node.op_type, None, reason(what, why, form),
                                  node.name))
                    break
    return found


def _last_cause(refusal: str) -> str:
    """The innermost cause of a runtime's refusal (tract's "Caused by: 0: ... 2: <this>")."""
    return re.split(r" Caused by: | \d+: ", refusal)[-1].strip()[:160]


def clear_declared_symbols(model: onnx.ModelProto) -> list[str]:
    """Clear, in place, every main-graph value_info dim named by a symbol, and every output dim named
    by a symbol no graph input has; a note for each kind when some were. tract unifies declared dims
    with those it computes: a symbol no input has never unifies, and a declaration that is wrong
    (onnxruntime-genai's float16 Llama declares its repeat_kv Unsqueeze's and Expand's dim
    ``sequence_length`` where the key they read is the past and the new one concatenated) makes it
    refuse the model ("Impossible to unify Sym(sequence_length) with Add([...])"). The dims stay,
    unnamed: tract computes them from the inputs."""
    own = {d.dim_param for v in model.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param}
    cleared: set[str] = set()
    hints = 0
    outputs = {o.name for o in model.graph.output}
    for value in [*model.graph.value_info, *model.graph.output]:
        if not value.type.HasField("tensor_type"):
            continue
        for d in value.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and (d.dim_param not in own or value.name not in outputs):
                if d.dim_param in own:
                    hints += 1
                else:
                    cleared.add(d.dim_param)
                d.ClearField("dim_param")
    notes = []
    if cleared:
        names = sorted(cleared)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        notes.append(f"declared dims named by symbols no graph input has left unnamed ({shown})")
    if hints:
        notes.append(f"{hints} value_info dim(s) named by the graph inputs' symbols left unnamed (tract unifies "
                     "declarations with what it computes and refuses a model whose declarations are wrong)")
    return notes
