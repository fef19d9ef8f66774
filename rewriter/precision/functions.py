"""Calls of model-local functions in half precision.

A function's body has no types of its own: it computes in whatever its call feeds it, and its
Constant and Cast nodes say float32 where they mean it. So a call that computes in float32 is
rewritten through a copy of its function *specialized* to the call (its attributes' values
substituted, its inputs' types fixed) and converted as a model of its own with float inputs and
outputs in half precision, by the same planner and rewrite as the main graph. The call then
reads and makes half values and names the copy; calls whose copy would run no node in half (or
would not be valid) stay float32 with the reason. Identical calls share one copy; the original
function stays while a call still names it.
"""

from __future__ import annotations

import onnx

from rewriter.graph.attribute_refs import bind_attribute_refs
from rewriter.graph.traversal import all_nodes
from rewriter.graph.names import fresh_name

__all__ = ["FunctionCalls"]


def _key(f) -> tuple[str, str, str]:
    return (f.domain, f.name, getattr(f, "overload", ""))


class FunctionCalls:
    """The model's local functions and their half-precision copies, made on demand."""

    def __init__(self, model: onnx.ModelProto, dtype: str, convert, names: set | None = None):
        self.model = model
        self.dtype = dtype
        self.convert = convert  # (standalone ModelProto) -> (converted ModelProto, report)
        self.functions = {_key(f): f for f in model.functions}
        self._made: dict = {}  # specialization key -> (FunctionProto | None, reason)
        self.calls: dict = {}  # the call node's NodeKey -> the copy it names now
        self.new: list[onnx.FunctionProto] = []
        # function names taken, shared with the conversions of bodies (their nested copies)
        self.names = names if names is not None else set()
        self.names.update(f.name for f in model.functions)

    def is_call(self, node: onnx.NodeProto) -> bool:
        return (node.domain, node.op_type, getattr(node, "overload", "")) in self.functions

    def specialize(self, node: onnx.NodeProto, key, types: dict) -> tuple[onnx.FunctionProto | None, str]:
        """The half copy of the function ``node`` (whose stable NodeKey is ``key``) calls, or None and
        why the call stays float32."""
        f = self.functions[(node.domain, node.op_type, getattr(node, "overload", ""))]
        if len(node.input) != len(f.input) or not all(node.input):
            return None, "a call of a local function with inputs left out stays float32"
        in_types = []
        for name in node.input:
            t = types.get(name)
            if t is None or t.WhichOneof("value") is None:
                return None, f"the type of {name!r} is unknown"
            in_types.append(t)
        attrs = {a.name: a for a in f.attribute_proto}
        attrs.update({a.name: a for a in node.attribute})
        made = (_key(f), tuple(sorted((k, a.SerializeToString()) for k, a in attrs.items())),
                tuple(t.SerializeToString() for t in in_types))
        if made not in self._made:
            self._made[made] = self._make(f, attrs, in_types)
        copy, reason = self._made[made]
        if copy is not None:
            self.calls[key] = copy
        return copy, reason

    def _make(self, f: onnx.FunctionProto, attrs: dict, in_types: list) -> tuple[onnx.FunctionProto | None, str]:
        from onnx import helper

        from rewriter.errors import RewriterError

        body = []
        for n in f.node:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            bind_attribute_refs(c, attrs)
            body.append(c)
        graph = helper.make_graph(body, f.name, [helper.make_value_info(i, t) for i, t in zip(f.input, in_types)],
                                  [onnx.ValueInfoProto(name=o) for o in f.output])
        imports = {o.domain: o.version for o in self.model.opset_import}
        imports.update({o.domain: o.version for o in f.opset_import})
        standalone = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in imports.items()],
                                       ir_version=self.model.ir_version)
        standalone.functions.extend(self.model.functions)
        try:
            standalone = onnx.shape_inference.infer_shapes(standalone, strict_mode=True)
            converted, report = self.convert(standalone)
        except (RewriterError, onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
            return None, f"its function {f.name!r} would not convert: {str(e).strip().splitlines()[0][:200]}"
        if not report.half_nodes:
            return None, f"no node of its function {f.name!r} runs in {self.dtype}"
        if converted.graph.initializer:
            return None, f"its function {f.name!r} would need initializers"
        known = {_key(g) for g in self.model.functions} | {_key(g) for g in self.new}
        self.new.extend(g for g in converted.functions if _key(g) not in known)  # copies of nested calls
        name = fresh_name(self.names, f"{f.name}_{self.dtype}", 2)
        copy = helper.make_function(f.domain, name, list(f.input), list(f.output), list(converted.graph.node),
                                    list(converted.opset_import), doc_string=f.doc_string)
        self.new.append(copy)
        return copy, ""

    def finish(self, model: onnx.ModelProto, plan) -> int:
        """Point the calls ``plan`` halves at their copies, add the copies, and drop originals
        that no call names any more (those the source called). Runs before the rewrite splices
        new nodes in (which copies the nodes ``plan`` holds). Returns the number of calls
        rewritten."""
        halved = [(p.node, self.calls[k]) for k, p in plan.nodes.items() if p.half and k in self.calls]
        if not halved:
            return 0
        called_before = _reachable(model)
        for node, copy in halved:
            node.op_type = copy.name
            del node.attribute[:]
        model.functions.extend(self.new)
        called = _reachable(model)
        source = set(self.functions)
        keep = [f for f in model.functions if _key(f) in called or (_key(f) in source and _key(f) not in called_before)]
        del model.functions[:]
        model.functions.extend(keep)
        return len(halved)


def _calls_in(graph_like) -> set:
    return {(n.domain, n.op_type, getattr(n, "overload", "")) for n in all_nodes(graph_like)}


def _reachable(model: onnx.ModelProto) -> set:
    """The functions the main graph calls, directly or through other functions."""
    bodies = {_key(f): f for f in model.functions}
    found, frontier = set(), _calls_in(model.graph)
    while frontier:
        k = frontier.pop()
        if k in bodies and k not in found:
            found.add(k)
            frontier |= _calls_in(bodies[k])
    return found
