"""Pattern rewrites: onnxscript's default rule set plus MatMul+Add -> Gemm, applied everywhere.

The rules (``onnxscript.rewriter.rules.common``) each carry a ``check`` that says when they
apply: no-op removal (Cast to the same type, Expand/Transpose/Reshape that do nothing,
inference Dropout; Add 0 / Mul 1 are rewriter's exact neutral_constants pass), collapsing chains (Cast-Cast where no precision is lost,
Reshape-Reshape, Transpose-Transpose, Unsqueeze-Unsqueeze, Slice chains), Min/Max with
constant bounds -> Clip, Relu/Clip chains, Pad into Conv, BatchNormalization into
Conv/ConvTranspose/Gemm, MatMul+Add -> Gemm on rank-2 operands. Subgraphs and functions are
rewritten too. Folding BatchNormalization into the weights rounds once per weight in the
weights' type (float32: relative differences ~1e-7 per weight; the same arithmetic
onnxslim and onnxsim do).

onnxscript's rule set tries every rule at every node (45 rules: ~95,000 matcher calls on a
1,200-node ViT); here each rule is tried only at nodes of its pattern's root op type, read
from the rule's target pattern (``RewriteRule._target_pattern.output_nodes``, a private
attribute of onnxscript 0.7: a test checks that every rule's roots are found; a rule whose
roots are not found is tried everywhere, as onnxscript does).
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet

from rewriter.graph.schemas import is_default_domain
from rewriter.optimize.scopes import graphs_and_functions
from onnxscript.rewriter.rules import common as rules
from rewriter.graph.names import fresh_name

__all__ = ["FusionsPass", "RULE_NAMES"]

# The order of onnxscript's own default list, then the Gemm fusions.
# Not onnxscript's add_0/sub_0/mul_by_1/div_by_1: their constant patterns match within
# math.isclose(rel_tol=1e-5, abs_tol=1e-8), so they remove LayerNorm's `+ 1e-12` (NaN on a row of
# equal values) or `* 1.000001`; rewriter's RemoveNeutralArithmeticPass removes exact ones only.
RULE_NAMES = (
    "dropout_inference_rule",
    "dropout_zero_rule", "two_reshapes_matmul_reshape_rule", "one_reshape_matmul_reshape_rule",
    "cast_constant_of_shape_rule", "cast_constant_of_shape_without_value_rule", "collapse_slice_rule",
    "collapse_slice2_rule", "materialize_reshape_shape_rule", "min_min_rule", "max_max_rule",
    "min_max_rule", "max_min_rule", "successive_relu_rule", "successive_clip_rule",
    "successive_clip_relu_rule", "successive_relu_clip_rule", "cast_cast_rule", "no_op_cast_rule",
    "no_op_expand_rule", "flatten_to_reshape_rule", "reshape_reshape_rule", "slice_split_rule",
    "no_op_transpose_rule", "transpose_transpose_rule", "unsqueeze_unsqueeze_rule",
    "squeeze_reshape_1d_rule", "no_op_dynamic_scatter_nd_rule", "no_op_static_scatter_nd_rule",
    "normalize_pad_format_conv_rule", "fuse_pad_into_conv_rule",
    "fuse_batchnorm_into_conv_rule", "fuse_batchnorm_into_conv_transpose_rule",
    "fuse_batchnorm_into_gemm_rule", "remove_optional_bias_from_conv_rule",
    "remove_optional_bias_from_conv_transpose_rule", "remove_optional_bias_from_gemm_rule",
    "matmul_add_to_gemm_rule", "transpose_a_matmul_add_to_gemm_rule",
    "transpose_b_matmul_add_to_gemm_rule", "transpose_ab_matmul_add_to_gemm_rule",
)


def rule_roots(rule) -> frozenset[tuple[str, str]] | None:
    """The (domain, op type) pairs a match of ``rule`` ends at (its pattern's output nodes), or
    None when they cannot be read (then the rule is tried at every node)."""
    pattern = getattr(rule, "_target_pattern", None)
    nodes = getattr(pattern, "output_nodes", None)
    if not nodes:
        return None
    roots = set()
    for node in nodes:
        identifier = node.op_identifier() if hasattr(node, "op_identifier") else None
        if not identifier or not isinstance(identifier[1], str) or not identifier[1]:
            return None
        roots.add((_domain(identifier[0]), identifier[1]))
    return frozenset(roots)


def _domain(domain: str | None) -> str:
    return "" if domain is None or is_default_domain(domain) else domain


class _TriedAtRoots:
    """``rule``, tried only at nodes of its roots' op types (everything else is the rule's)."""

    def __init__(self, rule, roots: frozenset[tuple[str, str]]):
        self._rule, self._roots = rule, roots

    def __getattr__(self, name):
        return getattr(self._rule, name)

    def try_rewrite(self, model, graph_or_function, node, **kwargs):
        if (_domain(node.domain), node.op_type) not in self._roots:
            return None
        return self._rule.try_rewrite(model, graph_or_function, node, **kwargs)


def _tried_at_roots(rule):
    roots = rule_roots(rule)
    return rule if roots is None else _TriedAtRoots(rule, roots)


class _MaterializeReshapeShape:
    """``materialize_reshape_shape_rule`` (a Reshape's computed shape replaced by its output's
    known dims), where what it writes is valid and its dims are inferred, not declared:

    - not for a Reshape making a graph output: a declared output shape is a claim, not
      inference (ddddocr's OCR model declares ``[1, seqlen]`` for a Reshape that makes
      ``[20, 1, 8210]``; the rule wrote ``Reshape(x, [1, -1])``, which computes another tensor);
    - its Reshape carries ``allowzero=1`` whatever the opset, an attribute Reshape has from
      opset 14: before 14 the attribute goes, which changes nothing when no dim of the new shape
      is 0; a shape with a 0 (a real zero there, a copy of the input's dim without allowzero)
      is not rewritten."""

    def __init__(self, rule):
        self._rule = rule

    def __getattr__(self, name):
        return getattr(self._rule, name)

    def try_rewrite(self, model, graph_or_function, node, **kwargs):
        if any(o.is_graph_output() for o in node.outputs):
            return None
        delta = self._rule.try_rewrite(model, graph_or_function, node, **kwargs)
        imports = graph_or_function.opset_imports if isinstance(graph_or_function, ir.Function) else model.opset_imports
        if delta is None or imports.get("", imports.get("ai.onnx", 1)) >= 14:
            return delta
        for new in delta.new_nodes:
            if new.op_type != "Reshape" or "allowzero" not in new.attributes:
                continue
            shape = _constant_ints(new.inputs[1] if len(new.inputs) > 1 else None)
            if shape is None or 0 in shape:
                return None
            new.attributes.pop("allowzero")
        return delta


def _constant_ints(value: ir.Value | None) -> list[int] | None:
    """The ints of ``value`` when it is constant or a Constant node's ``value`` (the rule's new
    nodes are not folded yet)."""
    if value is None:
        return None
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and producer.op_type == "Constant":
        attr = producer.attributes.get("value")
        tensor = attr.value if attr is not None and not attr.is_ref() else None
    return None if tensor is None else [int(v) for v in tensor.numpy().reshape(-1)]


def _rule(name: str):
    rule = _tried_at_roots(getattr(rules, name))
    return _MaterializeReshapeShape(rule) if name == "materialize_reshape_shape_rule" else rule


class FusionsPass(ir.passes.InPlacePass):
    """Apply the rules of :data:`RULE_NAMES` once over the model; ``self.applied`` counts them."""

    def __init__(self, rule_names: tuple[str, ...] = RULE_NAMES):
        super().__init__()
        self.rule_set = RewriteRuleSet([_rule(n) for n in rule_names if hasattr(rules, n)])
        # onnxscript's own unused-node sweep would remove custom-domain nodes: RemoveUnusedPass does it
        self.rule_set.remove_unused_nodes = False
        self.applied = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.applied = self.rule_set.apply_to_model(model)
        if self.applied:
            register_new_constants(model)
        return ir.passes.PassResult(model, modified=bool(self.applied))


def register_new_constants(model: ir.Model) -> int:
    """Make initializers of the constants rules created that no graph holds; returns how many.

    onnxscript 0.7 registers a rule's new initializers by name and drops one whose name is
    taken: two Flattens of one value (T5's encoder, legacy export) both become Reshapes with a
    shape named ``<x>/shape``, and the second Reshape reads a value nothing makes. Such a value
    is read from the initializer that took its name when that holds an equal (small) tensor (the
    two Reshapes are then one for CSE), else registered in the graph of the node reading it,
    under a name no other value has."""
    found = 0
    for graph in graphs_and_functions(model):
        if not isinstance(graph, ir.Graph):
            continue  # onnxscript adds no initializers to functions
        names = None
        for node in graph:
            for i, value in enumerate(node.inputs):
                if (value is None or value.const_value is None or value.producer() is not None
                        or value.is_graph_input() or value.is_initializer()):
                    continue
                same = _equal_initializer(graph, value)
                if same is not None:  # the one registered under the name: the same tensor
                    node.replace_input_with(i, same)
                    found += 1
                    continue
                if names is None:
                    names = _names(graph)
                value.name = fresh_name(names, value.name or "constant")
                graph.register_initializer(value)
                found += 1
    return found


def _equal_initializer(graph: ir.Graph, value: ir.Value) -> ir.Value | None:
    """An initializer of ``graph`` that holds a tensor equal to ``value``'s (dtype, shape and
    values; small tensors only) and is no graph input. (onnxscript gave the dropped one a name
    of its own, ``<x>/shape_1``: the name does not lead to it.)"""
    import numpy as np

    b = value.const_value
    if b.size > 1024:
        return None
    array = None
    for found in graph.initializers.values():
        a = found.const_value
        if (a is None or found.is_graph_input() or a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape)):
            continue
        array = b.numpy() if array is None else array
        if np.array_equal(a.numpy(), array):
            return found
    return None


def _names(graph: ir.Graph) -> set:
    names = {v.name for v in (*graph.inputs, *graph.initializers.values())}
    names.update(o.name for node in graph for o in node.outputs)
    return names
