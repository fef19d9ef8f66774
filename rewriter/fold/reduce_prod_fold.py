"""Fold ReduceProd nodes whose inputs are constant: ``fold_model`` (``rewriter.fold_reduce_prod`` in the public API).

The core works on an ``onnx.ModelProto`` (fast, and it never reads the bytes of a tensor
it does not fold); the onnx_ir pass is a thin wrapper around it. A folded value becomes
an initializer in a graph (a Constant node inside a function, or in a graph whose IR
version predates initializers that are not inputs) under the node's output name.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter import kernels
from rewriter.errors import KernelError, RewriterError
from rewriter.fold.value import FOLD_INT_OVERFLOW_POLICIES, NotFoldable, reduce_prod_value
from rewriter.graph import traversal, unused_values as unused
from rewriter.graph.constants import constant_value
from rewriter.graph.input_defaults import default_note
from rewriter.io import tensor_reader
from rewriter.graph.schemas import is_default_domain

__all__ = ["fold_model", "FoldReport", "FOLD_INT_OVERFLOW_POLICIES", "INT_OVERFLOW_MODES"]

logger = logging.getLogger(__name__)

INT_OVERFLOW_MODES = FOLD_INT_OVERFLOW_POLICIES
"""The old name of :data:`FOLD_INT_OVERFLOW_POLICIES` (the kernel's modes are another list)."""


@dataclasses.dataclass
class FoldedNode:
    label: str
    output: str
    dtype: str
    shape: tuple[int, ...]


@dataclasses.dataclass
class SkippedNode:
    """A ReduceProd left as it is. ``settled``: its inputs were constant and the skip holds
    whatever else is folded (an overflow, a type); otherwise an input was not constant here, and
    a later fold of its producer may make it foldable. ``function``: the (domain, name, overload)
    of the model-local function holding it, None in the main graph and its subgraphs."""

    label: str
    reason: str
    output: str = ""
    function: tuple[str, str, str] | None = None
    settled: bool = False


@dataclasses.dataclass
class FoldReport:
    """What a fold did: nodes folded, nodes skipped with the reason, constant bytes before/after."""

    folded: list[FoldedNode] = dataclasses.field(default_factory=list)
    skipped: list[SkippedNode] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)
    bytes_before: int = 0  # bytes of constant tensor data (initializers and Constant nodes)
    bytes_after: int = 0

    @property
    def modified(self) -> bool:
        return bool(self.folded or self.removed)

    def summary_lines(self) -> list[str]:
        lines = [f"folded {f.label} -> '{f.output}' {f.dtype}{list(f.shape)}" for f in self.folded]
        lines += [f"skipped {s.label}: {s.reason}" for s in self.skipped]
        lines += [f"removed unused {r}" for r in self.removed]
        return lines


def _reduce_prod_version(opset: int) -> int:
    return onnx.defs.get_schema("ReduceProd", opset).since_version


def _constant_version(opset: int) -> int:
    return onnx.defs.get_schema("Constant", opset).since_version


def _constant_supports(opset: int, tensor_type: int) -> bool:
    allowed = onnx.defs.get_schema("Constant", opset).type_constraints[0].allowed_type_strs
    return f"tensor({onnx.helper.tensor_dtype_to_string(tensor_type)[len('TensorProto.'):].lower()})" in allowed


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _not_constant_reason(role: str, name: str, scope: traversal.Scope) -> str:
    kind, producer, where = traversal.definition(name, scope)
    if kind == "node" and producer.op_type == "Constant":
        return f"{role} '{name}' is a Constant node whose value is not known here (attribute reference, sparse)"
    if kind == "node":
        article = "an" if producer.op_type[:1].upper() in "AEIOU" else "a"
        return f"{role} '{name}' is computed at run time by {article} {producer.op_type} node"
    if kind == "input":
        if name in where.initializers() and where.parent is None:
            return f"{role} '{name}' is not a constant: {default_note(name)}"
        if name in where.initializers():
            return (f"{role} '{name}' is an initializer that is also an input of the {where.location} "
                    "(it can be overridden at run time)")
        return f"{role} '{name}' is an input of the {where.location}"
    return f"{role} '{name}' is not defined"


class _Pending(str):
    """A reason to skip that a fold elsewhere may remove: an input that is not constant here."""


class _StaticShapes:
    """Static shapes of values after ONNX shape inference, per scope (only built when needed)."""

    def __init__(self, model: onnx.ModelProto, scopes: list[traversal.Scope]):
        self.error = None
        self._shapes: dict[int, dict[str, list[int] | None]] = {}
        # Shapes come from the graph inputs and initializers only: declared value_info and
        # output shapes are claims a runtime does not check, and a stale one must not be folded.
        undeclared = onnx.ModelProto()
        undeclared.CopyFrom(model)
        for scope in traversal.iter_scopes(undeclared):
            if not scope.is_function:
                del scope.body.value_info[:]
                for output in scope.body.output:
                    output.type.tensor_type.ClearField("shape")
        try:
            inferred = onnx.shape_inference.infer_shapes(undeclared)
        except Exception as e:  # InferenceError, ValidationError, ...
            self.error = f"shape inference failed: {' '.join(str(e).split())}"
            return
        for scope, iscope in zip(scopes, traversal.iter_scopes(inferred)):
            table: dict[str, list[int] | None] = {}
            if not scope.is_function:
                for t in iscope.body.initializer:
                    table[t.name] = list(t.dims)
                for v in [*iscope.body.value_info, *iscope.body.output, *iscope.body.input]:
                    table[v.name] = self._dims(v.type)
            self._shapes[id(scope.body)] = table

    @staticmethod
    def _dims(tp: onnx.TypeProto) -> list[int] | None:
        dims = tp.tensor_type.shape.dim
        if not tp.tensor_type.HasField("shape") or not all(d.HasField("dim_value") for d in dims):
            return None
        return [d.dim_value for d in dims]

    def shape(self, name: str, scope: traversal.Scope) -> list[int] | None:
        kind, _, where = traversal.definition(name, scope)
        if where is None:
            return None
        return self._shapes.get(id(where.body), {}).get(name)


class _Folder:
    def __init__(self, model, base_dir, int_overflow, report):
        self.model = model
        self.base_dir = base_dir
        self.read_tensor = tensor_reader(base_dir)
        self.int_overflow = int_overflow
        self.report = report
        self.scopes = list(traversal.iter_scopes(model))
        self.consumed: set[str] = set()  # inputs of folded nodes: removed when left unused
        self.replaced: dict[int, set[str]] = {}  # id(graph) -> outputs now made by Constant nodes
        self.shapes = _StaticShapes(model, self.scopes) if self._has_shape_pattern() else None

    def _shape_producer(self, name, scope):
        kind, producer, where = traversal.definition(name, scope)
        if kind == "node" and producer.op_type == "Shape" and is_default_domain(producer.domain):
            return producer, where
        return None, None

    def _has_shape_pattern(self) -> bool:
        return any(
            node.input and self._shape_producer(node.input[0], scope)[0] is not None
            for scope in self.scopes for node in scope.body.node if _is_reduce_prod(node)
        )

    def run(self) -> None:
        for scope in self.scopes:
            for node in list(scope.body.node):
                if not _is_reduce_prod(node):
                    continue
                label = traversal.node_label(node, scope)
                reason = self._try_fold(node, scope, label)
                if reason is not None:
                    root = scope.root.body
                    function = (root.domain, root.name, root.overload) if isinstance(root, onnx.FunctionProto) else None
                    self.report.skipped.append(SkippedNode(label, str(reason), node.output[0] if node.output else "",
                                                           function, not isinstance(reason, _Pending)))
                    logger.info("%s: not folded: %s", label, reason)

    def _constant(self, name, scope):
        kind, producer, _ = traversal.definition(name, scope)
        if kind == "node" and any(a.ref_attr_name for a in producer.attribute):
            return None  # a Constant whose value is a function attribute: known only per call
        return constant_value(name, scope, self.read_tensor)

    def _data(self, name, scope):
        """(array, consumed names) or (None, reason)."""
        value = self._constant(name, scope)
        if value is not None:
            return value, {name}
        shape_node, where = self._shape_producer(name, scope)
        if shape_node is None:
            return None, _Pending(_not_constant_reason("data", name, scope))
        x = shape_node.input[0]
        dims = None
        if self.shapes is not None and self.shapes.error is None:
            dims = self.shapes.shape(x, where)
        if dims is None:
            why = self.shapes.error if self.shapes is not None and self.shapes.error else "it is not static"
            return None, _Pending(f"data '{name}' is the Shape of '{x}' and {why}")
        start, end = _attr(shape_node, "start", 0), _attr(shape_node, "end", None)
        return np.array(dims[start:end], dtype=np.int64), {name}

    def _try_fold(self, node, scope, label) -> str | None:
        if scope.opset is None:
            return "the default opset is not imported here"
        if len(node.output) < 1 or not node.output[0] or not node.input or not node.input[0]:
            return "the node has no data input or no output"
        refs = [a.name for a in node.attribute if a.ref_attr_name]
        if refs:
            return f"{', '.join(refs)} {'is' if len(refs) == 1 else 'are'} taken from the calling node's attributes (known per call)"
        version = _reduce_prod_version(scope.opset)
        keepdims = bool(_attr(node, "keepdims", 1))
        noop = False
        consumed: set[str] = set()
        if version >= 18:
            noop = bool(_attr(node, "noop_with_empty_axes", 0))
            axes = None
            if len(node.input) > 1 and node.input[1]:
                value = self._constant(node.input[1], scope)
                if value is None:
                    return _Pending(_not_constant_reason("axes", node.input[1], scope))
                axes = [int(a) for a in np.asarray(value).reshape(-1)]
                consumed.add(node.input[1])
        else:
            axes = _attr(node, "axes", None)
            axes = None if axes is None else list(axes)
        data, extra = self._data(node.input[0], scope)
        if data is None:
            return extra
        consumed |= extra
        if data.dtype not in kernels.SUPPORTED_DTYPES:
            return f"data type {data.dtype} is not supported by ReduceProd"
        tensor_type = onnx.helper.np_dtype_to_tensor_dtype(data.dtype)
        if (scope.is_function or self.model.ir_version < 4) and not _constant_supports(scope.opset, tensor_type):
            return (f"the folded {data.dtype} value would need a Constant node here (a function, or a "
                    f"graph of IR version < 4), and Constant-{_constant_version(scope.opset)} "
                    f"does not support {data.dtype}")
        result = self._compute(data, axes, keepdims, noop, label)
        if isinstance(result, str):
            return result
        self._replace(node, scope, result)
        self.consumed |= consumed
        self.report.folded.append(FoldedNode(label, node.output[0], str(result.dtype), result.shape))
        logger.info("%s: folded to %s%s", label, result.dtype, list(result.shape))
        return None

    def _compute(self, data, axes, keepdims, noop, label):
        try:
            return reduce_prod_value(data, axes, keepdims, noop, self.int_overflow)
        except NotFoldable as e:  # the product overflows under "skip"
            logger.warning("%s: not folded: %s", label, e)
            return str(e)
        except KernelError as e:
            raise RewriterError(f"{label}: cannot fold: {e}") from None

    def _replace(self, node, scope, result: np.ndarray) -> None:
        """Turn the node into a Constant node in place (kept in position, so later lookups see it)."""
        out = node.output[0]
        constant = onnx.helper.make_node("Constant", [], [out], name=node.name,
                                         value=numpy_helper.from_array(result, out))
        node.CopyFrom(constant)
        scope.invalidate()
        if not scope.is_function and self.model.ir_version >= 4:
            self.replaced.setdefault(id(scope.body), set()).add(out)

    def lift_to_initializers(self) -> None:
        """In graphs, move the Constant nodes made by folding into initializers."""
        for scope in self.scopes:
            outs = self.replaced.get(id(scope.body))
            if not outs:
                continue
            body = scope.body
            doomed = [i for i, n in enumerate(body.node) if n.op_type == "Constant" and n.output[0] in outs]
            for i in doomed:
                init = body.initializer.add()
                init.CopyFrom(body.node[i].attribute[0].t)
            for i in reversed(doomed):
                del body.node[i]
            scope.invalidate()


def _is_reduce_prod(node: onnx.NodeProto) -> bool:
    return node.op_type == "ReduceProd" and is_default_domain(node.domain)


def fold_model(model: onnx.ModelProto, *, int_overflow: str = "skip", base_dir: str | None = None,
               in_place: bool = False) -> tuple[onnx.ModelProto, FoldReport]:
    """Fold every foldable ReduceProd of ``model`` and remove the constants this left unused.

    ``base_dir`` is where external tensor data is found. Returns the folded model (a
    copy unless ``in_place``) and a :class:`FoldReport`. Raises RewriterError naming the
    node when a node's axes are invalid.
    """
    if int_overflow not in FOLD_INT_OVERFLOW_POLICIES:
        raise RewriterError(f"int_overflow must be one of {', '.join(FOLD_INT_OVERFLOW_POLICIES)}, "
                            f"got {int_overflow!r}")
    if not in_place:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        model = copy
    report = FoldReport(bytes_before=unused.constant_bytes(model))
    folder = _Folder(model, base_dir, int_overflow, report)
    folder.run()
    if report.folded:
        folder.lift_to_initializers()
        report.removed = unused.remove_unused(model, only=folder.consumed)
    report.bytes_after = unused.constant_bytes(model)
    return model, report
