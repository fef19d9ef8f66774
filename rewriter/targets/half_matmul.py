"""Three TVM 0.27 forms measured on onnxruntime-genai's float16 Llama (tests/targets/test_half_matmul.py):

- ``MatMul`` / ``float16_in_float32``: a float16 MatMul written as Casts to float32, the MatMul in
  float32 and a Cast back. TVM 0.27 sums a float16 MatMul in float16: against ONNX Runtime (which
  rounds a float32 sum once) relative L2 5.3e-4 at K = 16, 1.1e-3 at 64, 2.2e-3 at 256, 5.0e-3 at
  1024 in a one-off sweep of random normal [4, K] x [K, 32] products (the test checks K = 256), past
  the float16 unit roundoff (2^-10) from K = 64; written so it is ONNX Runtime's result
  (float32 sums rounded once to float16).
- ``Shape`` / ``folded_when_static``: when every graph input's dims are static (``--input-shape``,
  ``--fix-dim``) and a main-graph Add / Sub / Mul / Div reads an Unsqueeze of a dim, the model's
  constants and shape chains are folded first by rewriter's exact
  folder (:func:`rewriter.targets.folded_inputs.constants_folded`'s). TVM's frontend refuses
  arithmetic on dims it keeps as shapes ("Node .../repeat_kv/Mul_1 cannot handle ShapeExpr
  inputs": the Llama's repeat_kv reshape, Mul(Unsqueeze(Gather(Shape(k), 1)), 2)); folded, every
  such shape is a constant.
- ``Reshape`` / ``cast_shape_folded``: likewise when a Reshape's or an Expand's shape is computed
  from a Shape through a Cast (tf2onnx's Tensordot reshapes, ``Cast(Shape(x))`` to int32 and back),
  which TVM refuses with static dims too: folded, the shape is a constant (piper_nakdimon with
  ``--input-shape``, its Loops unrolled).

With the first two, llama_tiny_fp16 with ``--input-shape`` runs in TVM 0.27 (refused at load before) and
its logits are 5.3e-4 from ONNX Runtime's.
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph import traversal
from rewriter.graph.model_index import elem_of, value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.dim_exprs import gathers_a_dim
from rewriter.targets.folded_inputs import fold_constants_and_shapes
from rewriter.targets.node_splice import splice_found
from rewriter.targets.static_dims import dynamic_inputs, static_dims_blockers

__all__ = ["cast_shapes_folded", "float16_in_float32", "folded_when_static"]

_F16, _F32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT


def _in_float32(node: onnx.NodeProto, taken: set) -> list[onnx.NodeProto]:
    base = node.name or node.output[0]
    wide = [fresh_name(taken, f"{name}_float32") for name in node.input]
    out = fresh_name(taken, f"{node.output[0]}_float32")
    casts = [helper.make_node("Cast", [name], [w], name=fresh_name(taken, f"{base}_cast_in"), to=_F32)
             for name, w in zip(node.input, wide)]
    return casts + [helper.make_node("MatMul", wide, [out], name=node.name),
                    helper.make_node("Cast", [out], list(node.output), name=fresh_name(taken, f"{base}_cast_out"), to=_F16)]


def float16_in_float32(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place every float16 MatMul (any scope whose value types are known) in float32; one note."""
    types = value_types(model, inferred)
    done = splice_found(model, lambda node, scope: True if node.op_type == "MatMul" and is_default_domain(node.domain)
                        and elem_of(types.get(node.input[0])) == _F16 else None,
                        lambda node, _, taken: _in_float32(node, taken))
    if not done:
        return []
    return [f"{len(done)} float16 MatMul node(s) computed in float32 between Casts ({release} sums a float16 MatMul "
            f"in float16, measured past float16 rounding from K = 64): {first_few(repr(n) for n in done)}"]


def _dim_arithmetic(model: onnx.ModelProto) -> list[str]:
    """The main graph's Add / Sub / Mul / Div nodes reading an Unsqueeze of a dim (a Gather of a
    Shape by a constant index): the form TVM refuses ("cannot handle ShapeExpr inputs")."""
    main = next(traversal.iter_scopes(model))
    producers = main.producers()

    def unsqueezed_dim(name: str) -> bool:
        unsqueeze = producers.get(name)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or not is_default_domain(unsqueeze.domain):
            return False
        gather = producers.get(unsqueeze.input[0])
        return gather is not None and gather.op_type == "Gather" and gathers_a_dim(gather, main)

    return [n.name or n.output[0] for n in model.graph.node
            if n.op_type in ("Add", "Sub", "Mul", "Div") and is_default_domain(n.domain) and any(map(unsqueezed_dim, n.input))]


def _cast_shapes(model: onnx.ModelProto) -> list[str]:
    """The Reshape / Expand nodes whose shape is computed from a Shape through a Cast: the form TVM
    0.27 refuses with static dims too (``refused_forms``: "Reshape requires the input new shape to
    be Shape. However, the given one is relax.TensorType")."""
    forms = {"reshape_shape_through_cast": "", "expand_shape_through_cast": ""}
    return [b[4] or b[0] for b in static_dims_blockers(model, {}, "", None, forms)]


def _static_fold(find, what: str):
    """The rewrite folding the model's constants and shape chains in place when every graph input's
    dims are static and ``find(model)`` names a node (``what`` says which); one note naming them."""
    def rewrite(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
        del inferred  # (the fold infers what it needs)
        if dynamic_inputs(model):  # (cheaper than looking for the form)
            return []
        found = find(model)
        if not found:
            return []
        fold_constants_and_shapes(model)
        left = set(find(model))
        return [f"the model's constants and shape chains folded, every input's dims being static: {len(found)} node(s) "
                f"{what.format(release=release)}, {len([n for n in found if n not in left])} now on constants: "
                f"{first_few(repr(n) for n in found)}"]
    return rewrite


folded_when_static = _static_fold(_dim_arithmetic, "doing arithmetic on a dim ({release} refuses it on a dim it keeps "
                                                   "as a shape)")
cast_shapes_folded = _static_fold(_cast_shapes, "reading a shape computed from a Shape through a Cast ({release} "
                                                "refuses it with static dims too)")
