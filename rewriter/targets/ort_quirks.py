"""What old ONNX Runtime releases do to half-precision models, and what a conversion for one does
about it (:mod:`rewriter.convert.for_target` asks).

* A node with no kernel for its types whose op has a function body is replaced by ONNX Runtime
  with that body; 1.15 and 1.16 write it for the opset it was first defined at, so a float16
  LayerNormalization-17 or Softmax-13 at opset 18 becomes ReduceMean / ReduceMax nodes with an
  ``axes`` attribute and the model is refused ("Unrecognized attribute: axes for operator
  ReduceMean"). :func:`inlining_rule` says which nodes; the engine expands them into the body for
  the target opset itself (``rewriter.targets.inlining`` holds the measurements).
* A float16 node with no float16 kernel is computed in float32 between Casts that ONNX Runtime
  inserts, Casts of the model's opset: 1.15 has no Cast-19 kernel and refuses a float16 Relu at
  opset 19. :func:`cast_fallback_lacking` says when an opset is out for that reason.
"""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["inlining_rule", "cast_fallback_lacking", "half_precision_blockers"]

_F16 = onnx.TensorProto.FLOAT16
_ELEM = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16}


def onnxruntime_release(runtime) -> str | None:
    """The MAJOR.MINOR of an ONNX Runtime target (as its data names it), None for another."""
    return None if runtime is None else runtime.release_of("onnxruntime")


def inlining_rule(runtime):
    """``(op, schema version, opset) -> element types`` (TensorProto) in which ``runtime`` (a
    :class:`rewriter.targets.Target`) replaces a node of the op by its function body written for
    an older opset, so that a model of ``opset`` holding one is refused; None when the runtime
    never does."""
    release = onnxruntime_release(runtime)
    if release is None:
        return None
    from rewriter.targets.inlining import inlines_wrongly

    def types(op: str, version: int, opset: int) -> frozenset:
        return frozenset(e for d, e in _ELEM.items() if inlines_wrongly(release, op, version, opset, d))

    return types


def _holds(model: onnx.ModelProto, elems: frozenset) -> bool:
    """Whether a graph of ``model`` declares a tensor of one of ``elems`` (an input, output,
    value_info, initializer, Constant value or Cast target)."""
    for scope in traversal.iter_scopes(model):
        body = scope.body
        if not scope.is_function:
            if any(t.data_type in elems for t in body.initializer):
                return True
            if any(v.type.tensor_type.elem_type in elems for v in (*body.input, *body.output, *body.value_info)):
                return True
        for n in body.node:
            for a in n.attribute:
                if (a.name == "value" and a.t.data_type in elems) or (n.op_type == "Cast" and a.name == "to"
                                                                       and a.i in elems):
                    return True
    return False


def half_nodes(model: onnx.ModelProto, inferred=None, elems: frozenset = frozenset({_F16})):
    """``(scope, node, the elem types of ``elems`` it reads or writes)`` for each default-domain node of
    the model's graphs (not functions) that touches one, by the model's shape inference
    (``inferred`` as :func:`rewriter.graph.inferred.inferred_model` takes it; run only when the model
    declares such a tensor at all)."""
    if not _holds(model, elems):
        return []
    from rewriter.graph.inferred import inferred_model

    typed = inferred_model(inferred, model) or model
    found = []
    for scope in traversal.iter_scopes(typed):
        if scope.is_function:
            continue
        body = scope.body
        names = {t.name: t.data_type for t in body.initializer if t.data_type in elems}
        names.update({v.name: v.type.tensor_type.elem_type for v in (*body.input, *body.output, *body.value_info)
                      if v.type.tensor_type.elem_type in elems})
        for n in body.node:
            touched = frozenset(names[x] for x in (*n.input, *n.output) if x in names)
            if touched and is_default_domain(n.domain):
                found.append((scope, n, touched))
    return found


def float16_ops(model: onnx.ModelProto, inferred=None) -> set[str]:
    """The default-domain ops of the graph nodes that read or write a float16 tensor (:func:`half_nodes`)."""
    return {n.op_type for _, n, _ in half_nodes(model, inferred)}


def cast_fallback_lacking(model: onnx.ModelProto, runtime, inferred=None):
    """``opset -> bool``: whether ``runtime`` refuses ``model`` at that default-domain opset because
    a float16 node without a float16 kernel (``rewriter.targets.half_kernels``: not known to have
    one) needs Casts of that opset, which the runtime lacks. None when that never happens (not ONNX
    Runtime, no Cast missing, no float16 node)."""
    from rewriter.graph import schemas

    release = onnxruntime_release(runtime)
    if release is None or not any(runtime.lacks("", "Cast", v) for v in schemas.schema_versions("Cast")):
        return None
    half = float16_ops(model, inferred)
    if not half:
        return None
    from rewriter.targets.half_kernels import has_half_kernel

    def lacking(opset: int) -> bool:
        if not runtime.lacks("", "Cast", schemas.schema_version_at("Cast", opset)):
            return False
        return any(has_half_kernel(release, "", op, v, "float16") is not True
                   for op in half if (v := schemas.schema_version_at(op, opset)) is not None)

    return lacking


def half_precision_blockers(model: onnx.ModelProto, runtime, inferred=None) -> list[str]:
    """What stops ONNX Runtime release ``runtime`` from loading the half-precision nodes of ``model``
    as they are (for :func:`rewriter.targets.blockers`): nodes it would inline wrongly, and float16
    nodes whose fallback Casts it lacks at the model's opset; empty for another runtime."""
    from rewriter.graph import schemas
    from rewriter.targets.inlining import inlines_wrongly

    release = onnxruntime_release(runtime)
    opset = traversal.opset_version(model.opset_import)
    if release is None or opset is None:
        return []
    names = {e: d for d, e in _ELEM.items()}
    nodes = half_nodes(model, inferred, frozenset(_ELEM.values()))
    inlined: dict[tuple[str, int, str], list[str]] = {}
    for scope, n, touched in nodes:
        v = schemas.schema_version_at(n.op_type, opset)
        for e in sorted(touched):
            if v is not None and inlines_wrongly(release, n.op_type, v, opset, names[e]):
                inlined.setdefault((n.op_type, v, names[e]), []).append(traversal.node_label(n, scope))
    found = [f"{op}-{v} in {dtype} at opset {opset}, which {runtime.name} has no kernel for and replaces by its "
             f"function body written for an older opset (refused: 'Unrecognized attribute'): {_shown(labels)}"
             for (op, v, dtype), labels in sorted(inlined.items())]
    lacking = cast_fallback_lacking(model, runtime, inferred)
    if lacking is not None and lacking(opset):
        from rewriter.targets.half_kernels import has_half_kernel

        labels = [traversal.node_label(n, scope) for scope, n, touched in nodes if _F16 in touched
                  and (v := schemas.schema_version_at(n.op_type, opset)) is not None
                  and has_half_kernel(release, "", n.op_type, v, "float16") is not True]
        cast = schemas.schema_version_at("Cast", opset)
        found.append(f"float16 nodes without a float16 kernel at opset {opset}: {runtime.name} computes them in "
                     f"float32 between Casts of that opset, and has no Cast-{cast}: {_shown(labels)}")
    return found


def _shown(labels: list[str]) -> str:
    from rewriter.graph.names import first_few

    return first_few(labels)
