"""What a measured release computes wrongly or refuses below the granularity of an op version
(``tools/runtime_probe.py``'s summary; any runtime's data may carry these keys):

- ``type_verdicts``: domain -> op -> schema version -> {element type: verdict}, for op versions
  whose failures follow the element type: every node test that computed wrongly (or was refused)
  is on a type no case that ran right is on (LiteRT: int8 / uint8 Mul-14 and Div-14 saturate
  where ONNX wraps; float runs right).  A node reading or writing a tensor of such a type blocks.
- ``form_verdicts``: domain -> op -> schema version -> {form: verdict}, named forms the probe
  builds beside the node tests: ``nan_in_untaken_branch``, a Where whose branches broadcast with a
  NaN in the branch not taken (LiteRT returns the NaN).  A Where whose condition comes from an
  IsNaN (the NaN is then where the condition does not take that branch) and whose branches do not
  have one shape blocks; ``double_inside``, an op (CumSum) on a double tensor the graph computes
  (LiteRT refuses it: onnx2tf turns a double graph input into float, not a double made inside,
  such as the SVM lowerings' sums). A node of that op reading a double tensor some node writes
  blocks; ``negative_steps``, a Slice reversing part of an axis with every input but the data
  constant (LiteRT refuses it either way, and runs a reversal of the whole axis). A Slice whose
  steps are a constant with a negative value blocks, unless each is -1 over a whole axis.
- ``unmeasured``: domain -> op -> schema versions no probe case measured (no node test reaches
  them and the probe could not build a one-node form): said in the conversion's notes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper

from rewriter.graph import traversal
from rewriter.graph.constants import constant_value
from rewriter.graph.names import first_few
from rewriter.graph.schemas import DEFAULT_DOMAINS, schema_version_at_domain

__all__ = ["from_isnan", "node_versions", "read_or_none", "rewrite_note", "type_blockers", "untaken_nan_blockers",
           "double_inside_blockers", "refuses_double_inside", "negative_steps_blockers", "unmeasured_present",
           "UNTAKEN_NAN", "DOUBLE_INSIDE", "NEGATIVE_STEPS"]

UNTAKEN_NAN = "nan_in_untaken_branch"
DOUBLE_INSIDE = "double_inside"
NEGATIVE_STEPS = "negative_steps"
_PASS_THROUGH = {"Not", "Identity", "Cast", "Or", "And", "Xor"}  # a condition still true where an IsNaN is


def node_versions(model: onnx.ModelProto):
    """(node, scope, domain, schema version) of every node of a domain with schemas."""
    imports = {("" if o.domain in DEFAULT_DOMAINS else o.domain): o.version for o in model.opset_import}
    for scope in traversal.iter_scopes(model):
        own = {("" if o.domain in DEFAULT_DOMAINS else o.domain): o.version for o in scope.body.opset_import} \
            if scope.is_function else imports
        for node in scope.body.node:
            domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
            opset = scope.opset if domain == "" and scope.opset is not None else own.get(domain)
            version = None if opset is None else schema_version_at_domain(node.op_type, opset, domain)
            yield node, scope, domain, version


def _value_types(model: onnx.ModelProto, inferred) -> dict:
    graph = inferred.graph if inferred is not None else model.graph
    types = {v.name: v.type.tensor_type for v in [*graph.input, *graph.output, *graph.value_info]
             if v.type.HasField("tensor_type")}
    return types


def type_blockers(model: onnx.ModelProto, table: dict, release: str, inferred=None) -> list[tuple]:
    """(node label, op, version, reason, node name) for every node of an op version in ``table``
    (``type_verdicts``) that reads or writes a tensor of an element type listed there."""
    if not table:
        return []
    types = {n: t.elem_type for n, t in _value_types(model, inferred).items()}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    found = []
    for node, scope, domain, version in node_versions(model):
        verdicts = table.get(domain, {}).get(node.op_type, {}).get(version)
        if not verdicts:
            continue
        for name in (n for n in [*node.input, *node.output] if n and types.get(n)):
            kind = onnx.TensorProto.DataType.Name(types[name]).lower()
            if kind in verdicts:
                how = "computes wrongly" if verdicts[kind].startswith("wrong") else "refuses"
                found.append((traversal.node_label(node, scope), node.op_type, version,
                              f"{release} {how} {node.op_type}-{version} on {kind} tensors ('{name}'; measured: "
                              f"{verdicts[kind][:160]})", node.name))
                break
    return found


def from_isnan(name: str, scope: traversal.Scope, seen: set) -> bool:
    """Whether ``name`` is an IsNaN's output, through Not / Cast / Or / And / Identity."""
    if name in seen:
        return False
    seen.add(name)
    kind, node, where = traversal.definition(name, scope)
    if kind != "node":
        return False
    if node.op_type == "IsNaN":
        return True
    return node.op_type in _PASS_THROUGH and any(from_isnan(i, where, seen) for i in node.input if i)


def _shape_of(name: str, types: dict, inits: dict):
    if name in inits:
        return tuple(inits[name].dims)
    t = types.get(name)
    if t is None or not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)


def _one_shape(node: onnx.NodeProto, types: dict, inits: dict) -> bool:
    """Whether the Where's two branches have one known shape (no broadcasting between them)."""
    a, b = (_shape_of(n, types, inits) for n in node.input[1:3])
    return a is not None and a == b and None not in a


_NO_NAN = frozenset(range(2, 10)) | {onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}  # integer and bool element types


def _no_nan(node: onnx.NodeProto, types: dict, inits: dict) -> bool:
    """Whether both of the Where's branches are of a known integer / bool type, which holds no NaN
    (the QuantizeLinear form's Where(IsNaN(x), qmin, codes): tools/runtime_probe_quant.py QT_divfed_*)."""
    elem = [inits[n].data_type if n in inits else getattr(types.get(n), "elem_type", 0) for n in node.input[1:3]]
    return all(e in _NO_NAN for e in elem)


def untaken_nan_blockers(model: onnx.ModelProto, table: dict, release: str, inferred=None) -> list[tuple]:
    """(node label, "Where", version, reason, node name) for every Where of a version whose
    ``nan_in_untaken_branch`` form ``table`` (``form_verdicts``) says is not right, when its
    condition comes from an IsNaN and its branches broadcast (or their shapes are not known)."""
    bad = {v for v, forms in table.get("", {}).get("Where", {}).items()
           if forms.get(UNTAKEN_NAN, "ok") != "ok"}
    if not bad:
        return []
    types = _value_types(model, inferred)
    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for node, scope, domain, version in node_versions(model):
        if domain != "" or node.op_type != "Where" or version not in bad or len(node.input) < 3:
            continue
        if from_isnan(node.input[0], scope, set()) and not _one_shape(node, types, inits) \
                and not _no_nan(node, types, inits):
            found.append((traversal.node_label(node, scope), "Where", version,
                          f"its condition comes from an IsNaN, so a branch holds a NaN where it is not taken, and "
                          f"{release} returns that NaN when the branches broadcast (a constant branch is written at the "
                          f"output's shape when that is static: --input-shape; measured: "
                          f"{table[''][node.op_type][version][UNTAKEN_NAN][:120]})", node.name))
    return found


def refuses_double_inside(table: dict) -> bool:
    """Whether ``table`` (``form_verdicts``) says some op version refuses a double the graph computes."""
    return any(forms.get(DOUBLE_INSIDE, "ok") != "ok" for versions in table.get("", {}).values()
               for forms in versions.values())


def double_inside_blockers(model: onnx.ModelProto, table: dict, release: str, inferred=None) -> list[tuple]:
    """(node label, op, version, reason, node name) for every node of an op version whose
    ``double_inside`` form ``table`` (``form_verdicts``) says is not right, when its first input is
    a double tensor a node of the graph writes (a graph input or an initializer does not count)."""
    bad = {(op, v): forms[DOUBLE_INSIDE] for op, versions in table.get("", {}).items()
           for v, forms in versions.items() if forms.get(DOUBLE_INSIDE, "ok") != "ok"}
    if not bad:
        return []
    types = _value_types(model, inferred)
    found = []
    for node, scope, domain, version in node_versions(model):
        why = bad.get((node.op_type, version)) if domain == "" and node.input else None
        t = types.get(node.input[0]) if why else None
        if t is None or t.elem_type != onnx.TensorProto.DOUBLE or traversal.definition(node.input[0], scope)[0] != "node":
            continue
        found.append((traversal.node_label(node, scope), node.op_type, version,
                      f"{release} refuses {node.op_type}-{version} on a double tensor the graph computes "
                      f"('{node.input[0]}'; measured: {why[:160]})", node.name))
    return found


def rewrite_note(done: list[str], what: str, release: str) -> list[str]:
    """The note of a rewrite of a form ``release`` refuses: how many nodes (``done``, their names)
    were written as ``what``; none when nothing was rewritten."""
    if not done:
        return []
    return [f"{len(done)} {what} for {release}, which refuses that form (measured): {first_few(repr(n) for n in done)}"]


def read_or_none(tensor: onnx.TensorProto):
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - external data not at hand: the value counts as unknown
        return None


def _whole_reversals(node: onnx.NodeProto, scope, steps) -> bool:
    """Every negative step is -1 from the axis' last element (start -1, or one past any int32 dim)
    to before its first (end at most -2^31): a reversal of the whole axis, which LiteRT runs."""
    starts, ends = (constant_value(node.input[i], scope, read_or_none) for i in (1, 2))
    if starts is None or ends is None:
        return False
    steps, starts, ends = (np.asarray(v).reshape(-1) for v in (steps, starts, ends))
    return all(step > 0 or (step == -1 and (start == -1 or start >= 2**31 - 1) and end <= -(2**31))
               for step, start, end in zip(steps, starts, ends))


def negative_steps_blockers(model: onnx.ModelProto, table: dict, release: str) -> list[tuple]:
    """(node label, op, version, reason, node name) for every Slice of a version whose
    ``negative_steps`` form ``table`` (``form_verdicts``) says is not right, when its steps are a
    constant with a negative value (steps fed at run time are ``needs_constant``'s business)."""
    bad = {int(v): forms[NEGATIVE_STEPS] for v, forms in table.get("", {}).get("Slice", {}).items()
           if forms.get(NEGATIVE_STEPS, "ok") != "ok"}
    if not bad:
        return []
    found = []
    for node, scope, domain, version in node_versions(model):
        why = bad.get(version) if domain == "" and node.op_type == "Slice" and len(node.input) > 4 else None
        steps = constant_value(node.input[4], scope, read_or_none) if why and node.input[4] else None
        if steps is None or not (np.asarray(steps) < 0).any() or _whole_reversals(node, scope, steps):
            continue
        found.append((traversal.node_label(node, scope), node.op_type, version,
                      f"{release} refuses Slice-{version} with a negative step that does not reverse a whole axis, "
                      f"constant or not (measured: {why[:160]})", node.name))
    return found


def unmeasured_present(model: onnx.ModelProto, table: dict) -> list[str]:
    """"Op-version x count" for the model's nodes of op versions in ``table`` (``unmeasured``)."""
    if not table:
        return []
    counts: dict = {}
    for node, _, domain, version in node_versions(model):
        if version in table.get(domain, {}).get(node.op_type, ()):
            key = f"{node.op_type}-{version}"
            counts[key] = counts.get(key, 0) + 1
    return [f"{k} x{n}" for k, n in sorted(counts.items())]
