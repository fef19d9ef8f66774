"""``Conv`` / ``weights_folded``, ``Reshape`` / ``shape_folded`` and ``Slice`` / ``bounds_folded``:
onnx2tf 2.6.9 (LiteRT's converter) folds no computation on constants or shapes.  A Conv whose
weights are computed from constants (the sinc kernel of a resampler: Range, Sin, Cos, Where ...)
is written as the custom op ONNX_CONV, which LiteRT does not have ("Encountered unresolved custom
op: ONNX_CONV"); after a Reshape whose shape is computed from a Shape (legacy torch exports'
channel shuffle: Shape -> Gather -> Div -> Unsqueeze -> Concat) onnx2tf knows no rank, and writes
a graph the XNNPACK delegate cannot prepare ("XNNPack delegate failed to reshape runtime"; the
Gemm after it is the custom op ONNX_GEMM), and so after a Slice whose bounds are computed from a
Shape (the chunk of the opset-17 export).  Here, when the main graph has such a Conv, Reshape or
Slice, the model's constants and shape chains are folded first by rewriter's exact folder
(``rewriter optimize``'s ``FoldConstantsPass`` and ``FoldShapeArithmeticPass`` in rounds, then
``RemoveUnusedPass``, then every Constant node an initializer: onnx2tf refuses one of
``value_ints`` "without value"; no fusion): the same values, the weights and shapes now constants (a
symbolic batch dim becomes Reshape's 0, "copy").  A shape computed from a dim that is not static
stays computed (PP-OCR's width): it folds with ``--input-shape``."""

from __future__ import annotations

import warnings

import onnx

from rewriter.graph.names import first_few
from rewriter.graph.schemas import is_default_domain

__all__ = ["COMPUTED", "computed_inputs", "constants_folded", "fold_constants_and_shapes"]

# op -> the inputs onnx2tf needs constant (the Conv's weights and bias, the Reshape's shape, the
# Slice's starts, ends, axes and steps; TVM 0.27: TopK's k, "TopK k must be a constant")
COMPUTED = {"Conv": (1, 2), "Reshape": (1,), "Slice": (1, 2, 3, 4), "TopK": (1,)}


# writers onnx2tf takes as they are: a Constant, a DequantizeLinear (a QDQ model's weights)
_TAKEN = frozenset({"Constant", "DequantizeLinear"})


def computed_inputs(model: onnx.ModelProto, op: str) -> list[str]:
    """Labels of the main-graph ``op`` nodes with an input of ``COMPUTED[op]`` that a node other
    than a Constant or a DequantizeLinear writes."""
    graph = model.graph
    written = {o for n in graph.node if not (n.op_type in _TAKEN and is_default_domain(n.domain)) for o in n.output}
    return [n.name or n.output[0] for n in graph.node
            if n.op_type == op and is_default_domain(n.domain)
            and any(i < len(n.input) and n.input[i] in written for i in COMPUTED[op])]


def fold_constants_and_shapes(model: onnx.ModelProto) -> None:
    """Fold, in place, the model's constants and shape chains (the module docstring's passes)."""
    import onnx_ir as ir
    from onnx_ir.passes.common import LiftConstantsToInitializersPass

    from rewriter.optimize import bridge
    from rewriter.optimize.constant_folding import FoldConstantsPass
    from rewriter.optimize.remove_unused import RemoveUnusedPass
    from rewriter.optimize.shape_arithmetic import FoldShapeArithmeticPass

    work, carry = bridge.to_ir(model)  # (weights left where they are: external data stays lazy)
    rounds = ir.passes.PassManager([FoldConstantsPass(), FoldShapeArithmeticPass(), RemoveUnusedPass()],
                                   steps=4, early_stop=True)
    with warnings.catch_warnings():  # numpy's on a 0 / 0 the graph computes (and then does not take)
        warnings.simplefilter("ignore", RuntimeWarning)
        rounds(work)
    if work.ir_version >= 4:  # the folder writes Constant nodes of value_ints, which onnx2tf refuses
        LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(work)
    model.CopyFrom(bridge.to_proto(work, carry))


def constants_folded(op: str):
    """The rewrite for ``op`` (a key of ``COMPUTED``): folds the model in place when a main-graph
    ``op`` node reads a computed input of ``COMPUTED[op]``; one note naming them."""
    def rewrite(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
        found = computed_inputs(model, op)
        if not found:
            return []
        fold_constants_and_shapes(model)
        still = set(computed_inputs(model, op))
        done = [n for n in found if n not in still]
        what = {"Conv": "weight or bias", "Reshape": "shape", "Slice": "bound", "TopK": "k"}[op]
        note = (f"{len(found)} {op} node(s) reading a computed {what}: "
                f"the model's constants and shape chains folded first ({release} refuses the form); "
                f"{len(done)} now read constants: {first_few(repr(n) for n in found)}")
        return [note]
    return rewrite
