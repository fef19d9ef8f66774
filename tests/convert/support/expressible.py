"""Whether a single node can be expressed at another opset, decided from ``onnx.defs`` alone.

This is the test oracle for refusals: the converter may refuse a conversion only when the
node is truly not expressible at the target. It is written independently of
``rewriter.convert`` (nothing is imported from it) and follows these rules, in order:

1. **Op missing at the target** (its first version is newer, or the schema in force there is
   deprecated): expressible only through an ONNX function body of the op's schema
   (``has_function`` / ``has_context_dependent_function``, at any of its
   ``function_opset_versions``): the body is built for the node (its attributes, its input
   types), typed by shape inference, and every body node must itself be expressible from the
   body's opset to the target (recursively). No body: not expressible (a hand-written
   rewrite with other ops, such as Upsample -> Resize, is not counted: ONNX does not define
   one), except a deprecated op whose docs name its identical successor (``REPLACED_BY``:
   Scatter -> ScatterElements-11).
2. **Types**: every type the node uses (inputs and outputs whose type is known) must be
   allowed by the target schema's constraint for that formal parameter (matched by name).
3. **Features**: an attribute the node sets that the target schema lacks is fine when its
   value is the source schema's default, or when the target has an input of that name (an
   attribute that became an input). An input the node sets that the target lacks is fine
   when the target has an attribute of that name and the input is a constant (an input that
   became an attribute), or when it is a constant equal to the documented default of that
   input (``INPUT_DEFAULTS``). Otherwise not expressible.
4. **Enum values** that a later schema added (``NEW_VALUES``, read from the operator docs:
   ``onnx.defs`` has no enum lists) are not expressible below the version that added them;
   likewise input ranks a later schema allowed (``RANK_LIMITS``: GridSample 5-D from 20), and
   attributes whose new default is not what older schemas did (``IMPLICIT_BEFORE``: Resize-10
   is 'asymmetric', RoiAlign-10 'output_half_pixel', ...): the effective value must match.
5. **Features expressible with static information** (``STATIC_FEATURES``): a few features
   that rule 3 would call inexpressible have an exact rewrite in older ops when shapes or
   values are known (``EXACT_REWRITES``; Constant's ``value_*``/``sparse_value`` as a ``value`` tensor, Split's ``num_outputs`` with a static split dimension, Shape's
   ``start``/``end`` via Slice, Reduce*'s ``noop_with_empty_axes``, Pad's ``axes`` with a
   known rank and constant axes, Resize's ``axes`` likewise). These are counted expressible,
   so a converter that refuses them is reported (strict side).
6. **Exact routes** (``tests/convert/support/routes.py``): a node that rules 1-5 call inexpressible is
   expressible when a route derived there applies (Einsum, DFT and STFT in older ops; types an
   older schema lacks, computed by other ops).

Conservative choices (documented, deliberate): meaning changes with an identical signature
(Softmax's axis at 13, negative axes at 11, broadcasting of the variadic ops at 8) count as
expressible: an exact rewrite exists (Transpose/Flatten/Reshape, rank normalization,
Expand/Add chains). Values whose constness or type is unknown are treated as non-constant /
unknown (a type check is skipped for an unknown type). A non-default-domain node is always
expressible (the converter leaves it alone). The nodes inside a node's subgraphs (If/Loop/Scan
bodies, also inside function bodies) are not examined: such a node counts as expressible when
the node itself is, so a refusal caused by a subgraph node lands in the known-gap table with
the converter's reason (the strict side), never silently excused.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper

from tests.convert.support.routes import ROUTES

__all__ = ["why_inexpressible", "why_model_inexpressible", "schema_at", "default_opset", "moved_to_attribute",
           "absent_at_target"]

DEFAULT_DOMAINS = ("", "ai.onnx")

# (op, attribute, value) -> the schema version that added the value.
NEW_VALUES: dict[tuple[str, str, str], int] = {
    ("Pad", "mode", "wrap"): 19,
    ("Resize", "coordinate_transformation_mode", "half_pixel_symmetric"): 19,
    ("Resize", "mode", "cubic"): 11,
    ("Upsample", "mode", "linear"): 7,
    ("ScatterElements", "reduction", "max"): 18, ("ScatterElements", "reduction", "min"): 18,
    ("ScatterND", "reduction", "max"): 18, ("ScatterND", "reduction", "min"): 18,
}

# (op, attribute) -> the behaviour schemas without the attribute had, when it is not the new
# attribute's default (operator docs): the node's effective value (set or default) must equal it.
IMPLICIT_BEFORE: dict[tuple[str, str], object] = {
    ("Resize", "coordinate_transformation_mode"): "asymmetric",  # Resize-10
    ("RoiAlign", "coordinate_transformation_mode"): "output_half_pixel",  # RoiAlign-10
}

# (op, input formal) -> (the ranks older schemas accept, the version that widened it), from the
# operator docs (onnx.defs has no rank constraints): GridSample takes 5-D (volumetric) input only
# from 20.
RANK_LIMITS: dict[tuple[str, str], tuple[tuple[int, ...], int]] = {
    ("GridSample", "X"): ((4,), 20),
}

# A deprecated op -> (the op its docs name as the same computation, the version it exists from).
REPLACED_BY: dict[str, tuple[str, int]] = {
    "Scatter": ("ScatterElements", 11),  # Scatter-9/11 docs: deprecated, identical to ScatterElements
}

# (op, input formal) -> the value that means "as if absent" (documented in the operator docs).
INPUT_DEFAULTS: dict[tuple[str, str], object] = {
    ("Slice", "steps"): "ones",
    ("Dropout", "training_mode"): False,
    ("Dropout", "ratio"): 0.5,
}


# (op, attribute) newer than the target with an exact rewrite in older ops, whatever its value
# (the converter does these; listed so that a refusal of them counts against it):
EXACT_REWRITES: set[tuple[str, str]] = {
    ("BatchNormalization", "training_mode"),  # batch statistics with ReduceMean/Sub/Mul/...
    ("DepthToSpace", "mode"), ("SpaceToDepth", "mode"),  # CRD as Reshape/Transpose/Reshape
    ("Dropout", "seed"),  # no effect in inference
    ("GRU", "layout"), ("LSTM", "layout"), ("RNN", "layout"),  # batch-first: Transposes around
    ("TopK", "largest"),  # largest=0: TopK of the negated input (or of the reversed order)
    ("ArgMax", "select_last_index"), ("ArgMin", "select_last_index"),  # on the reversed axis
}


def _is_default(value: np.ndarray, default) -> bool:
    if default == "ones":
        return bool(np.all(value == 1))
    return bool(np.all(value == default))


@functools.lru_cache(maxsize=None)
def _history(op: str, domain: str = "") -> tuple:
    return tuple(sorted((s for s in onnx.defs.get_all_schemas_with_history()
                         if s.name == op and s.domain == domain), key=lambda s: s.since_version))


def schema_at(op: str, opset: int, domain: str = "", *, deprecated_ok: bool = False):
    """The schema in force at ``opset`` (newest since_version <= opset); None when the op does
    not exist there or (unless ``deprecated_ok``) the schema in force is deprecated."""
    found = None
    for s in _history(op, domain):
        if s.since_version <= opset:
            found = s
    if found is not None and found.deprecated and not deprecated_ok:
        return None
    return found


def default_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)


def type_string(t: onnx.TypeProto | None) -> str | None:
    if t is None:
        return None
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        if not t.tensor_type.elem_type:
            return None
        return "tensor(" + onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower() + ")"
    if kind == "sequence_type":
        inner = type_string(t.sequence_type.elem_type)
        return f"seq({inner})" if inner else None
    if kind == "optional_type":
        inner = type_string(t.optional_type.elem_type)
        return f"optional({inner})" if inner else None
    return None


def _allowed(schema, formal) -> set[str]:
    for c in schema.type_constraints:
        if c.type_param_str == formal.type_str:
            return set(c.allowed_type_strs)
    return {formal.type_str}


def _formal(params, index: int):
    if not params:
        return None
    if index < len(params):
        return params[index]
    last = params[-1]
    return last if last.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else None


def _attr_value(attr: onnx.AttributeProto):
    return onnx.helper.get_attribute_value(attr)


def moved_to_attribute(op: str, source: int, target: int) -> list[tuple[int, str]]:
    """(index, formal name) of the source schema's inputs that the target schema lacks but has
    as an attribute of the same name (case-insensitive): inputs that must be constant there."""
    src, dst = schema_at(op, source, deprecated_ok=True), schema_at(op, target)
    if src is None or dst is None:
        return []
    names = {p.name for p in dst.inputs}
    attrs = {a.lower() for a in dst.attributes}
    return [(i, p.name) for i, p in enumerate(src.inputs) if p.name not in names and p.name.lower() in attrs]


def absent_at_target(op: str, source: int, target: int) -> list[tuple[int, str]]:
    """(index, formal name) of the source schema's inputs that the target schema lacks
    (matched by name; a renamed slot at the same position counts as present)."""
    src, dst = schema_at(op, source, deprecated_ok=True), schema_at(op, target)
    if src is None or dst is None:
        return []
    names = {p.name for p in dst.inputs}
    src_names = {p.name for p in src.inputs}
    out = []
    for i, p in enumerate(src.inputs):
        if p.name in names:
            continue
        if i < len(dst.inputs) and dst.inputs[i].name not in src_names:
            continue  # renamed slot
        out.append((i, p.name))
    return out


def why_inexpressible(node: onnx.NodeProto, source: int, target: int, types, constants,
                      *, _depth: int = 0) -> str | None:
    """None when ``node`` (valid at opset ``source``) can be expressed at opset ``target``, else why.

    ``types(name)`` -> TypeProto or None; ``constants(name)`` -> np.ndarray or None.
    """
    if node.domain not in DEFAULT_DOMAINS:
        return None
    op = node.op_type
    src = schema_at(op, source, deprecated_ok=True)
    if src is None:
        return f"{op} does not exist at the source opset {source}"
    why = _rules(node, op, src, source, target, types, constants, _depth)
    if why is None:
        return None
    for route in ROUTES.get(op, ()):  # 6. an exact route in older ops (tests/convert/support/routes.py)
        if route(node, source, target, types, constants) is None:
            return None
    return why


def _rules(node, op, src, source, target, types, constants, _depth) -> str | None:
    dst = schema_at(op, target)
    if dst is None:
        replacement = REPLACED_BY.get(op)
        if replacement is not None and target >= replacement[1]:
            renamed = onnx.NodeProto()
            renamed.CopyFrom(node)
            renamed.op_type = replacement[0]
            return why_inexpressible(renamed, replacement[1], target, types, constants, _depth=_depth + 1)
        return _through_function(node, src, source, target, types, constants, _depth)
    # 2. types, matched by formal name
    dst_in = {p.name: p for p in dst.inputs}
    dst_out = {p.name: p for p in dst.outputs}
    for which, names, params, dst_params in (("input", node.input, src.inputs, dst_in),
                                               ("output", node.output, src.outputs, dst_out)):
        for i, name in enumerate(names):
            if not name:
                continue
            formal = _formal(params, i)
            if formal is None:
                continue
            target_formal = dst_params.get(formal.name) or _renamed(params, dst_params, i, which, src, dst)
            if target_formal is None:
                if which == "output":
                    return f"output '{formal.name}' does not exist in {op}-{dst.since_version}"
                why = _input_missing(node, op, formal.name, name, src, dst, constants, types)
                if why:
                    return why
                continue
            actual = type_string(types(name))
            if actual is not None and actual not in _allowed(dst, target_formal):
                return f"{which} '{formal.name}' is {actual}, which {op}-{dst.since_version} does not allow"
    for (limited_op, formal_name), (ranks, since) in RANK_LIMITS.items():
        if op == limited_op and dst.since_version < since:
            for i, p in enumerate(src.inputs):
                if p.name == formal_name and i < len(node.input):
                    t = types(node.input[i])
                    if t is not None and t.HasField("tensor_type") and t.tensor_type.HasField("shape") \
                            and len(t.tensor_type.shape.dim) not in ranks:
                        return f"{op} input '{formal_name}' of rank {len(t.tensor_type.shape.dim)} exists only from {op}-{since}"
    # 3./4. attributes
    dst_inputs_lower = {p.name.lower() for p in dst.inputs}
    set_attrs = {a.name: a for a in node.attribute}
    for (implicit_op, name), before in IMPLICIT_BEFORE.items():
        if op == implicit_op and name in src.attributes and name not in dst.attributes:
            given = set_attrs.get(name)
            value = _attr_value(given if given is not None else src.attributes[name].default_value)
            value = value.decode() if isinstance(value, bytes) else value
            if value != before:
                return f"{name}={value!r}: {op}-{dst.since_version} behaves as {before!r}"
    for attr in node.attribute:
        if (op, attr.name) in IMPLICIT_BEFORE and attr.name not in dst.attributes:
            continue  # decided above
        if attr.name not in dst.attributes:
            if attr.name.lower() in dst_inputs_lower:
                continue  # became an input: a constant expresses it
            default = src.attributes[attr.name].default_value if attr.name in src.attributes else None
            if default is not None and default.type and _same_value(attr, default):
                continue
            why = _static_feature(node, op, attr.name, types, constants)
            if why is None:
                continue
            return f"attribute '{attr.name}' (set to {_attr_value(attr)!r}) does not exist in {op}-{dst.since_version}"
        if attr.type == onnx.AttributeProto.STRING:
            value = attr.s.decode()
            since = NEW_VALUES.get((op, attr.name, value))
            if since is not None and dst.since_version < since:
                return f"{attr.name}='{value}' exists only from {op}-{since}"
    return None


def _renamed(params, dst_params, index, which, src, dst):
    """The target's formal at the same position when the slot was only renamed
    (BatchNormalization-15's input_mean was mean): its name is unknown to the source."""
    targets = list(dst.inputs if which == "input" else dst.outputs)
    if index >= len(targets):
        return None
    candidate = targets[index]
    return candidate if candidate.name not in {p.name for p in params} else None


def _same_value(attr: onnx.AttributeProto, default: onnx.AttributeProto) -> bool:
    a, d = _attr_value(attr), _attr_value(default)
    if isinstance(a, onnx.TensorProto) or isinstance(d, onnx.TensorProto):
        return False
    return a == d


def _input_missing(node, op, formal, name, src, dst, constants, types) -> str | None:
    attrs_lower = {a.lower() for a in dst.attributes}
    value = constants(name)
    if formal.lower() in attrs_lower:
        if value is None:
            return f"input '{formal}' is not a constant, and {op}-{dst.since_version} takes it as an attribute"
        return None
    default = INPUT_DEFAULTS.get((op, formal))
    if default is not None and value is not None and _is_default(value, default):
        return None
    why = _static_feature(node, op, formal, types, constants)
    if why is None:
        return None
    return f"input '{formal}' does not exist in {op}-{dst.since_version}"


def _static_rank(types, name) -> int | None:
    t = types(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return len(t.tensor_type.shape.dim)


def _static_shape(types, name) -> list[int] | None:
    t = types(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]
    return None if None in dims else dims


def _static_feature(node, op, feature, types, constants) -> str | None:
    """None when ``feature`` of ``node`` has an exact rewrite in older ops given what is known
    statically (rule 5), else a word on why not."""
    attrs = {a.name: _attr_value(a) for a in node.attribute}
    if op == "Constant" and (feature.startswith("value_") or feature == "sparse_value"):
        return None  # the same value as a 'value' tensor (a dense one for sparse_value)
    if (op, feature) in EXACT_REWRITES:
        return None
    if op == "Split" and feature == "num_outputs":
        shape = _static_shape(types, node.input[0])
        return None if shape is not None else "unknown input shape"
    if op == "Shape" and feature in ("start", "end"):
        return None  # Shape then Slice
    if op.startswith("Reduce") and feature == "noop_with_empty_axes":
        axes = constants(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        if len(node.input) > 1 and node.input[1] and axes is None:
            return "axes not constant"
        return None  # empty/absent axes: Identity; otherwise the attribute changes nothing
    if op in ("Pad", "Resize") and feature == "axes":
        rank = _static_rank(types, node.input[0])
        if rank is None:
            return "unknown rank"
        if op == "Pad":
            axes_name = node.input[3] if len(node.input) > 3 else ""
            if axes_name and constants(axes_name) is None:
                return "axes not constant"
        return None
    del attrs
    return "no rewrite known"


# ------------------------------------------------------------------ function bodies

def _through_function(node, src, source, target, types, constants, depth) -> str | None:
    op = node.op_type
    versions = sorted(set(src.function_opset_versions) | set(src.context_dependent_function_opset_versions))
    if not versions:
        return f"{op} does not exist at opset {target} and ONNX defines no function body for it"
    if depth > 8:
        return f"{op}: function bodies nested too deep"
    reasons = []
    for version in versions:
        try:
            body, body_types, body_constants = _body(node, src, version, types, constants)
        except _NoBody as e:
            reasons.append(f"body at opset {version}: {e}")
            continue
        why = None
        for inner in body:
            why = why_inexpressible(inner, version, target, body_types, body_constants, _depth=depth + 1)
            if why is not None:
                why = f"in its function body (opset {version}), {inner.op_type}: {why}"
                break
        if why is None:
            return None
        reasons.append(why)
    return f"{op} does not exist at opset {target}; " + "; ".join(reasons)


class _NoBody(Exception):
    pass


def _body(node, schema, version, types, constants):
    """The function body's nodes bound to the call, a types lookup and a constants lookup."""
    if version in schema.function_opset_versions:
        fn = schema.get_function_with_opset_version(version)
    else:
        input_types = []
        for name in node.input:
            t = types(name) if name else None
            if name and t is None:
                raise _NoBody(f"the type of '{name}' is unknown (the body depends on it)")
            input_types.append((t or onnx.TypeProto()).SerializeToString())
        try:
            fn = schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), input_types)
        except Exception as e:  # noqa: BLE001  (onnx refuses to build it for these inputs)
            raise _NoBody(str(e)) from e
    if isinstance(fn, bytes):
        parsed = onnx.FunctionProto()
        parsed.ParseFromString(fn)
        fn = parsed
    if fn is None:
        raise _NoBody("onnx built no body")
    given = {a.name: a for a in node.attribute}
    names = dict(zip(fn.input, node.input))
    names.update({f: "" for f in list(fn.input)[len(node.input):]})
    names.update(dict(zip(fn.output, node.output)))
    names.update({f: "" for f in list(fn.output)[len(node.output):]})
    nodes = []
    for k, inner in enumerate(fn.node):
        new = onnx.NodeProto()
        new.CopyFrom(inner)
        for i, out in enumerate(new.output):
            if out and out not in names:
                names[out] = f"__body{k}_{out}"
            new.output[i] = names.get(out, out) if out else ""
        for i, name in enumerate(new.input):
            if name:
                new.input[i] = names.get(name, name)
        kept = []
        for a in new.attribute:
            if a.ref_attr_name:
                value = given.get(a.ref_attr_name)
                if value is None:
                    d = schema.attributes.get(a.ref_attr_name)
                    value = d.default_value if d is not None and d.default_value.type else None
                if value is None:
                    continue
                bound = onnx.AttributeProto()
                bound.CopyFrom(value)
                bound.name = a.name
                kept.append(bound)
            else:
                kept.append(a)
        del new.attribute[:]
        new.attribute.extend(kept)
        if new.domain == "ai.onnx":
            new.domain = ""
        nodes.append(new)
    found: dict[str, onnx.TypeProto] = {}
    inputs = []
    for name in dict.fromkeys(n for n in node.input if n):
        t = types(name)
        if t is not None:
            inputs.append(onnx.helper.make_value_info(name, t))
    if len(inputs) == len({n for n in node.input if n}):
        graph = onnx.helper.make_graph(nodes, "body", inputs,
                                       [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o])
        opsets = [o for o in fn.opset_import] or [onnx.helper.make_opsetid("", version)]
        if not any(o.domain == "" for o in opsets):
            opsets.append(onnx.helper.make_opsetid("", version))
        try:
            inferred = onnx.shape_inference.infer_shapes(onnx.helper.make_model(graph, opset_imports=opsets))
            for vi in [*inferred.graph.value_info, *inferred.graph.output]:
                if vi.type.WhichOneof("value"):
                    found[vi.name] = vi.type
        except Exception:  # noqa: BLE001  (types stay unknown: the type checks are skipped)
            pass
    body_constants = _fold(nodes, version, lambda name: found.get(name) or types(name), constants)

    def body_types(name):
        return found.get(name) or types(name)

    def body_consts(name):
        v = body_constants.get(name)
        return v if v is not None else constants(name)

    return nodes, body_types, body_consts


def _fold(nodes, version, types, constants) -> dict[str, np.ndarray]:
    """Values of a body computable before running it: Constant nodes, Shape/Size of inputs
    whose shape is static, and deterministic nodes whose inputs are all such values (evaluated
    with onnx.reference). A function body often computes its axes this way (from the rank);
    a converter that knows the shapes can do the same, so they count as constants."""
    found: dict[str, np.ndarray] = {}

    def value(name):
        v = found.get(name)
        return v if v is not None else constants(name)

    for n in nodes:
        if not n.output or not n.output[0]:
            continue
        try:
            if n.op_type == "Constant":
                v = _constant_value(n)
            elif n.op_type in ("Shape", "Size"):
                shape = _static_shape(types, n.input[0])
                if shape is None:
                    continue
                if n.op_type == "Size":
                    v = np.array(int(np.prod(shape)), dtype=np.int64)
                else:
                    attrs = {a.name: a.i for a in n.attribute}
                    v = np.array(shape, dtype=np.int64)[attrs.get("start", 0):attrs.get("end", len(shape))]
            else:
                if n.domain not in DEFAULT_DOMAINS or any(
                        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
                    continue
                s = schema_at(n.op_type, version, deprecated_ok=True)
                if s is None or s.node_determinism == onnx.defs.OpSchema.NodeDeterminism.NonDeterministic:
                    continue
                ins = [value(i) if i else None for i in n.input]
                if any(i and v is None for i, v in zip(n.input, ins)):
                    continue
                v = _evaluate(n, ins, version)
        except Exception:  # noqa: BLE001  (not computable here: stays unknown)
            continue
        if v is not None:
            if isinstance(v, list):
                for name, x in zip(n.output, v):
                    if name and x is not None:
                        found[name] = np.asarray(x)
            else:
                found[n.output[0]] = np.asarray(v)
    return found


def _evaluate(node, inputs, version):
    import onnx.reference

    feeds, graph_inputs, init = {}, [], []
    node = onnx.NodeProto.FromString(node.SerializeToString())
    for i, (name, v) in enumerate(zip(node.input, inputs)):
        if not name:
            continue
        init.append(numpy_helper.from_array(np.asarray(v), name))
    graph = onnx.helper.make_graph([node], "fold", graph_inputs,
                                   [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o], init)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", version)])
    out = onnx.reference.ReferenceEvaluator(model).run(None, feeds)
    return [np.asarray(o) for o in out] if len(out) > 1 else np.asarray(out[0])


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name == "value_ints":
            return np.array(list(a.ints), dtype=np.int64)
        if a.name == "value_int":
            return np.array(a.i, dtype=np.int64)
        if a.name == "value_floats":
            return np.array(list(a.floats), dtype=np.float32)
        if a.name == "value_float":
            return np.array(a.f, dtype=np.float32)
    return None


def why_model_inexpressible(model: onnx.ModelProto, target: int) -> str | None:
    """None when every node of ``model``'s main graph is expressible at ``target`` (node types
    from ONNX shape inference, constants: initializers that are not graph inputs, Constant
    nodes and what folds from them), else the first node's reason."""
    source = default_opset(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001  (types stay those declared)
        inferred = model
    graph = inferred.graph
    types = {vi.name: vi.type for vi in [*graph.input, *graph.output, *graph.value_info]}
    inputs = {i.name for i in graph.input}
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer if t.name not in inputs}
    folded = _fold(list(graph.node), source, types.get, consts.get)
    consts.update(folded)
    for node in graph.node:
        why = why_inexpressible(node, source, target, types.get, consts.get)
        if why is not None:
            return f"{node.op_type}: {why}"
    return None
