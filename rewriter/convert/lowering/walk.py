"""Lowering every chosen node of a model, in every scope, or none: the walk behind
:func:`rewriter.convert.lowering.lower_nodes`."""

from __future__ import annotations

import collections
import dataclasses
import logging

import onnx

from rewriter.convert.blockers import Blocker
from rewriter.convert.lowering.context import NodeContext
from rewriter.convert.lowering.emit import MIN_OPSET, Emitter, ScopeWriter
from rewriter.convert.lowering.registry import LOWERINGS, Blocked
from rewriter.errors import ConversionError
from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["LoweringReport", "LoweringBlocked", "lower_scopes", "model_names", "read_names"]

logger = logging.getLogger(__name__)
MAX_LISTED = 20


@dataclasses.dataclass
class LoweringReport:
    """What a lowering did: nodes lowered per (domain, op), how exact each is, the default-domain
    opset the new nodes are written at (and the model's before, when the lowering raised it)."""

    opset: int | None = None
    source_opset: int | None = None
    lowered: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (domain, op) -> nodes
    removed: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # unread outputs' nodes
    exactness: dict = dataclasses.field(default_factory=dict)  # (domain, op) -> set of statements
    nodes_added: int = 0
    notes: list = dataclasses.field(default_factory=list)
    retyped: list = dataclasses.field(default_factory=list)  # warnings: graph outputs whose type (or dims) changed

    @property
    def changed(self) -> bool:
        return bool(self.lowered or self.removed)

    def to_dict(self) -> dict:
        return {"opset": self.opset, "source_opset": self.source_opset,
                "lowered": {f"{d}::{o}": n for (d, o), n in sorted(self.lowered.items())},
                "removed": {f"{d}::{o}": n for (d, o), n in sorted(self.removed.items())},
                "exactness": {f"{d}::{o}": sorted(v) for (d, o), v in sorted(self.exactness.items())},
                "nodes_added": self.nodes_added, "notes": list(self.notes), "retyped_outputs": list(self.retyped)}


class LoweringBlocked(ConversionError):
    """Some chosen nodes cannot be lowered; ``blockers`` lists every one (nothing was changed)."""

    def __init__(self, blockers: list[Blocker]):
        self.blockers = blockers
        shown = "; ".join(f"{b.node}: {b.reason}" for b in blockers[:MAX_LISTED])
        more = f"; and {len(blockers) - MAX_LISTED} more" if len(blockers) > MAX_LISTED else ""
        super().__init__(f"cannot lower {len(blockers)} node(s) to standard ONNX: {shown}{more}")


def model_names(model: onnx.ModelProto) -> set:
    """Every value and node name of every scope: fresh names avoid all of them."""
    used = set()
    for scope in traversal.iter_scopes(model):
        body = scope.body
        if scope.is_function:
            used.update(body.input, body.output)
        else:
            used.update(v.name for v in [*body.input, *body.output, *body.value_info])
            used.update(t.name for t in body.initializer)
        for n in body.node:
            used.update(n.input)
            used.update(n.output)
            used.add(n.name)
    used.discard("")
    return used


def read_names(model: onnx.ModelProto) -> set:
    """Names something reads: node inputs (subgraphs included), graph and function outputs."""
    read = set()
    for scope in traversal.iter_scopes(model):
        body = scope.body
        read.update(body.output if scope.is_function else (v.name for v in body.output))
        for n in body.node:
            read.update(n.input)
    return read


def _chosen(node: onnx.NodeProto, ops) -> bool:
    if is_default_domain(node.domain):
        return False
    return ops is None or (node.domain, node.op_type) in ops


def _lower_one(node, scope, writer, types, read, report, model_imports) -> list[onnx.NodeProto]:
    fn = LOWERINGS.get((node.domain, node.op_type))
    if fn is None:
        raise Blocked(f"no lowering of {node.domain}::{node.op_type} to standard ONNX")
    prefix = node.name or node.op_type
    emit = Emitter(writer, prefix)
    imports = scope.root.body.opset_import if scope.root.is_function else model_imports
    version = next((o.version for o in imports if o.domain == node.domain), None)
    if version is None:
        version = next((o.version for o in model_imports if o.domain == node.domain), 1)
    ctx = NodeContext(node, traversal.node_label(node, scope), types, read, emit, version, scope=scope)
    fn(ctx)
    key = (node.domain, node.op_type)
    if not emit.nodes and not any(ctx.used(i) for i in range(len(node.output))):
        report.removed[key] += 1
    else:
        report.lowered[key] += 1
        report.exactness.setdefault(key, set()).add(ctx.exactness or fn.exactness)
    report.nodes_added += len(emit.nodes)
    return emit.nodes


def lower_scopes(model: onnx.ModelProto, ops, opset: int, types: dict, report: LoweringReport,
                 in_functions: dict | None = None, final_opset: int | None = None) -> list[Blocker]:
    """Lower the chosen nodes of ``model`` in place (children scopes first, so that rebuilding a
    parent's node list copies finished subgraphs); returns the blockers (then ``model`` is scratch)."""
    used, read = model_names(model), read_names(model)
    blockers: list[Blocker] = []
    replaced: set = set()  # what the lowered nodes read: removed below when nothing else reads it
    scopes = list(traversal.iter_scopes(model))
    for scope in reversed(scopes):
        body = scope.body
        if not any(_chosen(n, ops) for n in body.node):
            continue
        fopset = traversal.opset_version(body.opset_import) if scope.is_function else None
        root = scope.root.body
        scope_types = (in_functions or {}).get((root.domain, root.name), {}) if scope.root.is_function else types
        writer = ScopeWriter(used, scope.is_function, fopset or opset, final_opset)
        new_nodes = []
        for node in body.node:
            if not _chosen(node, ops):
                new_nodes.append(node)
                continue
            try:
                if writer.opset < MIN_OPSET:
                    raise Blocked(f"the function imports default-domain opset {writer.opset}; lowered nodes "
                                  f"need {MIN_OPSET} or newer")
                new_nodes.extend(_lower_one(node, scope, writer, scope_types, read, report, model.opset_import))
                replaced.update(node.input)
            except Blocked as b:
                blockers.append(Blocker(traversal.node_label(node, scope), node.op_type, "lower", b.reason,
                                        "ONNX Runtime (which has the op)", name=node.name, where=scope.location))
        if blockers:
            continue
        copies = [onnx.NodeProto() for _ in new_nodes]
        for c, n in zip(copies, new_nodes):
            c.CopyFrom(n)
        del body.node[:]
        body.node.extend(copies)
        if not scope.is_function:
            body.initializer.extend(writer.initializers)
            _retype(model, body, writer.retyped, report)
    if not blockers and replaced:
        from rewriter.graph import unused_values

        unused_values.remove_unused(model, only=replaced - {""})  # (MatMulNBits' packed codes)
    return blockers


def _retype(model: onnx.ModelProto, graph: onnx.GraphProto, changes: list, report: LoweringReport) -> None:
    """Give each changed graph output its new type and doc_string (its value_info entry goes), record
    the model metadata entry that keeps what the old type said, and the warning."""
    for change in changes:
        out = next(o for o in graph.output if o.name == change.name)
        out.type.CopyFrom(change.type)
        out.doc_string = change.doc
        stale = [v for v in graph.value_info if v.name != change.name]
        del graph.value_info[:]
        graph.value_info.extend(stale)
        key, value = change.metadata
        kept = [p for p in model.metadata_props if p.key != key]
        del model.metadata_props[:]
        model.metadata_props.extend(kept)
        model.metadata_props.add(key=key, value=value)
        report.retyped.append(change.warning)
