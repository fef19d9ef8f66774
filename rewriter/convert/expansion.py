"""Ops the target lacks (or has only as a deprecated schema): the engine's side that expands a
node into its ONNX function body (built for the node's types and attributes, then converted
node by node), renames an op that was an older one renamed (Resize-10 is Upsample-9), or
replaces a node of constant inputs by its value, or takes an exact decomposition of an op ONNX
defines without a body (``rewriter.convert.decompositions``); else blocks naming the op's first
opset."""

from __future__ import annotations

import contextlib
import functools
import logging

import onnx

from rewriter.convert import decompositions, registry
from rewriter.convert.context import NodeContext
from rewriter.convert.function_bodies import evaluate_constant_node, fold_shape_arithmetic, function_body, inline
from rewriter.errors import ConversionError
from rewriter.graph import traversal

__all__ = ["Expansion", "deprecated_schema", "has_function_body"]

logger = logging.getLogger("rewriter.convert.engine")

# op -> (the older op it renamed, its own first version): the first version is the older op
_OLDER_NAME = {"Resize": ("Upsample", 10)}


class Expansion:
    """Mixed into :class:`rewriter.convert.engine.Engine`: the conversion of a node whose op the
    target lacks. Uses the engine's walk (``convert``, ``_convert_body``), its blockers and
    counters."""

    def _as_older_op(self, node, scope, opset, label, older: str, first: int) -> list[onnx.NodeProto]:
        """An op that was an older op renamed (Resize-10 is Upsample-9): taken down to its first
        version by its own steps, renamed, then converted onward as the older op."""
        op, blocked = node.op_type, len(self.blockers)
        original_name, original_out = node.name, node.output[0] if node.output else None
        target, self.target = self.target, first
        try:
            sequence = self.convert(node, scope, opset, top=not self._derived)
        finally:
            self.target = target
        if len(self.blockers) > blocked:
            return sequence
        result = []
        for n in sequence:
            if n is node and n.op_type == op:
                n.op_type = older
                self.report.changes[f"{op}-{first} -> {older}"] += 1
                self._steps()[(op, f"renamed {older}")] += 1
                result += self.convert(n, scope, first - 1)
            else:
                result += self.convert(n, scope, first)
        return self._named(result, node, original_name, original_out)

    def _expand(self, node, scope, opset, src, label) -> list[onnx.NodeProto]:
        op = node.op_type
        first = registry.schema_versions(op)[0]
        schema = onnx.defs.get_schema(op, src, "")
        versions = sorted(set(schema.function_opset_versions) | set(schema.context_dependent_function_opset_versions))
        if not versions and op in _OLDER_NAME:
            return self._as_older_op(node, scope, opset, label, *_OLDER_NAME[op])
        if not versions:
            value = evaluate_constant_node(node, scope, self.state, opset)
            if value is not None:  # constant inputs: the node is its value
                const = onnx.helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                              value=onnx.numpy_helper.from_array(value))
                for name in node.input:
                    if name:
                        self.state.maybe_unused.append((name, scope))
                self._steps()[(op, "evaluated")] += 1
                self.report.changes[f"{op} of constant inputs -> Constant"] += 1
                self.taken[(op, src, src, "evaluated (constant inputs)")] += 1
                return self._named(self.convert(const, scope, opset), node, node.name, node.output[0], removed=True)
            found = decompositions.lookup(op)
            if found is not None:
                return self._decompose(node, scope, src, label, *found)
            dst = registry.schema_version_at(op, self.target)
            if dst is not None and self.lacks is not None and self.lacks(op, dst):
                self._block(label, op, "expand", f"the runtime targeted does not implement {op}-{dst} and ONNX "
                            f"defines no function body for it", "a runtime that implements it")
            else:
                self._block(label, op, "expand", f"{op} exists only from opset {first} and ONNX defines no "
                            f"function body for it", f"targets >= {first}")
            return [node]
        version = versions[0]
        try:
            fn = function_body(schema, node, version, self.state.types_for(scope).get)
        except ConversionError as e:
            self._block(label, op, "expand", str(e), f"targets >= {first}")
            return [node]
        try:
            nodes, types = inline(fn, node, self.state, scope, schema)
        except ConversionError as e:
            self._block(label, op, "expand", str(e), f"targets >= {first}")
            return [node]
        self.state.add_types(scope, types)
        nodes = fold_shape_arithmetic(nodes, scope, self.state, version)
        for n in nodes:
            self.state.pending.update((o, n) for o in n.output if o)
        self.report.expanded[op] += 1
        self._steps()[(op, "expanded")] += 1
        self.taken[(op, src, version, "expanded into its function body")] += 1
        logger.debug("%s: %s expanded into its function body (%d nodes, opset %d)", label, op, len(nodes), version)
        original_name, original_out = node.name, node.output[0] if node.output else None
        with self._inside(f"function body of {label}"):
            for n in nodes:  # subgraphs of the body (If/Loop/Scan), converted from the body's opset
                for attr in n.attribute:
                    for g in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                              list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []):
                        child = traversal.Scope(g, f"{attr.name} of {n.op_type} in the function body of {label}",
                                                scope, version)
                        for sub in [child, *traversal.subgraph_scopes(g, child)]:
                            self.state.register_scope(sub)
                            self._convert_body(sub, clear=False)
            result = [m for n in nodes for m in self.convert(n, scope, version)]
        return self._named(result, node, original_name, original_out, removed=True)

    def _decompose(self, node, scope, src, label, version, fn) -> list[onnx.NodeProto]:
        """``node`` replaced by the nodes of its exact decomposition (valid at ``version``),
        converted onward to the target; a failed exactness condition blocks with its reason."""
        op = node.op_type
        first = registry.schema_versions(op)[0]
        ctx = NodeContext(self.state, node, scope, (src, version), self.target)
        try:
            fn(node, ctx)
        except ConversionError as e:  # the op itself may not take the node's types at its first version
            self._block(label, op, "decompose", str(e), f"targets >= {first} whose {op} takes these inputs")
            return [node]
        if not ctx.removed:
            raise AssertionError(f"the decomposition of {op} did not replace the node")
        nodes = [*ctx.before, *ctx.after]
        for n in nodes:
            self.state.pending.update((o, n) for o in n.output if o)
        self.report.decomposed[op] += 1
        self._steps()[(op, "decomposed")] += 1
        self.taken[(op, src, version, "decomposed exactly")] += 1
        logger.debug("%s: %s decomposed (%d nodes, opset %d)", label, op, len(nodes), version)
        original_name, original_out = node.name, node.output[0] if node.output else None
        with self._inside(f"decomposition of {label}"):
            result = [m for n in nodes for m in self.convert(
                n, scope, self.target if id(n) in ctx.at_target else version)]
        return self._named(result, node, original_name, original_out, removed=True)

    @contextlib.contextmanager
    def _inside(self, what: str):
        """While the nodes that replace a node are converted: a blocker among them says where
        it came from (``what``: "function body of ..."), and onnx's converter is not used."""
        self._expanding += 1
        self._expansions.append(what)
        try:
            yield
        finally:
            self._expanding -= 1
            self._expansions.pop()


@functools.lru_cache(maxsize=None)
def deprecated_schema(op: str, version: int) -> bool:
    return bool(onnx.defs.get_schema(op, version, "").deprecated)


@functools.lru_cache(maxsize=None)
def has_function_body(op: str, version: int) -> bool:
    schema = onnx.defs.get_schema(op, version, "")
    return bool(schema.function_opset_versions or schema.context_dependent_function_opset_versions)
