"""Constant folding: onnxscript's folder, with rewriter's evaluation policy.

onnxscript's ``FoldConstantsPass`` walks the main graph, every subgraph and every
model-local function, keeps symbolic shape values (``Shape``/``Gather``/``Concat`` chains on
static dims), inlines an ``If`` whose condition is constant and turns folded values into
initializers (Constant nodes inside functions). This subclass decides *how* a node is
evaluated so that folding never changes what the model computes:

- ReduceProd: rewriter's exact native kernel (:func:`rewriter.kernels.reduce_prod_checked`).
- Integer and boolean arithmetic, data movement, comparisons: ``onnx.reference`` (exact);
  an integer result that overflows its type (checked with exact Python integers) is left
  unfolded unless ``int_overflow`` is ``"wrap"`` (``"saturate"`` clamps ReduceProd only, as
  ONNX Runtime's kernel does; other overflowing ops stay). Integer division or modulo by
  zero is never folded.
- Any other op on floating-point data (Exp, Tanh, MatMul, Div, Conv, Cast from float ...):
  ONNX Runtime's CPU kernel, i.e. the runtime's own result. Against another runtime the
  difference is that runtime's own rounding (a few ulps for transcendental ops).
- Custom-domain nodes, non-deterministic ops, control flow other than a constant ``If`` and
  a value that is also a graph input (it can be overridden at run time) are never folded.
- Size: a fold that reads an input bigger than ``fold_limit`` bytes, or writes an output
  bigger than ``fold_limit`` and bigger than the inputs it frees, is skipped and reported
  (the model never grows by more than the limit per fold); a tensor is read only when a fold
  uses it. ReduceProd is folded by rewriter's own fold beforehand, whatever its size.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from rewriter.optimize import evaluators
from rewriter.optimize import onnxscript_folder as _oscf
from rewriter.graph.nondeterministic import NON_DETERMINISTIC_OPS as _NON_DETERMINISTIC
from rewriter.graph.input_defaults import default_note
from rewriter.graph.schemas import is_default_domain

__all__ = ["FoldConstantsPass", "FoldStats", "DEFAULT_FOLD_LIMIT", "hide_overridable", "restore"]

logger = logging.getLogger(__name__)

# onnxscript's default output limit (512 x 512 elements) in bytes of float32.
DEFAULT_FOLD_LIMIT = 512 * 512 * 4

# Ops whose result is exact whatever the element type: they move, compare or select
# values without arithmetic (or with arithmetic that is exact in IEEE: Neg, Abs, Min, Max).
_EXACT_OPS = frozenset("""
Reshape Transpose Concat Gather GatherElements GatherND Slice Squeeze Unsqueeze Identity Expand
Shape Size Flatten Split Tile Where Pad Equal Less Greater LessOrEqual GreaterOrEqual Not And Or
Xor NonZero Min Max Abs Neg Relu Sign Floor Ceil ScatterND ScatterElements OneHot Trilu
ReduceMax ReduceMin ArgMax ArgMin TopK IsNaN IsInf SpaceToDepth DepthToSpace Compress
""".split())
# Float ops IEEE 754 requires to be correctly rounded: NumPy (onnx.reference) and every
# conforming runtime give the same bits, so ONNX Runtime need not be asked.
_CORRECTLY_ROUNDED = frozenset("Add Sub Mul Div Sqrt Reciprocal".split())
# Integer ops that can overflow: checked with exact integers before folding.
_INT_ARITH = frozenset("Add Sub Mul Neg Abs Sum Pow ReduceSum ReduceSumSquare MatMul CumSum "
                       "Div Mod Cast CastLike Range".split())
_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16,
                     ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
                     ir.DataType.FLOAT8E5M2FNUZ})


@dataclasses.dataclass
class FoldStats:
    """What the folder did in one run: nodes folded per op type, nodes skipped and why."""

    folded: Counter = dataclasses.field(default_factory=Counter)
    by_node: dict = dataclasses.field(default_factory=dict)  # node -> (node label, reason)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """(node label, reason) per node left unfolded."""
        return list(self.by_node.values())

    @property
    def skipped_for_size(self) -> list[tuple[str, str]]:
        return [s for s in self.skipped if "fold limit" in s[1]]


def _label(node: ir.Node) -> str:
    return f"node '{node.name}' ({node.op_type})" if node.name else f"unnamed {node.op_type} node"


def _nbytes(value: ir.Value | None) -> int | None:
    if value is None:
        return 0
    tensor = value.const_value
    if tensor is not None:
        return tensor.nbytes if tensor.dtype != ir.DataType.STRING else tensor.size * 16
    shape, dtype = value.shape, value.dtype
    if shape is None or dtype is None or not shape.is_static():
        return None
    size = 1
    for d in shape.dims:
        size *= int(d)
    return size * (dtype.itemsize if dtype != ir.DataType.STRING else 16)


# A fold inside a subgraph whose output is bigger than this, computed from an outer graph's
# constant as big that other nodes keep reading (a weight Unsqueezed in both branches of an If),
# would store that data again in the subgraph.
_COPY_LIMIT = 16 * 1024


class FoldConstantsPass(_oscf.BaseFoldConstantsPass):
    """Fold every node whose inputs are constant, in every scope, exactly (see the module doc).

    Args:
        fold_limit: bytes; a fold reading an input or writing an output bigger than this is
            skipped (and reported in ``stats.skipped``).
        int_overflow: ``"skip"``, ``"wrap"`` or ``"saturate"`` (see the module doc).
        shape_inference: run ONNX's per-node inference while folding (needed for shape folds).

    After a run, ``self.stats`` is a :class:`FoldStats`.
    """

    def __init__(self, *, fold_limit: int = DEFAULT_FOLD_LIMIT, int_overflow: str = "skip",
                 shape_inference: bool = True):
        # onnxscript's limits count elements; ours are checked in bytes in _policy first.
        super().__init__(shape_inference=shape_inference, input_size_limit=max(1, fold_limit),
                         output_size_limit=max(1, fold_limit), should_fold=self._policy)
        self.fold_limit = fold_limit
        self.int_overflow = int_overflow
        self.stats = FoldStats()
        self._ours: ir.Node | None = None
        self._defaults: set[int] = set()  # id() of the graph inputs with a default, hidden in a run
        self._sessions: dict = {}

    # ------------------------------------------------------------ the walk
    def call(self, model: ir.Model):
        self.stats = FoldStats()
        # An initializer that is also a graph input can be overridden at run time: hide its
        # value from the folder (and from onnxscript's shape evaluators) during the walk.
        initializers = model.graph.initializers  # (the pipeline may have hidden their values already)
        self._defaults = {id(v) for v in model.graph.inputs if initializers.get(v.name) is v}
        hidden = hide_overridable(model)
        try:
            return super().call(model)
        finally:
            restore(hidden)

    def process_node(self, node: ir.Node, is_function: bool):
        self._ours = None
        replacement = super().process_node(node, is_function)
        if replacement is not None:
            self.stats.folded[node.op_type] += 1
            return replacement
        if self._ours is node:
            replacement = self._evaluate(node, is_function)
            if replacement is not None:
                self.stats.folded[node.op_type] += 1
        if replacement is None and self._defaults:
            self._note_defaults(node)
        return replacement

    def _note_defaults(self, node: ir.Node) -> None:
        """A node left unfolded whose inputs are constants but for graph inputs with a default
        (hidden from the folder): skipped because of them, and said so."""
        inputs = [v for v in node.inputs if v is not None]
        names = [v.name for v in inputs if id(v) in self._defaults]
        if names and all(id(v) in self._defaults or v.const_value is not None for v in inputs):
            self._skip(node, "; ".join(f"input '{n}' is not a constant: {default_note(n)}"
                                       for n in dict.fromkeys(names)))

    def _do_inference(self, node: ir.Node) -> None:
        """onnxscript's per-node inference (a private method of onnxscript 0.7's folder, run for
        every node in every round), skipped for a node whose outputs all have a type and a
        static shape already: inference cannot add to them. A third of the folder's time on a
        transformer export."""
        if node.outputs and all(o.type is not None and o.shape is not None and o.shape.is_static()
                                for o in node.outputs):
            return
        super()._do_inference(node)

    def _prepare_folded_tensor(self, node: ir.Node, output_name: str, output_array):
        """onnxscript's tensor for a folded value (a private method of onnxscript 0.7's folder),
        as a ``StringTensor`` when it holds strings: its plain ``ir.Tensor`` of bytes (Identity
        of a string initializer) is one onnx_ir's serializer refuses."""
        tensor = super()._prepare_folded_tensor(node, output_name, output_array)
        if tensor is not None and tensor.dtype == ir.DataType.STRING and not isinstance(tensor, ir.StringTensor):
            tensor = ir.StringTensor(tensor.numpy().reshape(-1), shape=tensor.shape, name=output_name)
        return tensor

    # ------------------------------------------------------------ policy
    def _skip(self, node: ir.Node, reason: str) -> bool:
        self.stats.by_node.setdefault(node, (_label(node), reason))  # held: keys stay unique
        logger.info("not folding %s: %s", _label(node), reason)
        return False

    def _policy(self, node: ir.Node) -> bool | None:
        """onnxscript's should_fold: False to keep the node, True to let onnxscript's
        reference evaluation fold it; nodes we evaluate ourselves are marked and get False."""
        if not is_default_domain(node.domain):
            return False
        if node.op_type == "ConstantOfShape":
            return _small_fill(node)
        if node.op_type in _NON_DETERMINISTIC or node.op_type in _oscf.DEFAULT_CONSTANT_FOLD_BLACKLIST:
            return False
        if node.op_type in ("Constant", "If", "Loop", "Scan", "SequenceMap"):
            return False
        if any(attr.is_ref() for attr in node.attributes.values()):
            return False  # an attribute of the calling node, inside a function: known per call only
        if len(node.outputs) != 1:
            return False
        for value in node.inputs:
            size = _nbytes(value)
            if size is not None and size > self.fold_limit:
                return self._skip(node, f"input '{value.name}' is {size} bytes, over the fold limit "
                                        f"({self.fold_limit} bytes)")
        out = node.outputs[0]
        size = _nbytes(out)
        freed = sum(_nbytes(v) or 0 for v in node.inputs if v is not None and len(v.uses()) == 1)
        if size is not None and size > self.fold_limit and size > freed:
            return self._skip(node, f"output '{out.name}' would be {size} bytes, over the fold limit "
                                    f"({self.fold_limit} bytes)")
        if size is not None and size > _COPY_LIMIT and size > freed:
            shared = next((v for v in node.inputs if v is not None and (_nbytes(v) or 0) > _COPY_LIMIT
                           and len(v.uses()) > 1 and v.graph is not node.graph), None)
            if shared is not None:  # an outer graph's constant: it stays for the other readers, so
                # folding here (once in each branch of an If, say) would store its data again
                return self._skip(node, f"output '{out.name}' ({size} bytes) would copy the data of "
                                        f"'{shared.name}', which other nodes read too")
        types = {v.const_value.dtype for v in node.inputs if v is not None and v.const_value is not None}
        if out.dtype is not None:
            types.add(out.dtype)
        if node.op_type in ("ReduceProd", "GatherElements") or node.op_type in _INT_ARITH and not types & _FLOATS:
            self._ours = node
            return False
        if node.op_type == "Cast" and _cast_target(node) in _FLOATS and types - {out.dtype} <= _FLOATS:
            return True  # float -> float: rounded to nearest even by NumPy and the runtimes
        if types & _FLOATS and node.op_type not in _EXACT_OPS and node.op_type not in _CORRECTLY_ROUNDED:
            self._ours = node
            return False
        return True

    # ------------------------------------------------------------ our evaluators
    def _evaluate(self, node: ir.Node, is_function: bool):
        inputs = [None if v is None else _oscf.numpy_value(v) for v in node.inputs]
        if any(a is None for a, v in zip(inputs, node.inputs) if v is not None):
            return None
        try:
            version = self._version(node)
            if node.op_type == "ReduceProd":
                array = evaluators.reduce_prod(node, inputs, version, self.int_overflow)
            elif node.op_type == "GatherElements":
                array = evaluators.gather_elements(node, inputs)
            elif node.op_type in _INT_ARITH and not any(a is not None and a.dtype.kind == "f" for a in inputs):
                array = evaluators.integer(node, inputs, version, self.int_overflow)
            else:
                array = evaluators.runtime(node, inputs, version, self._sessions)
        except evaluators.NotFolded as e:
            self._skip(node, str(e))
            return None
        if array is None:
            return None
        array = np.asarray(array)
        if is_function:
            constant = self.new_constant(node, array)
            return None if constant is None else _oscf.Replacement(constant.outputs, [constant])
        value = self.new_initializer(node, array)
        if value is None:
            return None
        node.graph.register_initializer(value)
        return _oscf.Replacement([value], [])

    def _version(self, node: ir.Node) -> int:
        return self._opset_imports.get(node.domain, self._opset_imports.get("", 1))

# A ConstantOfShape is folded only when its result is this small (a shape-sized vector, as
# exporters build for Expand/Reshape): a big fill is smaller as the node than as a tensor.
_FILL_LIMIT = 1024


def _small_fill(node: ir.Node) -> bool:
    shape = node.inputs[0] if node.inputs else None
    if shape is None or shape.is_graph_input() or shape.const_value is None or shape.const_value.size > 8:
        return False
    value = node.attributes.get("value")
    if value is not None and value.is_ref():
        return False
    itemsize = value.as_tensor().dtype.itemsize if value is not None else 4
    dims = shape.const_value.numpy().reshape(-1)
    return bool(np.all(dims >= 0)) and int(np.prod(dims, dtype=np.int64)) * itemsize <= _FILL_LIMIT


def _cast_target(node: ir.Node):
    attr = node.attributes.get("to")
    try:
        return ir.DataType(attr.as_int()) if attr is not None else None
    except ValueError:
        return None


def hide_overridable(model: ir.Model) -> list:
    """Take the value off every initializer that is also a graph input (it can be overridden at
    run time, so no pass may treat it as a constant); returns what :func:`restore` puts back."""
    hidden = []
    for value in model.graph.inputs:
        if value.const_value is not None:
            hidden.append((value, value.const_value))
            value.const_value = None
    return hidden


def restore(hidden: list) -> None:
    for value, tensor in hidden:
        value.const_value = tensor
