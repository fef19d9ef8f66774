"""``ai.onnx.ml`` steps: LabelEncoder 1 <-> 2 and 4 -> 2, TreeEnsembleClassifier/Regressor 3 -> 1.

LabelEncoder-1 maps strings to their index in ``classes_strings`` (else ``default_int64``)
or an index to its string (else ``default_string``); LabelEncoder-2 maps ``keys_*`` to
``values_*`` (string, int64, float) with a default per value type; LabelEncoder-4 adds the
same as tensors (``keys_tensor``, ``values_tensor``, ``default_tensor``) and the types int16,
int32 and double. TreeEnsemble*-3 added double-precision ``*_as_tensor`` twins of the float
attributes; going to 1 they become the float lists only when float32 holds every value
exactly (then every comparison and sum is the one the double attributes gave).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.registry import register
from rewriter.errors import ConversionError
from rewriter.graph.attributes import attribute_values

ML = "ai.onnx.ml"
_V1_DEFAULT_INT, _V1_DEFAULT_STRING = -1, "_Unused"  # LabelEncoder-1's defaults
_LIST = {TensorProto.STRING: "strings", TensorProto.INT64: "int64s", TensorProto.FLOAT: "floats"}


def _set(node: onnx.NodeProto, values: dict) -> None:
    del node.attribute[:]
    for name in sorted(values):
        node.attribute.append(helper.make_attribute(name, values[name]))


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else v


@register("LabelEncoder", 1, 2, domain=ML, kind="attribute rewrite")
def label_encoder_1_2(node, ctx) -> None:
    a = attribute_values(node)
    classes = [_text(c) for c in a.get("classes_strings", [])]
    t = ctx.elem_type(node.input[0])
    if t == TensorProto.STRING:  # string -> its index
        _set(node, {"keys_strings": classes, "values_int64s": list(range(len(classes))),
                    "default_int64": int(a.get("default_int64", _V1_DEFAULT_INT))})
    elif t == TensorProto.INT64:  # index -> its string
        _set(node, {"keys_int64s": list(range(len(classes))), "values_strings": classes,
                    "default_string": _text(a.get("default_string", _V1_DEFAULT_STRING))})
    else:
        raise ConversionError("LabelEncoder-1 maps strings to indices or indices to strings, and the type of its "
                              f"input '{node.input[0]}' is unknown, so the direction is too")


@register("LabelEncoder", 2, 1, domain=ML, kind="attribute rewrite")
def label_encoder_2_1(node, ctx) -> None:
    a = attribute_values(node)
    if "keys_strings" in a and "values_int64s" in a:
        keys, values = [_text(k) for k in a["keys_strings"]], list(a["values_int64s"])
        if values != list(range(len(keys))):
            raise ConversionError("LabelEncoder-1 maps a string only to its index in classes_strings; these "
                                  "values are not 0, 1, 2, ...")
        _set(node, {"classes_strings": keys, "default_int64": int(a.get("default_int64", _V1_DEFAULT_INT))})
    elif "keys_int64s" in a and "values_strings" in a:
        keys, values = list(a["keys_int64s"]), [_text(v) for v in a["values_strings"]]
        if keys != list(range(len(values))):
            raise ConversionError("LabelEncoder-1 maps an index only to that entry of classes_strings; these "
                                  "keys are not 0, 1, 2, ...")
        _set(node, {"classes_strings": values, "default_string": _text(a.get("default_string", "_Unused"))})
    else:
        kinds = sorted(k for k in a if k.startswith(("keys_", "values_")))
        raise ConversionError(f"LabelEncoder-1 maps only string <-> int64 indices; this one has {', '.join(kinds)}")


@register("LabelEncoder", 4, 2, domain=ML, kind="attribute rewrite")
def label_encoder_4_2(node, ctx) -> None:
    a = attribute_values(node)
    out = {k: v for k, v in a.items() if k not in ("keys_tensor", "values_tensor", "default_tensor")}
    for role in ("keys", "values"):
        tensor = a.get(f"{role}_tensor")
        if tensor is None:
            continue
        kind = _LIST.get(tensor.data_type)
        if kind is None:
            raise ConversionError(f"{role}_tensor is {TensorProto.DataType.Name(tensor.data_type).lower()}, which "
                                  "LabelEncoder-2 does not take (string, int64 and float only)")
        array = numpy_helper.to_array(tensor).reshape(-1)
        out[f"{role}_{kind}"] = [_text(v) for v in array] if kind == "strings" else array.tolist()
    default = a.get("default_tensor")
    if default is not None:
        values_type = next((t for t, k in _LIST.items() if f"values_{k}" in out), None)
        if values_type is None or default.data_type != values_type:
            raise ConversionError("default_tensor's type is not the values' type LabelEncoder-2 has a default for")
        value = numpy_helper.to_array(default).reshape(-1)
        if value.size != 1:
            raise ConversionError("default_tensor must hold one value")
        v = value[0]
        out[f"default_{_LIST[values_type][:-1]}"] = _text(v) if values_type == TensorProto.STRING else v.item()
    _set(node, out)


def _tree_3_1(node, names: tuple[str, ...]) -> None:
    a = attribute_values(node)
    out = dict(a)
    for name in names:
        tensor = a.get(f"{name}_as_tensor")
        if tensor is None:
            continue
        values = numpy_helper.to_array(tensor).astype(np.float64).reshape(-1)
        as_float = values.astype(np.float32)
        inexact = np.flatnonzero((as_float.astype(np.float64) != values) & ~(np.isnan(values) & np.isnan(as_float)))
        if inexact.size:
            i = int(inexact[0])
            raise ConversionError(f"{name}_as_tensor holds {inexact.size} value(s) float32 cannot hold exactly "
                                  f"(e.g. {values[i]!r} at {i}), and ML opset 1 has only the float {name}")
        del out[f"{name}_as_tensor"]
        if name in out:
            raise ConversionError(f"both {name} and {name}_as_tensor are set")
        out[name] = as_float.tolist()
    _set(node, out)


@register("TreeEnsembleClassifier", 3, 1, domain=ML, kind="attribute rewrite")
def tree_ensemble_classifier_3_1(node, ctx) -> None:
    _tree_3_1(node, ("base_values", "class_weights", "nodes_hitrates", "nodes_values"))


@register("TreeEnsembleRegressor", 3, 1, domain=ML, kind="attribute rewrite")
def tree_ensemble_regressor_3_1(node, ctx) -> None:
    _tree_3_1(node, ("base_values", "target_weights", "nodes_hitrates", "nodes_values"))
