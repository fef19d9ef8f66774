"""A Loop's trip count, when constants and static dims decide it before the run, and the values that
decide it (``rewriter/convert/decompositions/loop.py`` unrolls such a Loop for a runtime without
Loop; :func:`with_trip_shapes` writes the scan outputs' lengths into a model so that the Loops
after one, whose lengths come from its outputs' shapes, are decided too).

:class:`KnownValues` evaluates a name from constants, static dims and exact ops (onnx.reference,
node by node): integer shape arithmetic, comparisons, Casts and logic on any type, and a Slice or
Gather of a Shape whose other dims are unknown when the dims it takes are known (tf2onnx's
``Slice(Cast(Shape(x)), 0, 1)`` of a ``[len, batch?, 400]`` value).

:func:`trip_count`: a ``for`` loop (the condition passed on unchanged) runs M times; a ``while``
loop's condition is evaluated with the body's nodes it depends on, closed over the loop-carried
values they read, iteration by iteration until it is false or M is reached.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_int, attribute_value
from rewriter.graph.constants import constant_value
from rewriter.graph.evaluate import evaluate_node
from rewriter.graph.schemas import is_default_domain

__all__ = ["MAX_TRIPS", "KnownValues", "NotDecided", "trip_count", "with_trip_shapes"]

MAX_TRIPS = 4096

# ops that move or select elements: a partly known input gives a partly known output, each element
# known where the element it came from is (the same op run on the known-mask says which)
_POSITIONAL = frozenset({"Identity", "Slice", "Gather", "Squeeze", "Unsqueeze", "Concat", "Reshape", "Cast"})
# exact on any type: run on known values of every element type
_EXACT = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "Not", "And", "Or", "Xor",
                    "Identity", "Cast"})
# integer arithmetic (a float result is not read: its rounding is the runtime's)
_INTEGER = frozenset({"Shape", "Size", "Range", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Add", "Sub",
                      "Mul", "Div", "Neg", "Abs", "Where", "Reshape", "ConstantOfShape", "Max", "Min", "Expand",
                      "ReduceProd", "Mod"})
_INTEGER_TYPES = (np.integer, np.bool_)


class NotDecided(ValueError):
    """The trip count is not decided before the run; the message says why."""


class KnownValues:
    """Values of names known before the run; see the module doc. ``constant(name)`` an array or None,
    ``dims(name)`` a list of ints / None or None, ``producer(name)`` the node computing it or None."""

    def __init__(self, constant, dims, producer, opset: int):
        self._constant, self._dims, self._producer, self.opset = constant, dims, producer, opset
        self._memo: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        self.read: list[str] = []  # the node outputs evaluated, in order

    def __call__(self, name: str) -> np.ndarray | None:
        found = self._partial(name, 0)
        return found[0] if found is not None and found[1].all() else None

    def partial(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(values, known) of ``name``: each element's value where ``known`` is true (a Concat of a
        Shape's unknown dims with constants is known where the constants are), or None."""
        return self._partial(name, 0)

    def _partial(self, name: str, depth: int) -> tuple[np.ndarray, np.ndarray] | None:
        if name in self._memo:
            return self._memo[name]
        self._memo[name] = None  # (a cycle decides nothing)
        value = self._constant(name)
        found = (np.asarray(value), np.ones(np.shape(value), dtype=bool)) if value is not None else None
        if found is None and depth < 64:
            node = self._producer(name)
            if node is not None and is_default_domain(node.domain) and len(node.output) == 1 and \
                    not any(a.ref_attr_name or a.type == onnx.AttributeProto.GRAPH for a in node.attribute):
                try:
                    found = self._evaluated(node, depth)
                except Exception:  # noqa: BLE001 - what onnx.reference cannot evaluate decides nothing
                    found = None
                if found is not None:
                    self.read.append(name)
        self._memo[name] = found
        return found

    def _evaluated(self, node: onnx.NodeProto, depth: int) -> tuple[np.ndarray, np.ndarray] | None:
        op = node.op_type
        if op == "Shape":
            dims = self._dims(node.input[0])
            if dims is None:
                return None
            start, end = attribute_value(node, "start", 0), attribute_value(node, "end")
            dims = dims[start:end]
            return (np.array([d or 0 for d in dims], dtype=np.int64), np.array([d is not None for d in dims]))
        inputs = [self._partial(i, depth + 1) if i else None for i in node.input]
        if any(v is None for v, i in zip(inputs, node.input) if i):
            return None
        data = range(len(inputs)) if op == "Concat" else (0,)
        if op in _POSITIONAL and not all(v[1].all() for k, v in enumerate(inputs) if v is not None and k not in data):
            return None
        if not all(v[1].all() for v in inputs if v is not None):
            if op not in _POSITIONAL or (op == "Cast" and not _integer_cast(node)):
                return None
            values = evaluate_node(node, [v[0] if v is not None else None for v in inputs], self.opset)
            masks = [(v[1].astype(np.int64) if k in data else v[0]) if v is not None else None
                     for k, v in enumerate(inputs)]
            mask = masks[0] if op == "Cast" else evaluate_node(node, masks, self.opset)
            return np.asarray(values), np.asarray(mask).astype(bool)
        if op not in _EXACT and op not in _INTEGER:
            return None
        out = np.asarray(evaluate_node(node, [v[0] if v is not None else None for v in inputs], self.opset))
        if op not in _EXACT and not issubclass(out.dtype.type, _INTEGER_TYPES):
            return None
        return out, np.ones(out.shape, dtype=bool)


def _integer_cast(node: onnx.NodeProto) -> bool:
    to = attribute_int(node, "to")
    return to is not None and issubclass(onnx.helper.tensor_dtype_to_np_dtype(to).type, np.integer)


def _condition_slice(body: onnx.GraphProto, carried: int) -> tuple[list[onnx.NodeProto], list[int], set[str]]:
    """The body's nodes its condition output depends on, closed over the loop-carried values they read
    (the nodes computing each one's next value too), in the body's order; the indices of those
    carried values; and the names the nodes read from outside the body."""
    producers = {o: n for n in body.node for o in n.output if o}
    inputs = {v.name: k for k, v in enumerate(body.input)}
    local = set(producers) | {t.name for t in body.initializer} | set(inputs)
    wanted, needed, carried_used, outer = [body.output[0].name], set(), set(), set()
    while wanted:
        name = wanted.pop()
        if name in inputs:
            k = inputs[name] - 2
            if 0 <= k < carried and k not in carried_used:
                carried_used.add(k)
                wanted.append(body.output[1 + k].name)
            continue
        node = producers.get(name)
        if node is None:
            if name not in local:
                outer.add(name)
        elif id(node) not in needed:
            needed.add(id(node))
            wanted.extend(i for i in node.input if i)
    return [n for n in body.node if id(n) in needed], sorted(carried_used), outer


def _known(values: KnownValues, name: str, what: str) -> np.ndarray:
    value = values(name)
    if value is None:
        raise NotDecided(f"{what} ('{name}') is not known before the run")
    return value


def trip_count(node: onnx.NodeProto, values: KnownValues) -> int:
    """The number of iterations ``node`` (a Loop) runs; raises :class:`NotDecided`."""
    body = attribute_value(node, "body")
    carried = list(node.input[2:])
    bound = int(_known(values, node.input[0], "the trip count M").reshape(-1)[0]) if node.input[0] else None
    going = bool(_known(values, node.input[1], "the initial condition").reshape(-1)[0]) \
        if len(node.input) > 1 and node.input[1] else True
    if body.output[0].name == body.input[1].name or not going:  # a for loop (or no iteration)
        if going and bound is None:
            raise NotDecided("a Loop without a trip count whose condition stays true never ends")
        return max(bound, 0) if going else 0
    nodes, carried_used, outer = _condition_slice(body, len(carried))
    for n in nodes:
        if not is_default_domain(n.domain) or any(a.type == onnx.AttributeProto.GRAPH for a in n.attribute):
            raise NotDecided(f"the loop's condition is computed by a {n.op_type} node that is not evaluated")
    initializers = list(body.initializer) + [onnx.numpy_helper.from_array(
        _known(values, name, "a value the loop's condition reads"), name) for name in sorted(outer)]
    ins = [body.input[0].name, body.input[1].name] + [body.input[2 + k].name for k in carried_used]
    outs = [body.output[0].name] + [body.output[1 + k].name for k in carried_used]
    graph = onnx.helper.make_graph(nodes, "loop_condition", [onnx.helper.make_empty_tensor_value_info(n) for n in ins],
                                   [onnx.helper.make_empty_tensor_value_info(n) for n in outs], initializers)
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", values.opset)]))
    state = [_known(values, carried[k], "a loop-carried value the condition reads") for k in carried_used]
    trips = 0
    while going and (bound is None or trips < bound):
        if trips >= MAX_TRIPS:
            raise NotDecided(f"the loop does not end within {MAX_TRIPS} iterations, the most that are unrolled")
        condition, *state = evaluator.run(None, dict(zip(ins, [np.array(trips, dtype=np.int64), np.array(True), *state])))
        going, trips = bool(np.asarray(condition).reshape(-1)[0]), trips + 1
    return trips


def with_trip_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the length of each main-graph Loop's scan outputs written in its value_info
    where the trip count is decided (a copy; ``model`` itself when none is), one Loop after the
    other so that a Loop whose length comes from an earlier one's output is decided too."""
    from rewriter.graph.inferred import infer_with_static_shapes

    opset = next((o.version for o in model.opset_import if is_default_domain(o.domain)), None)
    loops = [n for n in model.graph.node if n.op_type == "Loop" and is_default_domain(n.domain)]
    if opset is None or not loops:
        return model
    result, done = model, set()
    while len(done) < len(loops):
        try:
            inferred = infer_with_static_shapes(result)
        except Exception:  # noqa: BLE001 - a model inference fails on decides nothing here (refused later, named)
            return result
        shapes = {v.name: v for v in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output)}
        values = _model_values(result, shapes, opset)
        written = []
        for k, loop in enumerate(loops):
            if k in done:
                continue
            try:
                trips = trip_count(loop, values)
            except NotDecided:
                continue
            done.add(k)
            written += _scan_lengths(loop, trips, shapes)
        if not written:
            break
        if result is model:
            result = onnx.ModelProto()
            result.CopyFrom(model)
        _write(result.graph, written)
    return result


def _write(graph: onnx.GraphProto, written: list[onnx.ValueInfoProto]) -> None:
    """``written`` in ``graph``: a graph output's type replaced (inference keeps an output's declared
    type), the others as value_info in place of any of the same name."""
    by_name = {v.name: v for v in written}
    for out in graph.output:
        if out.name in by_name:
            out.type.CopyFrom(by_name.pop(out.name).type)
    kept = [v for v in graph.value_info if v.name not in by_name]
    del graph.value_info[:]
    graph.value_info.extend([*kept, *by_name.values()])


def _model_values(model: onnx.ModelProto, shapes: dict, opset: int) -> KnownValues:
    """The main graph's values known before the run: its constants (external data left unread),
    ``shapes``' dims (an inferred model's value infos by name)."""
    main = next(traversal.iter_scopes(model))

    def read(tensor: onnx.TensorProto) -> np.ndarray | None:
        return None if tensor.data_location == onnx.TensorProto.EXTERNAL else onnx.numpy_helper.to_array(tensor)

    def dims(name):
        v = shapes.get(name)
        if v is None or not v.type.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]

    return KnownValues(lambda name: constant_value(name, main, read), dims, main.producers().get, opset)


def _scan_lengths(loop: onnx.NodeProto, trips: int, shapes: dict) -> list[onnx.ValueInfoProto]:
    """Value infos of ``loop``'s scan outputs with their first dim ``trips``."""
    carried = len(loop.input) - 2
    written = []
    for out in loop.output[carried:]:
        v = shapes.get(out)
        if not out or v is None or not v.type.tensor_type.HasField("shape") or not v.type.tensor_type.shape.dim:
            continue
        info = onnx.ValueInfoProto()
        info.CopyFrom(v)
        first = info.type.tensor_type.shape.dim[0]
        first.Clear()
        first.dim_value = trips
        written.append(info)
    return written
