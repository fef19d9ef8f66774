"""Forms a measured release (OpenVINO, tract, TVM) runs, beyond the op versions it implements.

- ``needs_constant``: op versions whose every refused node test ran right once the inputs after
  the first were initializers (``tools/runtime_probe.py``'s constant-input variants). Such a
  version is not missing; a node of it is blocked when one of those inputs is fed at run time
  (computed from a graph input's values), and runs when they are constants or computed from
  constants and shapes only (``Shape`` / ``Size``), which the runtime folds.
- ``types_refused``: element types none of the release's node tests on them ran in (``string``);
  a node reading or writing such a tensor is blocked.
- Anonymous input dims: tract refuses a graph input whose dim has neither a value nor a name it
  can read ("Source node without a determined fact"); each gets a fresh symbolic name.
"""

from __future__ import annotations

import re

import onnx

from rewriter.graph import traversal
from rewriter.graph.names import fresh_name
from rewriter.graph.schemas import DEFAULT_DOMAINS, schema_version_at_domain

__all__ = ["FREEZES_DEFAULTS", "NAMES_DIMS", "defaults_frozen_note", "name_anonymous_dims", "fed_blockers",
           "type_blockers"]

# runtime -> why its graph inputs need named dims (tract 0.23: "Source node without a determined fact")
NAMES_DIMS = {"tract": "tract reads a graph input's dims only when each has a value or a symbolic name"}
# runtimes whose converter makes a graph input that has an initializer a constant (onnx2tf 2.6 saves
# its simplified model without such inputs: tests/targets/test_litert_target.py runs it so)
FREEZES_DEFAULTS = {"litert": "onnx2tf makes a graph input that has an initializer a constant"}

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHAPE_OPS = frozenset({"Shape", "Size"})  # their outputs depend on shapes only, never on values


def name_anonymous_dims(model: onnx.ModelProto) -> list[str]:
    """Give every main-graph input dim without a value >= 0 or a plain symbolic name (no field, -1,
    "?") a fresh name ``<input>_d<axis>``, in place; one note per input changed. A name marks a
    dim as unknown just as no name does (two dims share a name only when it was given to both).
    A dim of 0 set as a value is kept: an empty input (a past key of length 0, ``--input-shape``)."""
    taken = {d.dim_param for v in [*model.graph.input, *model.graph.output, *model.graph.value_info]
             for d in v.type.tensor_type.shape.dim if d.HasField("dim_param")}
    inits = {t.name for t in model.graph.initializer}
    notes = []
    for value in model.graph.input:
        if value.name in inits or not value.type.tensor_type.HasField("shape"):
            continue
        named = []
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if (dim.HasField("dim_value") and dim.dim_value >= 0) or \
                    (dim.HasField("dim_param") and _SYMBOL.match(dim.dim_param)):
                continue
            base = re.sub(r"\W", "_", f"{value.name}_d{axis}")
            name = fresh_name(taken, base)
            dim.dim_param = name  # (clears dim_value: a oneof)
            named.append(f"{axis}: {name}")
        if named:
            notes.append(f"input '{value.name}': its dims without a name named ({', '.join(named)})")
    return notes


def _version(node: onnx.NodeProto, scope: traversal.Scope, imports: dict) -> tuple[str, int | None]:
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    opset = scope.opset if domain == "" and scope.opset is not None else imports.get(domain)
    return domain, None if opset is None else schema_version_at_domain(node.op_type, opset, domain)


class _Fed:
    """Which values depend on a graph input's values (not only on its shape), memoized."""

    def __init__(self, constants: frozenset = frozenset(), graph=None):
        self._memo: dict[tuple[int, str], bool] = {}
        self._constants, self._graph = constants, graph  # main-graph inputs the runtime takes as constants

    def __call__(self, name: str, scope: traversal.Scope) -> bool:
        key = (id(scope.body), name)
        if key not in self._memo:
            self._memo[key] = False  # (a cycle cannot happen in a valid graph)
            kind, node, where = traversal.definition(name, scope)
            if kind == "input":
                fed = not (name in self._constants and where is not None and where.body is self._graph)
            elif kind == "node" and node.op_type not in _SHAPE_OPS and node.op_type != "Constant":
                fed = any(self(i, where) for i in node.input if i) or any(True for _ in traversal.subgraphs(node))
            else:
                fed = False
            self._memo[key] = fed
        return self._memo[key]


def fed_blockers(model: onnx.ModelProto, table: dict, release: str, defaults_constant: bool = False) -> list[tuple]:
    """(node label, op, version, input) for every node of a version in ``table`` (domain -> op ->
    versions: ``needs_constant``) with an input after the first fed at run time (``defaults_constant``:
    the main graph's inputs that have an initializer are constants there, :data:`FREEZES_DEFAULTS`)."""
    from rewriter.graph.input_defaults import default_note, input_defaults

    imports = {("" if o.domain in DEFAULT_DOMAINS else o.domain): o.version for o in model.opset_import}
    defaults = frozenset(input_defaults(model))
    fed, found = _Fed(defaults if defaults_constant else frozenset(), model.graph), []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            domain, version = _version(node, scope, imports)
            if version is None or version not in table.get(domain, {}).get(node.op_type, ()):
                continue
            late = next((i for i in node.input[1:] if i and fed(i, scope)), None)
            if late is not None:
                found.append((traversal.node_label(node, scope), node.op_type, version,
                              f"{release} runs {node.op_type}-{version} only with its inputs after the first "
                              f"constant (measured), and '{late}' is computed from a graph input at run time"
                              + (f": {default_note(late)}" if late in defaults and scope.body is model.graph else ""),
                              node.name))
    return found


def type_blockers(model: onnx.ModelProto, refused: dict, release: str, inferred=None,
                  allowed=frozenset()) -> list[tuple]:
    """(node label, op, None, reason) for every node reading or writing a tensor of an element type
    in ``refused`` (type name -> the measurement) whose name is not in ``allowed`` (the string labels
    the converted model writes in a form the release runs: :mod:`rewriter.targets.string_labels`),
    types from ``inferred`` (shape inference of ``model``) or the model's own value_info."""
    if not refused:
        return []
    codes = {onnx.helper.tensor_dtype_to_string(getattr(onnx.TensorProto, t.upper())): t for t in refused}
    graph = inferred.graph if inferred is not None else model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    found = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            names = [n for n in [*node.input, *node.output] if n and n not in allowed]
            hit = next((n for n in names if types.get(n) and
                        onnx.helper.tensor_dtype_to_string(types[n]) in codes), None)
            if hit is not None:
                kind = codes[onnx.helper.tensor_dtype_to_string(types[hit])]
                found.append((traversal.node_label(node, scope), node.op_type, None,
                              f"'{hit}' is a {kind} tensor, and {release} ran none of the node tests on {kind} "
                              f"tensors ({refused[kind]})", node.name))
    return found


def defaults_frozen_note(model: onnx.ModelProto, runtime: str | None, release: str) -> list[str]:
    """A note naming the main graph's inputs with an initializer, for a runtime that makes them
    constants (:data:`FREEZES_DEFAULTS`): there they can no longer be fed."""
    from rewriter.graph.input_defaults import input_defaults

    names = input_defaults(model) if runtime in FREEZES_DEFAULTS else []
    if not names:
        return []
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return [f"{release}: {FREEZES_DEFAULTS[runtime]} (measured): {len(names)} such input(s) ({shown}) compute with "
            f"their defaults there and cannot be fed"]
