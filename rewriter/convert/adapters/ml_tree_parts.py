"""What both directions of :mod:`rewriter.convert.adapters.ml_trees` share: the two ops' codes
and attribute names, reading attributes with refusals that name them, the tree walk."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.errors import ConversionError

ML = "ai.onnx.ml"
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")  # TreeEnsemble codes 0..5
BRANCH_MEMBER = 6
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble codes 0..3
POST_TRANSFORMS = {0: "NONE", 3: "SOFTMAX_ZERO", 4: "PROBIT"}  # the codes the schema and onnxruntime agree on
CONTESTED_POST_TRANSFORMS = {1: "SOFTMAX", 2: "LOGISTIC"}  # the schema's reading; onnxruntime swaps them

TE_REQUIRED = ("tree_roots", "nodes_modes", "nodes_featureids", "nodes_splits", "nodes_truenodeids",
                "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs", "leaf_targetids", "leaf_weights")
TE_KNOWN = set(TE_REQUIRED) | {"aggregate_function", "post_transform", "n_targets", "nodes_hitrates",
                                 "nodes_missing_value_tracks_true", "membership_values"}
REG_NODES = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_truenodeids",
              "nodes_falsenodeids")
REG_TARGETS = ("target_treeids", "target_nodeids", "target_ids")
REG_TWINS = ("nodes_values", "nodes_hitrates", "target_weights", "base_values")  # FLOATS and *_as_tensor
REG_KNOWN = (set(REG_NODES) | set(REG_TARGETS) | set(REG_TWINS) | {f"{n}_as_tensor" for n in REG_TWINS}
              | {"aggregate_function", "post_transform", "n_targets", "nodes_missing_value_tracks_true"})
F32_MAX = float(np.finfo(np.float32).max)
MAX_NODES = 1 << 22  # regressor nodes written at most when shared TreeEnsemble nodes are copied


def type_name(t: int) -> str:
    try:
        return TensorProto.DataType.Name(t).lower()
    except ValueError:
        return f"element type {t}"


class Refuse:
    def __init__(self, node: onnx.NodeProto):
        self.where = f"{node.op_type} {node.name!r}" if node.name else node.op_type

    def __call__(self, attr: str, reason: str) -> ConversionError:
        return ConversionError(f"{self.where}: {attr}: {reason}")


def read_attrs(node: onnx.NodeProto, known: set[str], refuse: Refuse) -> dict:
    out = {}
    for a in node.attribute:
        if a.name not in known:
            raise refuse(a.name, f"not an attribute of {node.op_type}; its meaning is unknown")
        if a.ref_attr_name:
            raise refuse(a.name, f"refers to the function attribute {a.ref_attr_name!r}, whose value is unknown here")
        out[a.name] = helper.get_attribute_value(a)
    return out


def read_ints(a: dict, name: str, refuse: Refuse, default=None) -> list[int]:
    if name not in a:
        if default is None:
            raise refuse(name, "required and absent")
        return default
    v = a[name]
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) for x in v):
        raise refuse(name, "must be a list of integers")
    return [int(x) for x in v]


def read_tensor(a: dict, name: str, refuse: Refuse) -> onnx.TensorProto | None:
    v = a.get(name)
    if v is not None and not isinstance(v, onnx.TensorProto):
        raise refuse(name, "must be a tensor")
    return v


def flat(t: onnx.TensorProto) -> np.ndarray:
    return numpy_helper.to_array(t).reshape(-1)


def check_input_float(input_elem_type: int | None, refuse: Refuse, target: str) -> None:
    if input_elem_type is None or input_elem_type == TensorProto.FLOAT:
        return
    name = type_name(input_elem_type)
    if input_elem_type == TensorProto.FLOAT16:
        raise refuse("X", f"the input is float16, which {target} does not take")
    if input_elem_type == TensorProto.DOUBLE:
        raise refuse("X", "the input is double: TreeEnsemble's output has its input's type and "
                          "TreeEnsembleRegressor's is always float, so one node cannot stand for the other")
    raise refuse("X", f"the input is {name}; only float inputs convert ({target} "
                      + ("takes float, double and float16 only)" if target == "TreeEnsemble" else "cannot take it)"))


def walk(root, children, refuse: Refuse, attr: str):
    """Depth-first walk (true branch first) of the keys reachable from ``root``, each once: its
    preorder and its postorder. A key is ``("n", i)`` for a branch node, ``("l", j)`` for a leaf;
    a cycle is refused."""
    pre, post, state = [], [], {}
    stack = [(root, False)]
    while stack:
        key, leaving = stack.pop()
        if leaving:
            state[key] = 2
            post.append(key)
            continue
        s = state.get(key)
        if s == 1:
            raise refuse(attr, f"node {key[1]} is its own descendant (a cycle): no runtime finishes that walk")
        if s == 2:
            continue
        pre.append(key)
        if key[0] == "l":
            state[key] = 2
            post.append(key)
            continue
        state[key] = 1
        stack.append((key, True))
        t, f = children(key[1])
        stack.append((f, False))
        stack.append((t, False))
    return pre, post
