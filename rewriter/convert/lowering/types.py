"""The element types and shapes the lowerings read, for the whole model: ONNX shape inference,
helped where it stops at an ``ai.onnx.ml`` node whose schema infers nothing (Scaler, Normalizer,
...): such outputs get the type ONNX Runtime's kernel writes, and inference runs again (a few
rounds), so that the values after them are typed too. Initializers count as typed values."""

from __future__ import annotations

import logging

import onnx
from onnx import TensorProto, helper

from rewriter.convert.lowering.contrib_types import fill_contrib_types
from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_value

__all__ = ["model_types", "function_types"]

logger = logging.getLogger(__name__)
ML = "ai.onnx.ml"
_ROUNDS = 4
_FLOAT_SAME_SHAPE = {"Scaler", "Normalizer"}
_SAME = {"Binarizer", "Imputer"}


def _tensor(elem: int, dims) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem, dims)


def _dims(tp: onnx.TypeProto):
    t = tp.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def _rows(dims):
    if dims is None:
        return None
    return 1 if len(dims) == 1 else (dims[0] if dims else None)


def _label_elem(node) -> int:
    names = {a.name for a in node.attribute}
    return TensorProto.STRING if names & {"classlabels_strings"} else TensorProto.INT64


def _outputs(node: onnx.NodeProto, x: onnx.TypeProto) -> list:
    """The types ONNX Runtime's kernel gives ``node``'s outputs, from its first input's type."""
    elem, dims = x.tensor_type.elem_type, _dims(x)
    op, n = node.op_type, _rows(dims)
    if op in _FLOAT_SAME_SHAPE:
        return [_tensor(TensorProto.FLOAT, dims)]
    if op in _SAME:
        return [_tensor(elem, dims)]
    if op == "ArrayFeatureExtractor":
        return [_tensor(elem, None if dims is None else ([1, None] if len(dims) == 1 else dims[:-1] + [None]))]
    if op == "OneHotEncoder":
        cats = attribute_value(node, "cats_int64s") or attribute_value(node, "cats_strings") or []
        return [_tensor(TensorProto.FLOAT, None if dims is None else dims + [len(cats)])]
    if op == "LinearRegressor":
        return [_tensor(TensorProto.FLOAT, [n, attribute_value(node, "targets", 1)])]
    if op == "LinearClassifier":
        classes = len(attribute_value(node, "intercepts", []))
        labels = len(attribute_value(node, "classlabels_ints", []) or attribute_value(node, "classlabels_strings", []))
        return [_tensor(_label_elem(node), [n]), _tensor(TensorProto.FLOAT, [n, 2 if classes == 1 and labels == 2
                                                                             else classes])]
    if op == "SVMRegressor":
        return [_tensor(TensorProto.FLOAT, [n, 1])]
    if op == "SVMClassifier":
        labels = len(attribute_value(node, "classlabels_ints", []) or attribute_value(node, "classlabels_strings", []))
        svc = sum(attribute_value(node, "vectors_per_class", [])) > 0 and not attribute_value(node, "prob_a")
        width = (2 if labels == 2 else labels * (labels - 1) // 2) if svc else labels
        return [_tensor(_label_elem(node), [n]), _tensor(TensorProto.FLOAT, [n, width])]
    if op == "TreeEnsembleRegressor":
        return [_tensor(TensorProto.FLOAT, [n, attribute_value(node, "n_targets", 1)])]
    if op == "TreeEnsembleClassifier":
        labels = attribute_value(node, "classlabels_int64s", []) or attribute_value(node, "classlabels_strings", [])
        elem = TensorProto.STRING if attribute_value(node, "classlabels_strings") else TensorProto.INT64
        return [_tensor(elem, [n]), _tensor(TensorProto.FLOAT, [n, len(labels)])]
    return []


def _shapeless(known: onnx.TypeProto, rule: onnx.TypeProto) -> bool:
    """ONNX's inference gave a tensor its type only (SVMClassifier's scores, what follows them) where a
    rule or a later inference knows the rank."""
    return (known.WhichOneof("value") == "tensor_type" and rule.WhichOneof("value") == "tensor_type"
            and not known.tensor_type.HasField("shape") and rule.tensor_type.HasField("shape")
            and known.tensor_type.elem_type == rule.tensor_type.elem_type)


def _collect(model: onnx.ModelProto) -> dict:
    types = {}
    for scope in traversal.iter_scopes(model):
        body = scope.body
        for v in [*getattr(body, "value_info", [])] + ([] if scope.is_function else [*body.input, *body.output]):
            if v.type.WhichOneof("value"):
                types.setdefault(v.name, v.type)
        if not scope.is_function:
            for t in body.initializer:
                types.setdefault(t.name, _tensor(t.data_type, list(t.dims)))
    return types


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as e:  # the declared types stand; lowerings that need more refuse
        logger.info("shape inference failed before lowering: %s", e)
        return model


def model_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """name -> TypeProto for every value whose type is known (all scopes; names are unique)."""
    inferred = _infer(model)
    types = _collect(inferred)
    for _ in range(_ROUNDS):
        added = []
        for node in traversal.all_nodes(model.graph):
            if node.domain != ML or not node.input or node.input[0] not in types:
                continue
            x = types[node.input[0]]
            if x.WhichOneof("value") != "tensor_type":
                continue
            for name, tp in zip(node.output, _outputs(node, x)):
                if name and (name not in types or _shapeless(types[name], tp)):
                    types[name] = tp
                    added.append(helper.make_value_info(name, tp))
        if not added:
            break
        scratch = onnx.ModelProto()
        scratch.CopyFrom(inferred)
        replaced = {v.name for v in added}
        kept = [v for v in scratch.graph.value_info if v.name not in replaced]
        del scratch.graph.value_info[:]
        scratch.graph.value_info.extend(kept + added)
        inferred = _infer(scratch)
        for name, tp in _collect(inferred).items():
            if name not in types or _shapeless(types[name], tp):
                types[name] = tp
    return fill_contrib_types(model, types)


def _call_types(model: onnx.ModelProto, fn: onnx.FunctionProto, types: dict) -> list:
    """Per formal input of ``fn``: the one type every call site gives it, else None."""
    seen: list[set] = [set() for _ in fn.input]
    for scope in traversal.iter_scopes(model):
        for n in scope.body.node:
            if (n.domain, n.op_type) != (fn.domain, fn.name):
                continue
            for i, actual in enumerate(n.input[:len(fn.input)]):
                tp = types.get(actual) if not scope.is_function else None
                seen[i].add(tp.SerializeToString() if tp is not None else None)
    out = []
    for s in seen:
        if len(s) == 1 and None not in s:
            tp = onnx.TypeProto()
            tp.ParseFromString(next(iter(s)))
            out.append(tp)
        else:
            out.append(None)
    return out


def function_types(model: onnx.ModelProto, types: dict) -> dict[tuple[str, str], dict]:
    """(domain, name) -> the types of a model-local function's values, from the types every call
    site gives its inputs (a function called with different types gets none)."""
    out = {}
    for fn in model.functions:
        inputs = [helper.make_value_info(name, tp) if tp is not None else helper.make_value_info(name, onnx.TypeProto())
                  for name, tp in zip(fn.input, _call_types(model, fn, types))]
        graph = helper.make_graph(list(fn.node), fn.name, inputs, [helper.make_value_info(o, onnx.TypeProto())
                                                                   for o in fn.output])
        imports = {o.domain: o.version for o in model.opset_import}
        imports.update({o.domain: o.version for o in fn.opset_import})
        scratch = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in imports.items()],
                                    functions=list(model.functions))
        scratch.ir_version = model.ir_version
        out[(fn.domain, fn.name)] = model_types(scratch)
    return out
