"""Carry out a precision plan on the model: types, constants, attributes and the Casts at
the boundary between half and float32.

Each value gets the type its producer now makes; each reader that needs the other type reads
a Cast of it, made once per value and type, in the graph that defines the value (so every
nested graph sees it). A Cast back to the half type of a value that is itself a Cast from it
is not made: the reader takes the Cast's input. Constants are converted where they are
defined; one read in both types is stored once per type.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from rewriter.precision.graphs import FLOAT, Graphs
from rewriter.precision.plan import Plan, attribute
from rewriter.precision.rounding import Rounding, half_of, half_tensor, kept_sums
from rewriter.precision.slots import HALF_TYPES
from rewriter.graph.schemas import is_default_domain

__all__ = ["apply_plan", "Applied"]

ANY = -1  # a reader that takes either type (a free type parameter allowing it)
# ops whose result does not depend on the float type of their free input (others, such as
# SequenceInsert's tensor, are tied to another value's type by their inference rule)
_TYPE_BLIND = frozenset({"Shape", "Size", "Cast", "CastLike", "IsNaN", "IsInf", "NonZero"})


@dataclasses.dataclass
class Applied:
    """What the rewrite did, for the summary."""

    casts: int = 0
    constants_converted: int = 0
    constants_duplicated: int = 0
    weights_stored_half: int = 0  # float32 reads of constants stored in half (through a Cast)
    constants_clamped: int = 0
    sums_kept: int = 0  # weights rounded so the sums their readers compute stay close (precision.rounding)
    cancelled_casts: int = 0
    function_calls: int = 0  # calls of local functions rewritten to half copies


class _Rewrite:
    def __init__(self, model, graphs: Graphs, plan: Plan, keep_io_types: bool, read_tensor):
        self.m, self.g, self.plan = model, graphs, plan
        self.half = HALF_TYPES[plan.dtype]
        self.suffix = "fp16" if plan.dtype == "float16" else "bf16"
        self.keep_io = keep_io_types
        self.read = read_tensor
        fresh = graphs.fresh_names()
        self.fresh = lambda base: fresh(base, first=2)  # noqa: E731
        self.after: dict[int, list[onnx.NodeProto]] = {}  # id(node) -> nodes to insert after it
        self.front: dict[int, list[onnx.NodeProto]] = {}  # id(graph) -> nodes to insert first
        self.casts: dict[tuple[str, int], str] = {}
        self.done = Applied()
        self.main_inputs = {v.name for v in model.graph.input}

    # types -----------------------------------------------------------------------------
    def natural(self, name: str) -> int | None:
        """The type ``name`` has after the rewrite, where it is defined."""
        elem = self.g.elem(name)
        if elem != FLOAT:
            return elem
        if name in self.plan.half_values:
            return self.half
        if name in self.main_inputs:
            return FLOAT if self.keep_io else self.half
        node = self.g.producer.get(name)
        if node is not None:
            p = self.plan.plan_of(node)
            if p is not None and p.half and list(node.output).index(name) in p.half_outputs:
                return self.half
        return FLOAT

    def need(self, reader: onnx.NodeProto, i: int, name: str) -> int:
        p = self.plan.plan_of(reader)
        if (p is not None and p.half and i in p.half_inputs) or (self.plan.key(reader), i) in self.plan.half_reads:
            return self.half
        from rewriter.precision.slots import node_slots

        slots = p.slots if p is not None else node_slots(reader, self.g.opset)
        if (reader.op_type in _TYPE_BLIND and is_default_domain(reader.domain) and slots is not None
                and i < len(slots.inputs) and slots.inputs[i].free):
            allowed = slots.inputs[i].allowed
            if f"tensor({self.plan.dtype})" in allowed and "tensor(float)" in allowed:
                return ANY
        return FLOAT

    # casts -----------------------------------------------------------------------------
    def _place(self, name: str, node: onnx.NodeProto) -> None:
        producer = self.g.producer.get(name)
        if producer is not None:
            self.after.setdefault(id(producer), []).append(node)
        else:
            self.front.setdefault(id(self.g.defined_in[name].graph), []).append(node)

    def cast_of(self, name: str, to: int, output: str | None = None) -> str:
        key = (name, to)
        if key in self.casts and output is None:
            return self.casts[key]
        producer = self.g.producer.get(name)
        if (output is None and to == self.half and producer is not None and producer.op_type == "Cast"
                and is_default_domain(producer.domain) and self.natural(producer.input[0]) == self.half):
            self.done.cancelled_casts += 1
            self.casts[key] = producer.input[0]
            return producer.input[0]
        out = output or self.fresh(f"{name}_{self.suffix if to == self.half else 'fp32'}")
        node = onnx.helper.make_node("Cast", [name], [out], name=self.fresh(f"{out}_cast"), to=to)
        self._place(name, node)
        self.done.casts += 1
        if output is None:
            self.casts[key] = out
        return out

    # graph outputs ---------------------------------------------------------------------
    def outputs(self) -> None:
        """A graph output whose type changes under its name gets its producer's value through a
        Cast: the producer's output is renamed and the Cast makes the output's name. A subgraph
        output read from an enclosing graph is cast inside the subgraph, under a new name."""
        for site in self.g.sites:
            for v in site.graph.output:
                if self.g.elem(v.name) != FLOAT:
                    continue
                main = site.owner is None
                want = self.half if (not self.keep_io if main else v.name in self.plan.half_values) else FLOAT
                have = self.natural(v.name)
                producer = self.g.producer.get(v.name)
                if have == want or (self.g.is_constant(v.name) and producer is None):
                    if have == want == self.half:
                        v.type.tensor_type.elem_type = self.half
                    continue
                if producer is None or self.g.site_of_node[id(producer)] is not site:
                    out = self.fresh(f"{v.name}_fp32")
                    node = onnx.helper.make_node("Cast", [v.name], [out], name=self.fresh(f"{out}_cast"),
                                                 to=want)
                    self.front.setdefault(id(site.graph), []).append(node)
                    self.done.casts += 1
                    v.name = out
                    continue
                inner = self.fresh(f"{v.name}_{self.suffix if have == self.half else 'fp32'}")
                self._rename(v.name, inner, producer)
                self.cast_of(inner, want, output=v.name)
                if want == self.half:
                    v.type.tensor_type.elem_type = self.half

    def _rename(self, old: str, new: str, producer: onnx.NodeProto) -> None:
        for k, o in enumerate(producer.output):
            if o == old:
                producer.output[k] = new
        for reader, i in self.g.readers.get(old, ()):
            reader.input[i] = new
        self.g.readers[new] = self.g.readers.pop(old, [])
        self.g.producer[new] = self.g.producer.pop(old)  # the Cast made next makes ``old``, in float32
        self.g.defined_in[new] = self.g.defined_in[old]
        self.g.types[new] = self.g.types[old]
        self.g.graph_outputs.add(old)

    # constants ---------------------------------------------------------------------------
    def constants(self) -> None:
        for name in list(self.g.readers):
            if self.g.elem(name) != FLOAT or not self.g.is_constant(name):
                continue
            readers = self.g.readers[name]
            needs = [self.need(r, i, name) for r, i in readers]
            # float32 readers that take it stored in half (through a Cast): it is converted in place
            stored = [need == FLOAT and self.plan.stores_half(r, i) for (r, i), need in zip(readers, needs)]
            in_place = (all(need != FLOAT or s for need, s in zip(needs, stored))
                        and name not in self.g.graph_outputs)
            if self.half not in needs and not (in_place and any(stored)):
                continue
            target = name if in_place else self.fresh(f"{name}_{self.suffix}")
            clamp = name in self.plan.clamped
            self.done.constants_clamped += clamp
            # the sums its half readers compute over it are kept in the rounding
            half_readers = [ri for ri, need, s in zip(readers, needs, stored) if need == self.half or s]
            rounding = Rounding(clamp, kept_sums(self._shape(name), half_readers))
            self.done.sums_kept += rounding.sums is not None
            if name in self.g.initializer:
                t = self.g.initializer[name]
                half = half_of(t, self.half, target, rounding, self.read)
                if in_place:
                    t.Clear()
                    t.CopyFrom(half)
                else:
                    self.g.defined_in[name].graph.initializer.append(half)
            else:
                node = self.g.producer[name]
                a = attribute(node, "value")
                if a is not None and a.t.data_location == onnx.TensorProto.EXTERNAL:
                    half = half_of(a.t, self.half, "", rounding, self.read)
                else:
                    half = half_tensor(_constant_value(node, self.read), self.half, "", rounding)
                if in_place:
                    del node.attribute[:]
                    node.attribute.append(onnx.helper.make_attribute("value", half))
                else:
                    copy = onnx.helper.make_node("Constant", [], [target], name=self.fresh(f"{target}_const"),
                                                 value=half)
                    self.after.setdefault(id(node), []).append(copy)
            if in_place:
                self.done.constants_converted += 1
                self.casts[(name, self.half)] = name
                for (r, i), s in zip(readers, stored):
                    if s:
                        r.input[i] = self.cast_of(name, FLOAT)
                        self.done.weights_stored_half += 1
            else:
                self.done.constants_duplicated += 1
                for (r, i), need in zip(readers, needs):
                    if need == self.half:
                        r.input[i] = target
            self.g.types[target] = onnx.helper.make_tensor_type_proto(self.half, None)
            self._converted.add(name if in_place else target)

    def _shape(self, name: str) -> tuple:
        """The shape of the constant ``name`` (an initializer or a Constant node's value)."""
        if name in self.g.initializer:
            return tuple(self.g.initializer[name].dims)
        node = self.g.producer[name]
        a = attribute(node, "value")
        return tuple(a.t.dims) if a is not None else np.shape(_constant_value(node, self.read))

    # readers -----------------------------------------------------------------------------
    def readers(self) -> None:
        for name, readers in list(self.g.readers.items()):
            if self.g.elem(name) != FLOAT or name in self._converted:
                continue
            have = self.natural(name)
            for reader, i in readers:
                if reader.input[i] != name:
                    continue  # a constant's half copy took it
                need = self.need(reader, i, name)
                if need != ANY and need != have:
                    reader.input[i] = self.cast_of(name, need)

    # nodes -------------------------------------------------------------------------------
    def attributes(self) -> None:
        for p in self.plan.nodes.values():
            if not p.half:
                continue
            node = p.node
            op = node.op_type
            if op == "Cast":
                attribute(node, "to").i = self.half
            elif op == "ConstantOfShape":
                a = attribute(node, "value")
                value = self.read(a.t) if a is not None else np.zeros([1], np.float32)
                half = half_tensor(value, self.half, a.t.name if a is not None else "", Rounding())
                if a is not None:
                    a.t.CopyFrom(half)
                else:
                    node.attribute.append(onnx.helper.make_attribute("value", half))
            elif op in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "EyeLike",
                        "Bernoulli"):
                a = attribute(node, "dtype")
                if a is not None:
                    a.i = self.half
                else:
                    node.attribute.append(onnx.helper.make_attribute("dtype", self.half))

    def value_types(self) -> None:
        for site in self.g.sites:
            entries = list(site.graph.value_info)
            if site.owner is None and not self.keep_io:
                entries += list(site.graph.input)
            elif site.owner is not None:
                entries += [v for v in site.graph.input if v.name in self.plan.half_values]
            for v in entries:
                if v.type.WhichOneof("value") == "tensor_type" and v.type.tensor_type.elem_type == FLOAT:
                    if self.natural(v.name) == self.half or v.name in self._converted:
                        v.type.tensor_type.elem_type = self.half

    def splice(self) -> None:
        # innermost graphs first: rebuilding a graph's node list copies its nodes, subgraphs included
        for site in reversed(self.g.sites):
            graph = site.graph
            nodes = list(graph.node)
            out = list(self.front.get(id(graph), []))
            for node in nodes:
                out.append(node)
                stack = list(self.after.get(id(node), []))
                out.extend(stack)
            del graph.node[:]
            graph.node.extend(out)

    def run(self) -> Applied:
        self._converted: set[str] = set()
        self.outputs()
        self.constants()
        self.readers()
        self.attributes()
        self.value_types()
        self.splice()
        return self.done


def _constant_value(node: onnx.NodeProto, read_tensor) -> np.ndarray:
    from rewriter.graph.constants import constant_node_value

    return np.asarray(constant_node_value(node, read_tensor), dtype=np.float32)


def apply_plan(model: onnx.ModelProto, graphs: Graphs, plan: Plan, *, keep_io_types: bool, read_tensor) -> Applied:
    """Rewrite ``model`` (in place; ``graphs`` describes it) as ``plan`` says."""
    return _Rewrite(model, graphs, plan, keep_io_types, read_tensor).run()
