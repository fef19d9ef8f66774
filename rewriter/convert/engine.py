"""The conversion engine: every default-domain node, one schema step at a time, in every scope.

For each node the engine walks the adjacent schema steps of its op from the scope's opset
to the target (``rewriter.convert.registry.steps_between``) and takes each step by its kind
(``rewriter.convert.steps.step_kind``): an own adapter, a type-only step (kept when every
type the node uses is allowed at the destination), or onnx's converter for the whole node
where its adapter is known to be correct. An op that does not exist at the target is
expanded into its ONNX function body, whose nodes are then converted the same way
(``rewriter.convert.expansion``, the engine's collaborator). Nodes that adapters insert are
converted onward from the step's destination opset. Type-only verdicts are in
``rewriter.convert.type_verdicts``, the blockers' words in ``rewriter.convert.blockers``, how
converted nodes take a node's place in ``rewriter.convert.splice``. Every call of the walk gets
a :class:`rewriter.convert.frame.Frame`: the opset converted to and where its nodes come from.

:meth:`Engine.convert` takes one node in named steps: the prelude (``rewriter.convert.paths.start``:
an unknown or missing op, :meth:`Engine._not_by_steps`; the op's normalizer,
:meth:`Engine._normalized`), the common case of a path of type-only steps (kept when every type
is allowed, :meth:`Engine._types_block`), the delegation to onnx's converter
(:meth:`Engine._by_onnx`), and the walk of the path's steps (:meth:`Engine._take_steps`).

Nothing raises half-way: every blocked step becomes a :class:`Blocker`, and the planner
fails before writing anything when there is one.
"""

from __future__ import annotations

import collections
import logging

import onnx

from rewriter.convert import paths, registry, steps
from rewriter.convert.blockers import Blocker, Label, reason_after_label, works_for
from rewriter.convert.context import NodeContext
from rewriter.convert.expansion import Expansion
from rewriter.convert.frame import Frame
from rewriter.convert.paths import Keep, Start, keep_without_looking
from rewriter.convert.splice import named, splice
from rewriter.convert.model_state import ConversionState
from rewriter.convert.refused_forms import lacks_for_model
from rewriter.convert.type_verdicts import TypeVerdicts
from rewriter.errors import ConversionError
from rewriter.graph import traversal
from rewriter.graph.ort_onnx_domain import misplaced
from rewriter.graph.schemas import is_default_domain
from rewriter.targets import ort_quirks

__all__ = ["Blocker", "Engine"]

logger = logging.getLogger(__name__)



class Engine:
    """Converts the nodes of one model copy; see the module doc."""

    def __init__(self, state: ConversionState, to_version: int, runtime=None):
        self.state, self.to_version = state, to_version  # the default-domain opset converted to
        # (domain, op, schema version) -> whether the runtime targeted (a rewriter.targets.Target) lacks it
        self.lacks = None if runtime is None else lacks_for_model(state.model, runtime)  # (forms it refuses too)
        self.ort_may_run = runtime is None or runtime.runtime == "onnxruntime"  # a profile is not ONNX Runtime
        # (op, schema version, opset) -> element types in which the runtime targeted inlines the op's
        # body wrongly at that opset (None: no such runtime); those nodes are expanded here
        self.inlining = ort_quirks.inlining_rule(runtime) if runtime is not None else None
        self._inlined: dict[tuple[str, int], frozenset] = {}  # (op, to_version) -> self.inlining's answer
        self.report = state.report
        self.blockers: list[Blocker] = []
        self.delegated: set[tuple[str, ...]] = set()  # outputs of the nodes for onnx (value names are unique)
        self.taken: collections.Counter = collections.Counter()  # (op, a, b, kind) -> nodes
        self._paths: dict = {}
        self._kept: collections.Counter = collections.Counter()  # (op, opset, to_version, derived) -> nodes kept type-only
        self._verdicts = TypeVerdicts(state)
        self._keeps: dict[tuple[str, int, int], Keep] = {}  # (op, opset, to_version) -> _keep_without_looking
        self._starts: dict[tuple[str, int, int], Start] = {}  # (op, opset, to_version) -> paths.start
        self._expansion = Expansion(state, self, self.lacks)

    # ------------------------------------------------------------ the walk

    def run(self) -> None:
        frame = Frame(self.to_version)
        for scope in list(self.state.scopes):
            self.convert_body(scope, frame)
        for (op, opset, to_version, derived), n in self._kept.items():
            path, _ = self._path(op, opset, to_version)
            (self.report.derived_steps if derived else self.report.steps)[(op, "type-only")] += n * len(path)
            self.report.type_only[op] += n
            for a, b in path:
                self.taken[(op, a, b, "type-only")] += n
        for (op, a, b, kind), n in sorted(self.taken.items()):
            logger.info("%s %d -> %d: %s, %d node(s)", op, a, b, kind, n)

    def convert_body(self, scope: traversal.Scope, frame: Frame) -> None:
        """Convert every node of ``scope``'s body in place (a body of the model, or one inside
        an expansion when ``frame.inside``)."""
        clear = frame.inside is None
        if clear:
            self.state.pending.clear()
        nodes = scope.body.node
        opset = scope.opset
        if opset is None:
            return
        seen = self.report.nodes if clear else None  # a body's own nodes, not those of an expansion
        keeps, to_version, derived = self._keeps, frame.to_version, frame.derived
        look, type_only = Keep.LOOK, Keep.TYPE_ONLY  # (an Enum member's lookup costs more than this loop's test)
        shift = 0  # nodes inserted (less those removed) before the current one so far
        for k, node in enumerate(list(nodes)):  # the body's own nodes; inserted ones come converted
            if not is_default_domain(node.domain):
                continue
            op = node.op_type
            if seen is not None:
                seen[op] += 1
            key = (op, opset, to_version)
            keep = keeps.get(key)
            if keep is None:
                keep = keeps[key] = self._keep_without_looking(op, opset, to_version)
            if keep is not look:  # the common case going up: nothing about the node can stop its steps
                if keep is type_only:
                    self._kept[(op, opset, to_version, derived)] += 1
                continue
            size = len(nodes)
            sequence = self.convert(node, scope, opset, frame.at(tuple(node.output)), top=True)
            at = k + shift + len(nodes) - size  # after the Constant nodes a function body gained at its top
            shift = splice(nodes, at, node, sequence) - k - 1
            if len(sequence) != 1 or sequence[0] is not node:
                scope.invalidate()

    def _keep_without_looking(self, op: str, opset: int, to_version: int) -> Keep:
        """Whether the walk keeps every node of ``op`` at ``opset`` without a look (:class:`Keep`)."""
        how = self._start(op, opset, to_version)
        if self.inlining is not None and how.what == "steps" and self._inlined_types(op, to_version):
            return Keep.LOOK  # a node in such a type is expanded
        return keep_without_looking(op, how, *(self._path(op, opset, to_version) if how.what == "steps" else ((), [])))

    # ------------------------------------------------------------ one node

    def convert(self, node: onnx.NodeProto, scope: traversal.Scope, opset: int, frame: Frame, *,
                top: bool = False) -> list[onnx.NodeProto]:
        """The nodes that replace ``node`` (valid at ``opset``) at ``frame.to_version``, in order;
        ``top``: ``node`` is a body's own node (not one the conversion made)."""
        if not top and not frame.derived:
            frame = frame.made()  # counted apart in the plan
        op = node.op_type
        label = Label(node, scope)
        what, src, fix = self._starts.get((op, opset, frame.to_version)) or self._start(op, opset, frame.to_version)
        if what != "steps":
            return self._not_by_steps(node, scope, opset, what, src, label, frame)
        if self.inlining is not None and self._inlined_by_runtime(node, scope, src, frame.to_version):
            return self._expansion.expand_for_runtime(node, scope, opset, src, label, frame)
        if fix is not None and not self._normalized(node, scope, src, fix, label, frame):
            return [node]
        path, kinds = self._paths.get((op, opset, frame.to_version)) or self._path(op, opset, frame.to_version)
        if kinds and kinds[-1] == "type-only" and all(k == "type-only" for k in kinds):  # the common case
            if not any(self._types_block(node, scope, a, b, label, frame) for a, b in path):
                self._kept[(op, opset, frame.to_version, frame.derived)] += 1  # counted in the report by run()
            return [node]
        if "onnx" in kinds and "blocked" not in kinds:
            return self._by_onnx(node, path, kinds, label, frame, top)
        return self._take_steps(node, scope, path, kinds, label, frame)

    def _not_by_steps(self, node, scope, opset: int, what: str, src, label, frame: Frame) -> list[onnx.NodeProto]:
        """A node whose op is unknown, missing at the model's opset, or to be expanded."""
        op = node.op_type
        if what == "expand":  # missing at the target opset, or there only as a deprecated schema the checker refuses
            return self._expansion.expand(node, scope, opset, src, label, frame)
        if misplaced(node, opset):  # ONNX Runtime's own op in the ONNX domain
            return self._ort_onnx_domain_op(node, label, frame)
        if what == "unknown":
            reason = f"{op} is not an operator of the default ONNX domain"
        else:
            reason = (f"{op} does not exist at the model's opset {opset} (its first version is "
                      f"{registry.schema_versions(op)[0]}): the model's opset_import is wrong")
        self.block(frame, label, op, "-", reason, "no opset")
        return [node]

    def _ort_onnx_domain_op(self, node, label, frame: Frame) -> list[onnx.NodeProto]:
        """One of ONNX Runtime's contrib ops it registers in the ONNX domain (no ONNX op at this
        opset): kept as it is where ONNX Runtime may run the result (it has the op at every opset;
        LayerNormalization-1 is LayerNormalization-17 from opset 17), refused for another runtime
        (whose conversion lowers it first where it can)."""
        op = node.op_type
        if self.ort_may_run:
            note = (f"{op}: ONNX Runtime's own op in the ONNX domain, kept (only ONNX Runtime runs it; "
                    "--lower-ops com.microsoft writes it in standard ONNX)")
            if note not in self.report.notes:
                self.report.notes.append(note)
            return [node]
        self.block(frame, label, op, "-", f"{op} is ONNX Runtime's own op (in the ONNX domain), which the runtime "
                   "targeted lacks", "onnxruntime")
        return [node]

    def _normalized(self, node, scope, src: int, fix, label, frame: Frame) -> bool:
        """Whether the op's normalizer took ``node`` (when not, it is blocked)."""
        try:
            fix(node, NodeContext(self.state, node, scope, (src, src), frame.to_version))
        except ConversionError as e:
            self.block(frame, label, node.op_type, "-", reason_after_label(str(e), str(label)), "no opset")
            return False
        return True

    def _types_block(self, node, scope, a: int, b: int, label, frame: Frame) -> bool:
        """Whether ``node`` uses a type that schema ``b`` does not allow on the type-only step
        a -> b (then it is blocked)."""
        reason = self._verdicts.allowed(node, scope, a, b)
        if reason is None:
            return False
        self.block(frame, label, node.op_type, f"{a} -> {b}", reason, works_for(node.op_type, a, b))
        return True

    def _by_onnx(self, node, path, kinds, label, frame: Frame, top: bool) -> list[onnx.NodeProto]:
        """A node with a step only onnx's converter has an adapter for: delegated when onnx's
        converter can take it through every step of its path, else blocked. onnx's converter
        takes each step with an adapter of its own, so each needs one known to be correct
        (``steps.ONNX_CORRECT``), whatever rewriter has for it (a no-op registered as type-only
        included: onnx runs its own adapter there, or fails without one)."""
        op = node.op_type
        missing = next(((a, b) for a, b in path if (op, a, b) not in steps.ONNX_CORRECT), None)
        if missing is None and top:
            return self._delegate(node, path, kinds, label, frame)
        step = next((a, b) for (a, b), k in zip(path, kinds) if k == "onnx")
        why = (f"rewriter has no adapter for this step, and onnx's converter, which has one, lacks a "
               f"correct adapter for step {missing[0]} -> {missing[1]} on the node's way to the target"
               if missing else "rewriter has no adapter for this step, and onnx's converter cannot take "
               "nodes made by the conversion")
        self.block(frame, label, op, f"{step[0]} -> {step[1]}", why, works_for(op, *step))
        return [node]

    def _take_steps(self, node, scope, path, kinds, label, frame: Frame) -> list[onnx.NodeProto]:
        """``node`` taken one step of its path at a time: by rewriter's adapter, or kept type-only."""
        op = node.op_type
        original = node.name, (node.output[0] if node.output else None)
        before: list[onnx.NodeProto] = []
        after: list[onnx.NodeProto] = []
        for (a, b), kind in zip(path, kinds):
            if kind == "type-only":
                if self._types_block(node, scope, a, b, label, frame):
                    return [node]
                self.count(frame, op, "type-only", (op, a, b, "type-only"))
                continue
            if kind != "own":
                why = ("this step needs onnx's converter, which cannot take a node rewriter already changed"
                       if kind == "onnx" else steps.step_reason(op, a, b))
                self.block(frame, label, op, f"{a} -> {b}", why, works_for(op, a, b))
                return [node]
            ctx = self._adapted(node, scope, a, b, label, frame)
            if ctx is None:
                return [node]
            if ctx.before or ctx.after:
                made_before, made_after = self._convert_made(ctx, scope, b, label, frame)
                before += made_before
                after = made_after + after
            if ctx.removed:
                return named(self.state, before + after, node, *original, removed=True)
            if node.op_type != op:  # became another op: convert it onward as that op
                rest = self.convert(node, scope, b, frame)
                return named(self.state, before + rest + after, node, *original)
        if "own" in kinds:
            self.report.own[op] += 1
        return named(self.state, before + [node] + after, node, *original)

    def _adapted(self, node, scope, a: int, b: int, label, frame: Frame) -> NodeContext | None:
        """Step a -> b of ``node`` by rewriter's adapter: what it inserted or removed, or None
        when it blocked."""
        op = node.op_type
        ctx = NodeContext(self.state, node, scope, (a, b), frame.to_version)
        try:
            registry.lookup(op, a, b)(node, ctx)
        except ConversionError as e:
            self.block(frame, label, op, f"{a} -> {b}", reason_after_label(str(e), str(label)), works_for(op, a, b))
            return None
        how = registry.KINDS.get((op, a, b), "rewrite")
        (self.report.derived_steps if frame.derived else self.report.steps)[(op, how)] += 1  # self.count, inline
        self.taken[(op, a, b, how)] += 1
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s: %s %d -> %d (%s)", label, op, a, b, how)
        return ctx

    def _convert_made(self, ctx: NodeContext, scope, b: int, label, frame: Frame):
        """The nodes an adapter inserted on its step to ``b``, converted onward (from ``b``, or
        from the target opset for those written for it): (those before the node, those after)."""
        for n in [*ctx.before, *ctx.after]:
            self.state.pending.update((o, n) for o in n.output if o)
        made = frame.made_converting(str(label))  # a blocker among them names the node they replace
        before = [m for n in ctx.before for m in self.convert(
            n, scope, frame.to_version if id(n) in ctx.at_target else b, made)]
        after = [m for n in ctx.after for m in self.convert(n, scope, b, made)]
        return before, after

    def _inlined_types(self, op: str, to_version: int) -> frozenset:
        """The element types in which the runtime targeted would inline ``op`` wrongly at ``to_version``."""
        key = (op, to_version)
        found = self._inlined.get(key)
        if found is None:
            dst = registry.schema_version_at(op, to_version)
            found = self._inlined[key] = frozenset() if dst is None else frozenset(self.inlining(op, dst, to_version))
        return found

    def _inlined_by_runtime(self, node, scope, src: int, to_version: int) -> bool:
        """Whether ``node`` (of schema ``src``) reads or writes a tensor of a type in which the runtime
        targeted would replace it by its function body wrongly at ``to_version``. A schema without a
        body is taken to the one with it first, which must be of an older opset than ``to_version``."""
        kinds = self._inlined_types(node.op_type, to_version)
        if not kinds:
            return False
        if not paths.has_function_body(node.op_type, src) and registry.schema_version_at(node.op_type, to_version) >= to_version:
            return False
        types = self.state.types_for(scope)
        for name in (*node.input, *node.output):
            t = types.get(name) if name else None
            if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type in kinds:
                return True
        return False

    def _start(self, op: str, opset: int, to_version: int) -> Start:
        key = (op, opset, to_version)
        found = self._starts.get(key)
        if found is None:
            found = self._starts[key] = paths.start(op, opset, to_version, self.lacks)
        return found

    def _path(self, op: str, opset: int, to_version: int):
        key = (op, opset, to_version)
        found = self._paths.get(key)
        if found is None:
            found = self._paths[key] = paths.path(op, opset, to_version)
        return found

    def _delegate(self, node, path, kinds, label, frame: Frame) -> list[onnx.NodeProto]:
        if frame.inside is not None:
            self.block(frame, label, node.op_type, "-", "needs onnx's converter inside an expanded function body",
                       "no opset")
            return [node]
        self.delegated.add(tuple(node.output))
        self.report.delegated[node.op_type] += 1
        for a, b in path:
            self.taken[(node.op_type, a, b, "onnx.version_converter")] += 1
        logger.debug("%s: %s to onnx.version_converter (%s)", label, node.op_type,
                     ", ".join(f"{a}->{b} {k}" for (a, b), k in zip(path, kinds)))
        return [node]

    # ------------------------------------------------------------ what the expansion uses too

    def block(self, frame: Frame, label, op: str, step: str, reason: str, works: str) -> None:
        """Record that a node cannot be converted (``label``: a :class:`Label` or a string)."""
        name, where = getattr(label, "name", ""), getattr(label, "where", "")
        self.blockers.append(Blocker(frame.label(str(label)), op, step, reason, works, key=frame.current,
                                     name=name, where=where))
        self._steps(frame)[(op, "blocked")] += 1

    def count(self, frame: Frame, op: str, how: str, taken: tuple | None) -> None:
        """One step of ``op`` taken ``how``; ``taken`` (op, from, to, what) is logged at the end."""
        self._steps(frame)[(op, how)] += 1
        if taken is not None:
            self.taken[taken] += 1

    def _steps(self, frame: Frame) -> collections.Counter:
        """Where the steps of the nodes ``frame`` is for are counted."""
        return self.report.derived_steps if frame.derived else self.report.steps
