"""The ``ai.onnx.ml`` domain: every node stepped between its schema versions, up or down.

The domain's schema history is short (``onnx.defs``): LabelEncoder 1, 2, 4;
TreeEnsembleClassifier and TreeEnsembleRegressor 1, 3, 5 (5 deprecated: from ML opset 5 the
op is TreeEnsemble, which exists only there); every other op has one version. Each step is
classified in :data:`ML_STEPS` (a test compares it with ``onnx.defs``) and taken by the
adapter registered for it (``rewriter.convert.adapters.ml``, ``registry.register(...,
domain="ai.onnx.ml")``), or kept when it only widened what the op accepts. A node that
cannot go is a :class:`rewriter.convert.blockers.Blocker`, as in the default domain.
"""

from __future__ import annotations

from typing import NamedTuple

import onnx

from rewriter.convert import registry
from rewriter.convert.blockers import Blocker, Label
from rewriter.errors import ConversionError
from rewriter.graph import traversal

__all__ = ["ML_DOMAIN", "ML_STEPS", "REPLACED", "Paired", "convert_ml", "ml_opset", "latest", "paired_note",
           "paired_with"]

ML_DOMAIN = "ai.onnx.ml"

# every adjacent schema step of the domain: "keep" (the newer schema accepts every node of the
# older one as it is), "own" (an adapter), "replace" (the op becomes another op)
ML_STEPS = {
    ("LabelEncoder", 1, 2): "own", ("LabelEncoder", 2, 1): "own",
    ("LabelEncoder", 2, 4): "keep", ("LabelEncoder", 4, 2): "own",
    ("TreeEnsembleClassifier", 1, 3): "keep", ("TreeEnsembleClassifier", 3, 1): "own",
    ("TreeEnsembleRegressor", 1, 3): "keep", ("TreeEnsembleRegressor", 3, 1): "own",
    ("TreeEnsembleClassifier", 3, 5): "replace", ("TreeEnsembleClassifier", 5, 3): "keep",
    ("TreeEnsembleRegressor", 3, 5): "replace", ("TreeEnsembleRegressor", 5, 3): "keep",
}


# ops that become another op where they do not exist (TreeEnsemble below ML opset 5)
REPLACED = frozenset({"TreeEnsemble"})


class Paired(NamedTuple):
    """What came with a default-domain opset (``onnx.helper.VERSION_TABLE``): the first onnx
    release that has it, and that release's ai.onnx.ml opset and IR version."""

    opset: int
    release: str
    ir_version: int
    ml_opset: int


def paired_with(opset: int) -> Paired:
    """The ai.onnx.ml opset and IR version that came with default-domain opset ``opset``: those
    of the first onnx release whose opset is the newest not above it (a runtime built with that
    release loads them). The runtime data pairs the opsets the same way
    (``tools/runtime_data/build_tables.py``)."""
    rows = [r for r in onnx.helper.VERSION_TABLE if r[2] <= opset] or [onnx.helper.VERSION_TABLE[0]]
    newest = max(r[2] for r in rows)
    release, ir_version, _, ml_version = next(r for r in rows if r[2] == newest)[:4]
    return Paired(opset, release, ir_version, ml_version)


def paired_note(paired: Paired, source_ml: int, target_ml: int) -> str:
    """What a conversion of a model importing only ai.onnx.ml to ``paired.opset`` did, in words."""
    came = (f"opset {paired.opset} came with ai.onnx.ml {paired.ml_opset} and IR {paired.ir_version} "
            f"(onnx {paired.release})")
    done = (f"ai.onnx.ml {source_ml} kept" if target_ml == source_ml
            else f"ai.onnx.ml {source_ml} lowered to {target_ml}")
    return (f"the model imports only ai.onnx.ml: {done} for a runtime of opset {paired.opset} ({came}); "
            f"no default-domain import added (no node needs one)")


def latest() -> int:
    """The newest ai.onnx.ml opset the installed onnx knows."""
    return max(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == ML_DOMAIN)


def ml_opset(opset_import) -> int | None:
    return traversal.opset_version(opset_import, ML_DOMAIN)


def _blocker(label: Label, op: str, step: str, reason: str, works: str) -> Blocker:
    return Blocker(str(label), op, step, reason, works, name=label.name, where=label.where)


def _steps(op: str, src: int, dst: int) -> list[tuple[int, int]]:
    versions = list(registry.schema_versions(op, ML_DOMAIN))
    i, j = versions.index(src), versions.index(dst)
    if i <= j:
        return [(versions[k], versions[k + 1]) for k in range(i, j)]
    return [(versions[k], versions[k - 1]) for k in range(i, j, -1)]


class _Ctx:
    """What an ML adapter may ask: the element type of a value (from ONNX type inference)."""

    def __init__(self, types: dict[str, int], step: tuple[int, int]):
        self._types, self.step = types, step

    def elem_type(self, name: str) -> int | None:
        return self._types.get(name)


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - lenient: what inference cannot say stays unknown
        inferred = model
    found = {}
    for scope in traversal.iter_scopes(inferred):
        values = [*scope.body.value_info] + ([] if scope.is_function else [*scope.body.input, *scope.body.output])
        for v in values:
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
                found[v.name] = v.type.tensor_type.elem_type
        if not scope.is_function:
            for t in scope.body.initializer:
                found[t.name] = t.data_type
    return found


def convert_ml(model: onnx.ModelProto, to_version: int, report, lacks=None) -> list[Blocker]:
    """Step every ``ai.onnx.ml`` node of ``model`` (in place) to ML opset ``to_version``; set the
    domain's opset imports; returns the blockers (the model is then not to be used)."""
    source = ml_opset(model.opset_import)
    if source is None:
        return []
    blockers: list[Blocker] = []
    types: dict[str, int] | None = None
    for scope in list(traversal.iter_scopes(model)):
        body = scope.body
        src_opset = ml_opset(body.opset_import) if scope.is_function else source
        if src_opset is None:
            continue
        for k, node in enumerate(body.node):
            if node.domain != ML_DOMAIN:
                continue
            op = node.op_type
            report.nodes[op] += 1
            label = Label(node, scope)
            versions = registry.schema_versions(op, ML_DOMAIN)
            src = registry.schema_version_at_domain(op, src_opset, ML_DOMAIN)
            dst = registry.schema_version_at_domain(op, to_version, ML_DOMAIN)
            if not versions or src is None:
                blockers.append(_blocker(label, op, "-", f"{op} is not an operator of {ML_DOMAIN} at opset "
                                        f"{src_opset}", "no opset"))
                continue
            if dst is None or (dst != src and onnx.defs.get_schema(op, dst, ML_DOMAIN).deprecated):
                if types is None:
                    types = _elem_types(model)
                replaced = _replace(node, op, src, dst, to_version, label, blockers, report,
                                    types.get(node.input[0]) if node.input else None)
                if replaced is not None:
                    body.node[k].CopyFrom(replaced)
                continue
            if types is None and any(ML_STEPS.get((op, a, b)) == "own" for a, b in _steps(op, src, dst)):
                types = _elem_types(model)
            for a, b in _steps(op, src, dst):
                kind = ML_STEPS.get((op, a, b))
                if kind == "keep":
                    report.steps[(op, "type-only")] += 1
                    continue
                adapter = registry.lookup(op, a, b, domain=ML_DOMAIN)
                try:
                    adapter(node, _Ctx(types or {}, (a, b)))
                except ConversionError as e:
                    works = f"ML opsets >= {a}" if b < a else f"ML opsets <= {b - 1}"
                    blockers.append(_blocker(label, op, f"{a} -> {b} (ai.onnx.ml)", str(e), works))
                    break
                report.steps[(op, registry.kind(op, a, b, domain=ML_DOMAIN))] += 1
                report.changes[f"{op} {a} -> {b}"] += 1
            else:
                if _steps(op, src, dst):
                    report.own[op] += 1
            if lacks is not None and dst is not None and lacks(ML_DOMAIN, op, dst):
                blockers.append(_blocker(label, op, "-", f"the runtime targeted does not implement {op}-{dst} of "
                                        f"{ML_DOMAIN}", "a runtime that implements it"))
    if not blockers:
        for opsets in [model.opset_import, *(f.opset_import for f in model.functions)]:
            for entry in opsets:
                if entry.domain == ML_DOMAIN:
                    entry.version = to_version
    return blockers


def _replace(node, op, src, dst, to_version, label, blockers, report, elem_type):
    """Ops that become another op between ML opsets: TreeEnsembleRegressor <-> TreeEnsemble."""
    try:
        from rewriter.convert.adapters import ml_trees
    except ImportError:  # pragma: no cover - shipped with the package
        ml_trees = None
    if op == "TreeEnsemble" and dst is None and ml_trees is not None:
        try:
            new = ml_trees.tree_ensemble_to_regressor(node, elem_type)
        except ConversionError as e:
            blockers.append(_blocker(label, op, "5 -> 3 (ai.onnx.ml)", str(e), "ML opsets >= 5"))
            return None
        report.changes["TreeEnsemble -> TreeEnsembleRegressor"] += 1
        report.steps[(op, "replaced by TreeEnsembleRegressor")] += 1
        report.own[op] += 1
        return new
    if op == "TreeEnsembleRegressor" and dst is not None and ml_trees is not None:
        try:
            new = ml_trees.regressor_to_tree_ensemble(node, elem_type)
        except ConversionError as e:
            blockers.append(_blocker(label, op, f"{src} -> {dst} (ai.onnx.ml)", str(e), "ML opsets <= 4"))
            return None
        report.changes["TreeEnsembleRegressor -> TreeEnsemble"] += 1
        report.steps[(op, "replaced by TreeEnsemble")] += 1
        report.own[op] += 1
        return new
    if dst is None:
        first = registry.schema_versions(op, ML_DOMAIN)[0]
        reason = f"{op} exists only from ML opset {first} and has no older equivalent rewriter can write"
        blockers.append(_blocker(label, op, "expand", reason, f"ML opsets >= {first}"))
    else:
        reason = (f"{op}-{dst} is deprecated at ML opset {to_version} (TreeEnsemble replaces it) and rewriter does "
                  f"not rewrite {op} as TreeEnsemble")
        blockers.append(_blocker(label, op, f"{src} -> {dst} (ai.onnx.ml)", reason, "ML opsets <= 4"))
    return None
