"""Ops the target lacks (or has only as a deprecated schema): the engine's collaborator that
expands a node into its ONNX function body (built for the node's types and attributes, then
converted node by node), renames an op that was an older one renamed (Resize-10 is Upsample-9),
or replaces a node of constant inputs by its value, or takes an exact decomposition of an op ONNX
defines without a body (``rewriter.convert.decompositions``); else blocks naming the op's first
opset.

:class:`Expansion` works through a :class:`Walk` (the engine) and a :class:`Frame` passed with
every call: it converts the nodes it makes by ``walk.convert`` (and the bodies of their subgraphs
by ``walk.convert_body``), says no by ``walk.block`` and counts by ``walk.count``; it keeps no
state of its own."""

from __future__ import annotations

import logging
from typing import Protocol

import onnx

from rewriter.convert import decompositions, registry
from rewriter.convert.blockers import Blocker
from rewriter.convert.context import NodeContext
from rewriter.convert.frame import Frame
from rewriter.convert.function_bodies import evaluate_constant_node, fold_shape_arithmetic, function_body, inline
from rewriter.convert.splice import named
from rewriter.convert.model_state import ConversionState
from rewriter.errors import ConversionError
from rewriter.graph import traversal

__all__ = ["Expansion", "Walk"]

logger = logging.getLogger("rewriter.convert.engine")

# op -> (the older op it renamed, its own first version): the first version is the older op
_OLDER_NAME = {"Resize": ("Upsample", 10)}


class Walk(Protocol):
    """What :class:`Expansion` needs of the engine."""

    blockers: list[Blocker]

    def convert(self, node: onnx.NodeProto, scope: traversal.Scope, opset: int, frame: Frame, *,
                top: bool = False) -> list[onnx.NodeProto]:
        """The nodes that replace ``node`` (valid at ``opset``) at ``frame.to_version``, in order."""

    def convert_body(self, scope: traversal.Scope, frame: Frame) -> None:
        """Convert every node of a body in place."""

    def block(self, frame: Frame, label, op: str, step: str, reason: str, works: str) -> None:
        """Record that a node cannot be converted."""

    def count(self, frame: Frame, op: str, how: str, taken: tuple) -> None:
        """Count one step of ``op`` taken ``how`` (``taken``: (op, from, to, what) for the log)."""


class Expansion:
    """The conversion of a node whose op the target lacks; see the module doc."""

    def __init__(self, state: ConversionState, walk: Walk, lacks=None):
        self.state, self.walk, self.lacks = state, walk, lacks
        self.report = state.report

    def expand(self, node, scope, opset: int, src: int, label, frame: Frame) -> list[onnx.NodeProto]:
        """The nodes that replace ``node`` (of schema version ``src``, at ``opset``) at
        ``frame.to_version``, where its op does not exist (or only deprecated)."""
        op = node.op_type
        schema = onnx.defs.get_schema(op, src, "")
        versions = sorted(set(schema.function_opset_versions) | set(schema.context_dependent_function_opset_versions))
        if versions:
            return self._function_body(node, scope, src, label, frame, schema, versions[0])
        if op in _OLDER_NAME and frame.to_version < _OLDER_NAME[op][1]:  # at or above, the older op is deprecated
            return self._as_older_op(node, scope, opset, frame, *_OLDER_NAME[op])
        value = evaluate_constant_node(node, scope, self.state, opset)
        if value is not None:  # constant inputs: the node is its value
            return self._evaluated(node, scope, opset, src, frame, value)
        found = decompositions.lookup(op)
        if found is not None:  # (an opset of None: the nodes are written for the node's own opset)
            written = opset if found[0] is None else found[0]
            return self._decompose(node, scope, src, label, frame, written, found[1])
        first = registry.schema_versions(op)[0]
        dst = registry.schema_version_at(op, frame.to_version)
        if dst is not None and self.lacks is not None and self.lacks("", op, dst):
            self.walk.block(frame, label, op, "expand", f"the runtime targeted does not implement {op}-{dst} and "
                            f"ONNX defines no function body for it", "a runtime that implements it")
        else:
            self.walk.block(frame, label, op, "expand", f"{op} exists only from opset {first} and ONNX defines "
                            f"no function body for it", f"targets >= {first}")
        return [node]

    def expand_for_runtime(self, node, scope, opset: int, src: int, label, frame: Frame) -> list[onnx.NodeProto]:
        """The nodes that replace ``node`` (of schema version ``src``, at ``opset``) at ``frame.to_version``,
        where the runtime targeted has no kernel for its types and would replace it by its function
        body written for an older opset (``rewriter.targets.inlining``): expanded here, into the body
        for ``frame.to_version``. A schema without a body (Softmax-11 on its way to Softmax-13) takes its
        steps to the one the runtime would inline first."""
        op = node.op_type
        schema = onnx.defs.get_schema(op, src, "")
        versions = sorted(set(schema.function_opset_versions) | set(schema.context_dependent_function_opset_versions))
        if versions:
            version = max((v for v in versions if v <= frame.to_version), default=versions[0])
            return self._function_body(node, scope, src, label, frame, schema, version,
                                       self.report.inlined_for_runtime)
        dst = registry.schema_version_at(op, frame.to_version)  # older than the target (Engine._inlined_by_runtime)
        blocked = len(self.walk.blockers)
        original_name, original_out = node.name, node.output[0] if node.output else None
        sequence = self.walk.convert(node, scope, opset, frame.towards(dst), top=not frame.derived)
        if len(self.walk.blockers) > blocked:
            return sequence
        result = [m for n in sequence for m in self.walk.convert(n, scope, dst, frame)]
        return named(self.state, result, node, original_name, original_out)

    def _as_older_op(self, node, scope, opset, frame: Frame, older: str, first: int) -> list[onnx.NodeProto]:
        """An op that was an older op renamed (Resize-10 is Upsample-9): taken down to its first
        version by its own steps, renamed, then converted onward as the older op."""
        op, blocked = node.op_type, len(self.walk.blockers)
        original_name, original_out = node.name, node.output[0] if node.output else None
        sequence = self.walk.convert(node, scope, opset, frame.towards(first), top=not frame.derived)
        if len(self.walk.blockers) > blocked:
            return sequence
        result = []
        for n in sequence:
            if n is node and n.op_type == op:
                n.op_type = older
                self.report.changes[f"{op}-{first} -> {older}"] += 1
                self.walk.count(frame, op, f"renamed {older}", None)
                result += self.walk.convert(n, scope, first - 1, frame)
            else:
                result += self.walk.convert(n, scope, first, frame)
        return named(self.state, result, node, original_name, original_out)

    def _evaluated(self, node, scope, opset, src, frame: Frame, value) -> list[onnx.NodeProto]:
        op = node.op_type
        const = onnx.helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                      value=onnx.numpy_helper.from_array(value))
        for name in node.input:
            if name:
                self.state.maybe_unused.append((name, scope))
        self.walk.count(frame, op, "evaluated", (op, src, src, "evaluated (constant inputs)"))
        self.report.changes[f"{op} of constant inputs -> Constant"] += 1
        return named(self.state, self.walk.convert(const, scope, opset, frame), node, node.name, node.output[0],
                     removed=True)

    def _function_body(self, node, scope, src, label, frame: Frame, schema, version,
                       counted=None) -> list[onnx.NodeProto]:
        """``node`` replaced by its function body (built for ``version``), converted onward;
        counted in ``counted`` (default: the report's ``expanded``)."""
        op = node.op_type
        first = registry.schema_versions(op)[0]
        try:
            fn = function_body(schema, node, version, self.state.types_for(scope).get)
            nodes, types = inline(fn, node, self.state, scope, schema)
        except ConversionError as e:
            self.walk.block(frame, label, op, "expand", str(e), f"targets >= {first}")
            return [node]
        self.state.add_types(scope, types)
        nodes = fold_shape_arithmetic(nodes, scope, self.state, version)
        for n in nodes:
            self.state.pending.update((o, n) for o in n.output if o)
        (self.report.expanded if counted is None else counted)[op] += 1
        self.walk.count(frame, op, "expanded", (op, src, version, "expanded into its function body"))
        logger.debug("%s: %s expanded into its function body (%d nodes, opset %d)", label, op, len(nodes), version)
        original_name, original_out = node.name, node.output[0] if node.output else None
        inner = frame.within(f"function body of {label}")
        for n in nodes:  # subgraphs of the body (If/Loop/Scan), converted from the body's opset
            for attr in n.attribute:
                for g in traversal.attribute_graphs(attr):
                    child = traversal.Scope(g, f"{attr.name} of {n.op_type} in the function body of {label}",
                                            scope, version)
                    for sub in [child, *traversal.subgraph_scopes(g, child)]:
                        self.state.register_scope(sub)
                        self.walk.convert_body(sub, inner)
        result = [m for n in nodes for m in self.walk.convert(n, scope, version, inner)]
        return named(self.state, result, node, original_name, original_out, removed=True)

    def _decompose(self, node, scope, src, label, frame: Frame, version, fn) -> list[onnx.NodeProto]:
        """``node`` replaced by the nodes of its exact decomposition (valid at ``version``),
        converted onward to the target; a failed exactness condition blocks with its reason."""
        op = node.op_type
        first = registry.schema_versions(op)[0]
        ctx = NodeContext(self.state, node, scope, (src, version), frame.to_version)
        try:
            fn(node, ctx)
        except ConversionError as e:  # the op itself may not take the node's types at its first version
            self.walk.block(frame, label, op, "decompose", str(e), f"targets >= {first} whose {op} takes these inputs")
            return [node]
        if not ctx.removed:
            raise AssertionError(f"the decomposition of {op} did not replace the node")
        nodes = [*ctx.before, *ctx.after]
        for n in nodes:
            self.state.pending.update((o, n) for o in n.output if o)
        self.report.decomposed[op] += 1
        self.walk.count(frame, op, "decomposed", (op, src, version, "decomposed exactly"))
        logger.debug("%s: %s decomposed (%d nodes, opset %d)", label, op, len(nodes), version)
        original_name, original_out = node.name, node.output[0] if node.output else None
        inner = frame.within(f"decomposition of {label}")
        result = [m for n in nodes for m in self.walk.convert(
            n, scope, frame.to_version if id(n) in ctx.at_target else version, inner)]
        return named(self.state, result, node, original_name, original_out, removed=True)
