"""Whether a type-only step keeps a node: ``step_types_allowed`` answered once per kind of node
(op, step, which inputs and outputs are present, their types), and whether a step lets every
node of an op through whatever its types (:func:`widening`)."""

from __future__ import annotations

import functools

import onnx

from rewriter.convert.model_state import ConversionState
from rewriter.convert.type_only import allowed_types, step_types_allowed

__all__ = ["TypeVerdicts", "widening"]

_MISSING = object()


class TypeVerdicts:
    """The type-only verdicts of one conversion, memoized."""

    def __init__(self, state: ConversionState):
        self.state = state
        self._typed: dict = {}
        self._untyped: dict = {}
        self._types: dict = {}  # scope index -> flat name -> TypeProto

    def allowed(self, node, scope, a: int, b: int) -> str | None:
        """step_types_allowed, first without types (enough when ``b`` allows all that ``a``
        does, as going up mostly), then with the types shape inference found."""
        op, inputs, outputs = node.op_type, node.input, node.output
        key = (op, a, b, tuple(map(bool, inputs)), tuple(map(bool, outputs)))
        untyped = self._untyped.get(key)
        if untyped is None:
            untyped = self._untyped[key] = step_types_allowed(node, a, b, _unknown) is None
        if untyped:
            return None
        index = self.state.scope_index(scope)
        types = self._types.get(index)
        if types is None:
            types = self._types[index] = dict(self.state.types_for(scope))

        def get(name):  # values made during the conversion are typed later than the flat copy
            found = types.get(name)
            return found if found is not None else self.state.types_for(scope).get(name)

        seen = [op, a, b]
        for names in (inputs, outputs):
            for n in names:
                if not n:
                    seen.append(None)
                    continue
                seen.append(_type_key(get(n)))
            seen.append("|")
        memo = tuple(seen)
        found = self._typed.get(memo, _MISSING)
        if found is _MISSING:
            found = self._typed[memo] = step_types_allowed(node, a, b, get)
        elif found is not None:  # the reason names the node's values: said for this node
            found = step_types_allowed(node, a, b, get)
        if found is not None and self._untyped_value(inputs, outputs, get):
            if self.state.learn_types(scope):  # types from onnxruntime (com.microsoft ops)
                found = step_types_allowed(node, a, b, get)
            if found is not None and self.state.unlearned and self._untyped_value(inputs, outputs, get):
                found += f" (com.microsoft nodes make values ONNX's inference cannot type; {self.state.unlearned})"
        return found

    @staticmethod
    def _untyped_value(inputs, outputs, get) -> bool:
        return any(n and get(n) is None for names in (inputs, outputs) for n in names)


def _unknown(_name):
    return None


@functools.lru_cache(maxsize=None)
def widening(op: str, a: int, b: int) -> bool:
    """Whether schema ``b`` of ``op`` allows, for every formal input and output, every type that
    schema ``a`` does (then ``step_types_allowed`` passes any node, its types known or not)."""
    for which in ("input", "output"):
        sa, sb = onnx.defs.get_schema(op, a, ""), onnx.defs.get_schema(op, b, "")
        count = max(len(sa.inputs if which == "input" else sa.outputs),
                    len(sb.inputs if which == "input" else sb.outputs))
        for i in range(count):
            allowed_a, allowed_b = allowed_types(op, a, which, i), allowed_types(op, b, which, i)
            if allowed_a is None or allowed_b is None or not allowed_a <= allowed_b:
                return False
    return True


def _type_key(t):
    if t is None:
        return None
    if t.WhichOneof("value") == "tensor_type":  # the common case: the element type decides
        return t.tensor_type.elem_type
    return t.SerializeToString()
