"""Which nodes run in half precision and which stay float32, and why.

A node that computes in float32 is *halved* when every type parameter tying its float32
slots allows the half type (``onnx.defs``), the runtime targeted has a kernel for it, the
constants it reads in those slots fit the half type (or clamping them is exact for what they
feed: an additive mask before a Softmax), and nothing keeps it: the user's lists, shape
arithmetic (float values computed from shapes that go back to integers), calibration. Every
node left in float32 gets its reason.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx.shape_inference

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute
from rewriter.graph.schemas import is_default_domain
from rewriter.precision.decisions import Decision
from rewriter.precision.graphs import FLOAT, Graphs, NodeKey, is_constant_node
from rewriter.precision.io_first import first_consumers
from rewriter.precision.islands import ISLAND, half_islands
from rewriter.precision.quantized import QUANTIZED, quantized_regions
from rewriter.precision.ranges import flush_matters, only_huge, out_of_range
from rewriter.precision.rounding import F16_MAX
from rewriter.precision.regions import carried_in_half, shape_arithmetic, signal_paths
from rewriter.precision.slots import HALF_TYPES, NodeSlots, first_half_opset, node_slots

__all__ = ["Plan", "NodePlan", "plan_precision", "ATTRIBUTE_TYPED", "F16_MAX", "attribute"]

HALF_ELEMS = frozenset(HALF_TYPES.values())
# ops whose float output type an attribute sets: (attribute, its default when absent: None = follows the input)
ATTRIBUTE_TYPED = {"Cast": ("to", None), "RandomNormal": ("dtype", FLOAT), "RandomUniform": ("dtype", FLOAT),
                   "RandomNormalLike": ("dtype", None), "RandomUniformLike": ("dtype", None),
                   "EyeLike": ("dtype", None), "Bernoulli": ("dtype", None), "ConstantOfShape": ("value", FLOAT)}
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
# what an additive mask goes through on its way to a Softmax (clamping it to float16's lowest is exact there)
_MASK_PATH = frozenset({"Add", "Sub", "Mul", "Where", "Expand", "Reshape", "Unsqueeze", "Squeeze", "Cast",
                        "Concat", "Slice", "Transpose", "Identity", "Min", "Max", "Tile", "Gather"})
_SOFTMAX = frozenset({"Softmax", "LogSoftmax"})
_ALWAYS_FLOAT = {"Range": "Range stays float32 (positions and sizes lose integers in half precision)"}


@dataclasses.dataclass
class NodePlan:
    """What becomes of one float32 node."""

    node: onnx.NodeProto
    slots: NodeSlots | None
    half: bool
    reason: str = ""  # why it stays float32
    half_inputs: frozenset = frozenset()  # input positions that become half
    half_outputs: frozenset = frozenset()  # output positions that become half
    # kept float32 but its constants in ``half_inputs`` stored in half, cast to float32 where read
    weights_half: bool = False
    # kept for want of the half type in its schema: the first later opset whose schema has it (0: none has)
    half_from: int | None = None
    code: str = ""  # the reason's code (decisions.CODES)

    @property
    def decision(self) -> Decision:
        if self.half:
            return Decision.HALF
        return Decision.FLOAT32_FROM_HALF_WEIGHTS if self.weights_half else Decision.FLOAT32


@dataclasses.dataclass
class Plan:
    """The decision for every node that computes in float32."""

    dtype: str
    nodes: dict  # NodeKey -> NodePlan
    clamped: set = dataclasses.field(default_factory=set)  # constant names clamped to the half range
    # Loop-carried constants passed through unchanged (weights an exporter carries into the body):
    # carried in half, so no node makes them but they are half values
    half_values: set = dataclasses.field(default_factory=set)  # body inputs and Loop outputs
    half_reads: set = dataclasses.field(default_factory=set)  # (NodeKey of a Loop, input position)
    key: object = None  # node -> its NodeKey (Graphs.key)

    def plan_of(self, node: onnx.NodeProto) -> NodePlan | None:
        return self.nodes.get(self.key(node)) if self.key is not None else None

    def is_half(self, node: onnx.NodeProto) -> bool:
        p = self.plan_of(node)
        return p is not None and p.half

    def stores_half(self, node: onnx.NodeProto, i: int) -> bool:
        """Whether ``node`` computes in float32 from its input ``i`` stored in half (a weight)."""
        p = self.plan_of(node)
        return p is not None and not p.half and p.weights_half and i in p.half_inputs


class _Planner:
    def __init__(self, graphs: Graphs, dtype: str, keep_op_types, keep_nodes, lacks_kernel, read_tensor,
                 measured_out_of_range, calls=None, keep_keys=None, weights_half=False, keep_io_precision=False):
        self.g = graphs
        self.io_first = first_consumers(graphs) if keep_io_precision else {}  # NodeKey -> reason
        self.calls = calls  # FunctionCalls: the model's local functions, or None
        self.dtype = dtype
        self.half_str = f"tensor({dtype})"
        self.keep_op_types = frozenset(keep_op_types)
        self.keep_nodes = frozenset(keep_nodes)
        self.keep_keys = keep_keys or {}  # NodeKey -> reason (nodes kept: --max-error)
        self.weights_half = weights_half  # those nodes' constants stored in half all the same
        self.lacks_kernel = lacks_kernel  # (op, since_version) -> reason or "" / None
        self.read_tensor = read_tensor
        self.measured = measured_out_of_range or {}  # value name -> largest magnitude seen
        self._values: dict[str, np.ndarray | None] = {}
        self.clamped: set[str] = set()

    # constants -------------------------------------------------------------------------
    def constant(self, name: str) -> np.ndarray | None:
        if name not in self._values:
            value = None
            if self.g.is_constant(name):
                if name in self.g.initializer:
                    value = self.read_tensor(self.g.initializer[name])
                else:
                    from rewriter.graph.constants import constant_node_value

                    value = constant_node_value(self.g.producer[name], self.read_tensor)
            self._values[name] = value
        return self._values[name]

    def feeds_softmax_only(self, start: onnx.NodeProto, limit: int = 8) -> bool:
        """Whether everything ``start``'s outputs reach, through mask-shaping ops, ends in
        Softmax/LogSoftmax (at least one)."""
        seen, frontier, found = {id(start)}, [start], False
        for _ in range(limit):
            nxt = []
            for node in frontier:
                for out in node.output:
                    if out in self.g.graph_outputs:
                        return False
                    for reader, _ in self.g.readers.get(out, ()):
                        if reader.op_type in _SOFTMAX:
                            found = True
                        elif reader.op_type in _MASK_PATH and is_default_domain(reader.domain):
                            if id(reader) not in seen:
                                seen.add(id(reader))
                                nxt.append(reader)
                        else:
                            return False
            if not nxt:
                return found
            frontier = nxt
        return False

    # nodes -----------------------------------------------------------------------------
    def node_plan(self, node: onnx.NodeProto) -> NodePlan | None:
        g = self.g
        ins = [g.elem(n) if n else None for n in node.input]
        outs = [g.elem(n) if n else None for n in node.output]
        op = node.op_type
        default = is_default_domain(node.domain)
        touches = FLOAT in ins or FLOAT in outs
        if default and op in ATTRIBUTE_TYPED:
            touches = self._attribute_float(node, ins)
        if not touches or (default and is_constant_node(node)):
            return None
        slots = node_slots(node, g.opset)

        def keep(code: str, reason: str, half_from: int | None = None) -> NodePlan:
            return NodePlan(node, slots, False, reason, half_from=half_from, code=code)

        key = g.key(node)
        if node.name and node.name in self.keep_nodes:
            return keep("keep-nodes", "--keep-nodes")
        if op in self.keep_op_types:
            return keep("keep-op-types", "--keep-op-types")
        if self.calls is not None and self.calls.is_call(node):
            p = self._call_plan(node, ins, outs)
            code = "max-error" if key in self.keep_keys else "keep-io-precision"
            why = self.keep_keys.get(key) or self.io_first.get(key)
            return NodePlan(node, None, False, why, code=code) if p.half and why else p
        if not default:
            return keep("other-domain", f"an op of domain '{node.domain}'")
        if op in CONTROL_FLOW:
            return keep("control-flow", "control flow: its subgraphs' inputs and outputs stay float32")
        if op in _ALWAYS_FLOAT:
            return keep("always-float32", _ALWAYS_FLOAT[op])
        if slots is None:
            return keep("no-schema", f"no schema for {op} at opset {g.opset}")
        if 0 in ins or 0 in outs:
            return keep("non-tensor", "sequences, maps and optionals stay float32")
        params, half_in, half_out = self._float_params(node, slots, ins, outs)
        if isinstance(params, str):
            return keep("types", params)
        if not params and not (op in ATTRIBUTE_TYPED):
            return None
        for p in params:
            allowed = next(s.allowed for s in list(slots.inputs) + list(slots.outputs) if s.param == p)
            if self.half_str not in allowed:
                return keep("no-half-type", f"{op}-{slots.since_version} has no {self.dtype} (type {p})",
                            first_half_opset(node, g.opset, self.dtype, half_in, half_out) or 0)
        if op in ATTRIBUTE_TYPED and slots.outputs and self.half_str not in slots.outputs[0].allowed:
            return keep("no-half-type", f"{op}-{slots.since_version} cannot make {self.dtype}",  # (set by an attribute)
                        first_half_opset(node, g.opset, self.dtype, (), (0,)) or 0)
        if not _infers_in_half(node, slots.since_version, g, half_in, self.dtype):
            return keep("inference-refuses", f"ONNX's type inference refuses {op}-{slots.since_version} in {self.dtype}")

        def computes_float32(code: str, why: str, weights_half: bool) -> NodePlan:  # (from weights in half, or not)
            return NodePlan(node, slots, False, why, frozenset(half_in), frozenset(half_out), weights_half=weights_half,
                            code=code)

        missing = self.lacks_kernel(op, slots.since_version) if self.lacks_kernel else None
        reason = self._constants_fit(node, half_in)
        if missing:  # computes in float32 as that runtime can; its weights stored in half where they fit
            return computes_float32("no-kernel", missing, not reason)
        for name in list(node.output) + [node.input[i] for i in half_in]:
            seen = self.measured.get(name)
            if seen is not None:  # the values overflow, not the weights: those are stored in half when they fit
                return computes_float32("calibration", f"calibration: {name!r} reached {seen:.3g}, beyond "
                                        f"{self.dtype}'s range", not reason)
        if reason:
            return keep("out-of-range", reason)
        if key in self.keep_keys:  # (only a node that would run in half: its constants fit)
            return computes_float32("max-error", self.keep_keys[key], self.weights_half)
        if key in self.io_first:  # (--keep-io-precision: the input reaches float32 arithmetic unrounded)
            return computes_float32("keep-io-precision", self.io_first[key], True)
        return NodePlan(node, slots, True, "", frozenset(half_in), frozenset(half_out))

    def _call_plan(self, node: onnx.NodeProto, ins, outs) -> NodePlan:
        """A call of a local function: half through a specialized copy of its function."""
        for name in node.output:
            seen = self.measured.get(name)
            if seen is not None:
                return NodePlan(node, None, False, f"calibration: {name!r} reached {seen:.3g}, beyond "
                                f"{self.dtype}'s range", code="calibration")
        copy, reason = self.calls.specialize(node, self.g.key(node), self.g.types)
        if copy is None:
            return NodePlan(node, None, False, reason, code="function")
        return NodePlan(node, None, True, "", frozenset(i for i, e in enumerate(ins) if e == FLOAT),
                        frozenset(i for i, e in enumerate(outs) if e == FLOAT))

    def _attribute_float(self, node: onnx.NodeProto, ins) -> bool:
        """Whether an attribute-typed op makes float32: Cast to float from a non-half type,
        the random ops and ConstantOfShape making float, the -Like ops without dtype on float."""
        name, default = ATTRIBUTE_TYPED[node.op_type]
        a = attribute(node, name)
        if node.op_type == "ConstantOfShape":
            return (a.t.data_type if a is not None else FLOAT) == FLOAT
        if a is not None:
            made = a.i
        elif default is not None:
            made = default
        else:
            made = ins[0] if ins else None
        if made != FLOAT:
            return False
        if node.op_type == "Cast":
            return ins[0] not in HALF_ELEMS  # a Cast from half to float is a boundary already
        return True

    def _float_params(self, node, slots: NodeSlots, ins, outs):
        """(the tied type parameters bound to float32, input positions, output positions); or
        a reason string when the node cannot be halved."""
        params: set[str] = set()
        half_in, half_out = set(), set()
        if node.op_type in ATTRIBUTE_TYPED:
            half_out.add(0)
            return params, half_in, half_out
        for side, elems, pos_set in ((slots.inputs, ins, half_in), (slots.outputs, outs, half_out)):
            for i, (s, e) in enumerate(zip(side, elems)):
                if s.param is None or s.free:
                    continue
                if e == FLOAT:
                    params.add(s.param)
        if not params:
            return params, half_in, half_out
        for side, names, elems, pos_set in ((slots.inputs, node.input, ins, half_in),
                                            (slots.outputs, node.output, outs, half_out)):
            for i, (s, name, e) in enumerate(zip(side, names, elems)):
                if s.param in params and not s.free and name:
                    if e is None:
                        return f"the type of {name!r} is unknown", None, None
                    pos_set.add(i)
        for i, (s, e) in enumerate(zip(slots.inputs, ins)):  # a free float32 input goes along
            if s.free and e == FLOAT and self.half_str in s.allowed:
                half_in.add(i)
        for i, (s, e) in enumerate(zip(slots.outputs, outs)):
            if s.param is not None and s.param not in params and e == FLOAT:
                return f"{node.op_type}'s output type is set by an attribute", None, None
        return params, half_in, half_out

    def _constants_fit(self, node: onnx.NodeProto, half_in) -> str:
        if self.dtype != "float16":
            return ""
        values = [(node.input[i], self.constant(node.input[i]), i) for i in sorted(half_in)]
        if node.op_type == "ConstantOfShape":
            a = attribute(node, "value")
            if a is not None:
                values.append((f"{node.name or 'ConstantOfShape'}.value", self.read_tensor(a.t), -1))
        for name, value, i in values:
            if value is None or not out_of_range(value, flush_matters(node, i, value)):
                continue
            if only_huge(value) and self.feeds_softmax_only(node):
                self.clamped.add(name)
                continue
            return f"constant {name!r} is outside float16's range"
        return ""


_INFERS: dict = {}


def _infers_in_half(node: onnx.NodeProto, since: int, g: Graphs, half_in, dtype: str) -> bool:
    """Whether ONNX's strict type inference takes the node with those inputs in ``dtype`` (some
    schemas allow a half type that their function body's inference refuses: MVN-9). A
    single-node probe of the op with its attributes and its inputs' element types and ranks (not
    their dims), so one probe serves every node alike in those: the answer depends on nothing
    else it is given."""
    from onnx import helper

    half = HALF_TYPES[dtype]
    inputs, names, seen = [], [], []
    for i, name in enumerate(node.input):
        if not name:
            names.append("")
            seen.append(None)
            continue
        src = g.types.get(name)
        tensor = src is not None and src.WhichOneof("value") == "tensor_type"
        elem = half if i in half_in else (src.tensor_type.elem_type if tensor else 0)
        rank = len(src.tensor_type.shape.dim) if tensor and src.tensor_type.HasField("shape") else None
        if src is not None and not tensor:
            t = onnx.TypeProto()
            t.CopyFrom(src)  # a sequence or an optional: as declared
        else:
            t = helper.make_tensor_type_proto(elem, None if rank is None else [None] * rank)
        seen.append(t.SerializeToString())
        names.append(f"i{i}")
        inputs.append(helper.make_value_info(f"i{i}", t))
    attributes = [a for a in node.attribute if a.type not in traversal.GRAPH_KINDS]
    key = (node.domain, node.op_type, since, g.opset, tuple(seen), tuple(a.SerializeToString() for a in attributes),
           len(node.output))
    if key in _INFERS:
        return _INFERS[key]
    probe = helper.make_node(node.op_type, names, [f"o{i}" if o else "" for i, o in enumerate(node.output)],
                             domain=node.domain)
    probe.attribute.extend(attributes)
    model = helper.make_model(helper.make_graph([probe], "probe", inputs, []),
                              opset_imports=[helper.make_opsetid("", g.opset)])
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        ok = True
    except Exception:  # noqa: BLE001 - any inference complaint
        ok = False
    _INFERS[key] = ok
    return ok


def plan_precision(graphs: Graphs, dtype: str, *, keep_op_types=(), keep_nodes=(), lacks_kernel=None,
                   read_tensor=None, measured=None, calls=None, keep_keys=None, weights_half=False,
                   keep_io_precision=False) -> Plan:
    """Decide, for every node of every graph that computes in float32, whether it runs in
    ``dtype`` ("float16" or "bfloat16"), and why not. ``calls`` (a FunctionCalls) lets calls of
    local functions run in half through specialized copies; ``keep_keys`` maps NodeKeys to the
    reason it stays float32 (with ``weights_half``, computing in float32 from constants stored
    in half); ``keep_io_precision`` keeps the first consumers of the float graph inputs so too
    (:mod:`.io_first`)."""
    planner = _Planner(graphs, dtype, keep_op_types, keep_nodes, lacks_kernel, read_tensor, measured, calls,
                       keep_keys, weights_half, keep_io_precision)
    plans: dict[NodeKey, NodePlan] = {}
    for key, node in graphs.nodes():
        p = planner.node_plan(node)
        if p is not None:
            plans[key] = p

    def keep(keys, code: str, reason: str) -> None:
        for key in keys:
            p = plans.get(key)
            if p is not None and p.half:
                plans[key] = NodePlan(p.node, p.slots, False, reason, code=code)

    keep(shape_arithmetic(graphs, plans), "shape-arithmetic", "shape arithmetic (float values of sizes or indices "
         "that go back to integers)")
    keep(quantized_regions(graphs, plans), "quantized", QUANTIZED)
    for key, (weights_half, reason) in signal_paths(graphs, plans, spectra=dtype == "float16").items():
        p = plans[key]
        plans[key] = NodePlan(p.node, p.slots, False, reason, p.half_inputs, p.half_outputs,
                              weights_half=weights_half, code="signal-path")
    keep(half_islands(graphs, plans), "island", ISLAND)
    plan = Plan(dtype, plans, planner.clamped, key=graphs.key)
    carried_in_half(graphs, plan)
    return plan
