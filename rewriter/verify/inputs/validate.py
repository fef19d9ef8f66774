"""Up-front checks of an input model, so that bad input gets one clear error naming the node.

``validate_model`` refuses: a main graph without outputs; a default-domain node whose op has
no schema at the opset its scope imports (an empty or unknown op type, or an op newer than the
declared opset); a cycle; a node input or graph output that nothing defines; a ReduceProd with
axes out of range, duplicate axes, an axes input that is not a 1-D int64 tensor, or a
keepdims / noop_with_empty_axes that is not 0 or 1. It reads no weights except constant axes
tensors. ``checker_complaint`` says what ``onnx.checker`` refuses in a model, if anything.
"""

from __future__ import annotations

import logging
import math
import os

import onnx

from rewriter.errors import ModelLoadError, RewriterError
from rewriter.graph import traversal
from rewriter.graph.traversal import Scope, node_label
from rewriter.graph.ort_onnx_domain import misplaced
from rewriter.io import check_model
from rewriter.io.tensors import all_tensors, expected_bytes, tensor_name
from rewriter.verify.inputs.utf8 import all_text_utf8
from rewriter.verify.inputs.reduce_prod_inputs import check_reduce_prods
from rewriter.graph.schemas import is_default_domain

__all__ = ["validate_model", "checker_complaint", "check_input", "input_fault", "blame_input"]

logger = logging.getLogger(__name__)


def _free_names(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph uses from its enclosing scopes."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    used = {v.name for v in graph.output}
    for node in graph.node:
        defined.update(o for o in node.output if o)
        used.update(i for i in node.input if i)
        for g in traversal.subgraphs(node):
            used |= _free_names(g)
    return used - defined


def _defined(scope: Scope) -> set[str]:
    body = scope.body
    if scope.is_function:
        names = set(body.input)
    else:
        names = {v.name for v in body.input} | {t.name for t in body.initializer}
        names |= {t.values.name for t in body.sparse_initializer}
    for node in body.node:
        names.update(o for o in node.output if o)
    return names


def _check_structure(scope: Scope, visible: set[str], path: str) -> None:
    body = scope.body
    producer: dict[str, int] = {}
    for i, node in enumerate(body.node):
        for o in node.output:
            if o:
                producer[o] = i
    deps: list[set[int]] = []
    for i, node in enumerate(body.node):
        needed = {n for n in node.input if n}
        for g in traversal.subgraphs(node):
            needed |= _free_names(g)
        for name in needed:
            if name not in visible:
                raise RewriterError(f"{path}: {node_label(node, scope)}: input '{name}' is not "
                                    "defined by any node, input or initializer")
        deps.append({producer[n] for n in needed if n in producer})
    outputs = body.output if scope.is_function else [v.name for v in body.output]
    for name in outputs:
        if name and name not in visible:
            raise RewriterError(f"{path}: output '{name}' of {scope.location} is not defined")
    users: list[list[int]] = [[] for _ in body.node]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if done < len(deps):
        stuck = next(i for i, w in enumerate(waiting) if w)
        raise RewriterError(f"{path}: {node_label(body.node[stuck], scope)}: is on a cycle "
                            "(it depends on its own output)")


def _in_function(scope: Scope) -> bool:
    while scope.parent is not None:
        scope = scope.parent
    return scope.is_function


def _check_node_text(scope: Scope, path: str) -> None:
    """Protobuf hands back bytes for strings that are not UTF-8: refuse them with the node."""
    for i, node in enumerate(scope.body.node):
        try:  # str.join and + raise TypeError on a bytes item, at C speed
            "".join(node.input) + "".join(node.output) + node.op_type + node.domain + node.name
            if node.attribute:
                "".join([a.name for a in node.attribute])
        except TypeError:
            raise RewriterError(f"{path}: node #{i} in {scope.location} has a name, type, input, output "
                                "or attribute name that is not valid UTF-8") from None


def checker_complaint(model: onnx.ModelProto, *, external: bool | None = None) -> str | None:
    """None when ``onnx.checker.check_model`` accepts the model (its external data checked where
    it lives), else the checker's message on one line. ``external=False``: no tensor is a reference."""
    try:
        check_model(model, full_check=False, external=external)
    except Exception as e:  # ValidationError, and whatever else the checker raises
        text = " ".join(str(e).split())
        return text.replace("==> Context: Bad node spec for node.", "in a node:") or type(e).__name__
    return None


def _check_schemas(scopes: list[Scope], path: str) -> None:
    """Every default-domain node's op has a schema at the opset its scope imports."""
    latest = onnx.defs.onnx_opset_version()
    known: dict[tuple[str, int], str | None] = {}
    for scope in scopes:
        opset = scope.opset
        for node in scope.body.node:
            if not is_default_domain(node.domain) or misplaced(node, opset):  # ONNX Runtime's own: it runs them
                continue
            key = (node.op_type, opset or 0)
            if key not in known:
                known[key] = _schema_problem(node.op_type, opset, latest)
            if known[key]:
                raise RewriterError(f"{path}: {node_label(node, scope)}: {known[key]}")


def _schema_problem(op_type: str, opset: int | None, latest: int) -> str | None:
    if not op_type:
        return "the node has no op type"
    if opset is None:
        return f"op {op_type} is in the default domain, which is not imported"
    try:
        onnx.defs.get_schema(op_type, opset, "")
        return None
    except onnx.defs.SchemaError:
        pass
    since, version = None, latest
    while version >= 1:
        try:
            since = onnx.defs.get_schema(op_type, version, "").since_version
        except onnx.defs.SchemaError:
            break
        version = since - 1
    if since is None:
        return f"op {op_type} is not an ONNX operator (no schema in the default domain)"
    return (f"op {op_type} has no schema at the declared default-domain opset {opset} (it exists from "
            f"opset {since}): the opset import does not match the nodes")


def _names(scope: Scope):
    body = scope.body
    if scope.is_function:
        yield from (body.name, body.domain, *body.input, *body.output, *body.attribute)
        yield from (o.domain for o in body.opset_import)
    else:
        yield body.name
        yield from (v.name for v in (*body.input, *body.output, *body.value_info))
        yield from (t.name for t in body.initializer)


def _check_text(scopes: list[Scope], path: str) -> None:
    """Protobuf hands back bytes for string fields that are not UTF-8: refuse them here."""
    for scope in scopes:
        if not all(type(n) is str for n in _names(scope)):
            raise RewriterError(f"{path}: a name in {scope.location} is not valid UTF-8")


_TYPED = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _check_tensors(model: onnx.ModelProto, path: str) -> bool:
    """Every tensor has a known data type, non-negative dims and as much data as they say.
    Returns whether some tensor is a reference (external data)."""
    external = False
    for t, _ in all_tensors(model):
        what = f"{path}: {tensor_name(t)}"
        try:
            onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        except (KeyError, TypeError, ValueError):
            raise RewriterError(f"{what}: unknown or unsupported data type {t.data_type}") from None
        if any(d < 0 for d in t.dims):
            raise RewriterError(f"{what}: negative dimension in {list(t.dims)}")
        if t.data_location == onnx.TensorProto.EXTERNAL:
            external = True
            continue  # checked against its file by rewriter.io.load_model
        numel = math.prod(t.dims)
        if t.HasField("raw_data"):
            if t.data_type == onnx.TensorProto.STRING:
                raise RewriterError(f"{what}: a string tensor cannot hold raw data")
            expected = expected_bytes(t)
            if expected is not None and len(t.raw_data) != expected:
                raise RewriterError(f"{what}: raw data has {len(t.raw_data)} bytes, its type and dims "
                                    f"{list(t.dims)} need {expected}")
            continue
        counts = [len(getattr(t, f)) for f in _TYPED if len(getattr(t, f))]
        if len(counts) > 1 or (counts and counts[0] not in (numel, 2 * numel, (numel + 1) // 2, (numel + 3) // 4)):
            raise RewriterError(f"{what}: holds {sum(counts)} values, its dims {list(t.dims)} need {numel}")
        if not counts and numel:
            raise RewriterError(f"{what}: has dims {list(t.dims)} but no data")
    return external


_KNOWN_TYPES = frozenset(onnx.TensorProto.DataType.values())


def _check_value_types(scopes: list[Scope], path: str) -> None:
    """Declared tensor element types (inputs, outputs, value_info, nested in sequences and
    optionals) are ONNX data types (onnx.checker does not look)."""
    def elem_types(tp):
        which = tp.WhichOneof("value")
        if which in ("tensor_type", "sparse_tensor_type"):
            yield getattr(tp, which).elem_type
        elif which == "sequence_type":
            yield from elem_types(tp.sequence_type.elem_type)
        elif which == "optional_type":
            yield from elem_types(tp.optional_type.elem_type)
        elif which == "map_type":
            yield tp.map_type.key_type
            yield from elem_types(tp.map_type.value_type)

    for scope in scopes:
        if scope.is_function:
            continue
        for v in (*scope.body.input, *scope.body.output, *scope.body.value_info):
            bad = [e for e in elem_types(v.type) if e not in _KNOWN_TYPES]
            if bad:
                raise RewriterError(f"{path}: value '{v.name}' in {scope.location} declares element type {bad[0]}, "
                                    "which is not an ONNX data type")


def _check_versions(model: onnx.ModelProto, path: str) -> None:
    latest = onnx.defs.onnx_opset_version()
    if model.ir_version > onnx.IR_VERSION:
        raise RewriterError(f"{path}: IR version {model.ir_version} is newer than this tool reads "
                            f"(up to {onnx.IR_VERSION})")
    imports = [("the model", model.opset_import)]
    imports += [(f"function '{f.domain}:{f.name}'", f.opset_import) for f in model.functions]
    for where, opset_import in imports:
        for o in opset_import:
            if is_default_domain(o.domain) and not 1 <= o.version <= latest:
                raise RewriterError(f"{path}: {where} imports default-domain opset {o.version}, "
                                    f"outside 1..{latest}")


def validate_model(model: onnx.ModelProto, path: str | os.PathLike = "<model>", *,
                   inferred=None, rank_checks: list | None = None) -> str | None:
    """Raise RewriterError naming ``path`` and the node when ``model`` is malformed.

    Returns what ``onnx.checker`` refuses in the model (as :func:`checker_complaint`), or None:
    the checker runs once here, for this walk and for the caller's policy. ``inferred``: the
    model after (lenient) ONNX shape inference when the caller has it already, or a
    :class:`rewriter.graph.inferred.LazyInference` to share with later work. ``rank_checks``: a
    list; given with a LazyInference, the ReduceProd checks that need it wait there (a
    :class:`rewriter.verify.inputs.reduce_prod_inputs.PendingRankChecks` whose ``finish`` the caller
    runs before writing anything).
    """
    path = os.fspath(path)
    base_dir = os.path.dirname(os.path.abspath(path))
    for o in model.opset_import:  # iter_scopes needs these before anything else
        if not isinstance(o.domain, str):
            raise RewriterError(f"{path}: an opset_import domain is not valid UTF-8")
    _check_versions(model, path)
    if not model.graph.output:
        raise RewriterError(f"{path}: the main graph has no outputs (nothing it computes could be kept)")
    scopes = list(traversal.iter_scopes(model))
    text_ok = all_text_utf8(model)  # at C speed; the walks below name what is not
    if not text_ok:
        _check_text(scopes, path)
    _check_value_types(scopes, path)
    external = _check_tensors(model, path)
    if not text_ok:  # a string nobody reads (a doc string) passes, as it always did
        for scope in scopes:
            _check_node_text(scope, path)
    _check_schemas(scopes, path)
    complaint = checker_complaint(model, external=external)
    checked = complaint is None  # it does not look inside functions that are never called
    visible_of: dict[int, set[str]] = {}
    for scope in scopes:
        if checked and not _in_function(scope):
            continue
        parent = visible_of.get(id(scope.parent), set()) if scope.parent else set()
        visible = parent | _defined(scope)
        visible_of[id(scope)] = visible
        _check_structure(scope, visible, path)
    pending = check_reduce_prods(model, scopes, path, base_dir, inferred, defer=rank_checks is not None)
    if pending:
        rank_checks.append(pending)
    return complaint


def input_fault(where: str, complaint: str, what: str) -> str:
    """The message for an input that ``onnx.checker`` refuses: the input's fault, never the rewrite's."""
    return f"{where}: the input is not a valid ONNX model (onnx.checker: {complaint}); {what}"


def check_input(model: onnx.ModelProto, where: str | os.PathLike = "<model>", *, allow_invalid: bool = False,
                override: str = "allow_invalid_input=True", inferred=None, rank_checks: list | None = None) -> str | None:
    """The one input check of every entry point (the command line's and the Python API's).

    Runs :func:`validate_model`; its refusals (a node, tensor or value named) are raised as
    ModelLoadError. A model ``onnx.checker`` refuses is refused too, saying that ``override``
    processes it anyway, unless ``allow_invalid``: then the checker's complaint is returned for
    the caller to warn with (None when the checker accepts the model).
    """
    where = os.fspath(where)
    try:
        complaint = validate_model(model, where, inferred=inferred, rank_checks=rank_checks)
    except ModelLoadError:
        raise
    except RewriterError as e:
        raise ModelLoadError(str(e)) from None
    if complaint and not allow_invalid:
        raise ModelLoadError(input_fault(where, complaint, f"{override} processes it anyway"))
    return complaint


def blame_input(model: onnx.ModelProto, error: RewriterError, where: str | os.PathLike = "<model>") -> None:
    """Raise ModelLoadError when ``error`` repeats what ``onnx.checker`` says of the input itself
    (a model let in with ``allow_invalid_input``): the input's fault, not the conversion's."""
    complaint = checker_complaint(model)
    if complaint and complaint.split(" in a node:")[0].split("==>")[0].strip().rstrip(".") in str(error):
        raise ModelLoadError(input_fault(os.fspath(where), complaint, "the conversion holds its result to the "
                                         "checker, so it cannot convert it")) from None
