"""``ai.onnx.ml`` ArrayFeatureExtractor, OneHotEncoder and LabelEncoder as standard ONNX,
with ONNX Runtime's lookup rules (``array_feature_extractor.cc``, ``onehotencoder.cc``,
``label_encoder.{h,cc}``): Gather, and key lookups by equality (Equal; strings by Equal from
opset 19, below it by Unique over the keys followed by the input, whose inverse indices name the
key each input equals). ZipMap is :mod:`.ml_zipmap`'s."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from rewriter.convert.lowering.emit import BOOL, F32, F64, I64, STR, negative_zeros
from rewriter.convert.lowering.registry import lowering

__all__ = ["STRING_EQUAL_OPSET", "looks_strings_up", "string_equal_opset"]

INT32 = 6
STRING_EQUAL_OPSET = 19  # Equal takes strings from this opset
EXACT = "exact: a selection, no arithmetic (identical in every runtime)"


def lookup(e, x: str, keys, strings: bool) -> tuple[str, str]:
    """(index of the key each element of ``x`` equals (int64, x's shape; 0 where none), whether
    one does (bool)) for distinct ``keys``."""
    k = len(keys)
    key_t = e.const(np.asarray(keys, dtype=object) if strings else np.asarray(keys), hint="keys")
    if strings and e.final_opset < STRING_EQUAL_OPSET:
        flat = e.op("Reshape", [x, e.ints([-1])])
        _, _, inverse, _ = e.op("Unique", [e.op("Concat", [key_t, flat], axis=0)], n_out=4, sorted=0)
        tail = e.op("Slice", [inverse, e.ints([k]), e.ints([np.iinfo(np.int64).max]), e.ints([0])])
        found = e.op("Reshape", [tail, e.op("Shape", [x])])
        limit = e.const(np.int64(k), hint="key_count")
        hit = e.op("Less", [found, limit])
        return e.op("Where", [hit, found, e.const(np.int64(0), hint="zero")]), hit
    eq = e.op("Equal", [e.unsqueeze(x, [-1]), key_t])
    as_int = e.cast(eq, INT32)
    index = e.op("ArgMax", [as_int], axis=-1, keepdims=0)
    hit = e.cast(e.reduce("ReduceMax", as_int, [-1], keepdims=0), BOOL)
    return index, hit


def looks_strings_up(model) -> bool:
    """Whether a LabelEncoder or OneHotEncoder of ``model`` (any scope) has string keys, so that
    its lowering below :data:`STRING_EQUAL_OPSET` writes a Unique (LabelEncoder-1's string classes
    count: they are keys when its input is a string)."""
    from rewriter.graph import traversal

    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.domain != "ai.onnx.ml" or node.op_type not in ("LabelEncoder", "OneHotEncoder"):
                continue
            for a in node.attribute:
                if a.name in ("cats_strings", "keys_strings", "classes_strings") and len(a.strings):
                    return True
                if a.name == "keys_tensor" and a.t.data_type == STR:
                    return True
    return False


def string_equal_opset(model, target, lacks_unique: bool) -> int | None:
    """The opset to lower ``model`` at for ``target`` (a :class:`rewriter.targets.Target`) when it
    runs the string lookups only so: below :data:`STRING_EQUAL_OPSET` they are a Unique, which a
    target may lack (``lacks_unique``) while it runs Equal on strings from there (LiteRT 2.6: a
    string LabelEncoder of a model at opset 15). None: at the model's own."""
    from rewriter.graph import traversal

    current = traversal.opset_version(model.opset_import)
    if current is None or current >= STRING_EQUAL_OPSET or (target.opsets.get("") or 0) < STRING_EQUAL_OPSET:
        return None
    if not lacks_unique or target.lacks("", "Equal", STRING_EQUAL_OPSET):
        return None
    return STRING_EQUAL_OPSET if looks_strings_up(model) else None


@lowering("ArrayFeatureExtractor", exactness=EXACT)
def array_feature_extractor(ctx) -> None:
    """Z = X[..., Y.flatten()] (a rank-1 X gives [1, k])."""
    ctx.known()
    ctx.input_elem({F32: "float", F64: "double", I64: "int64", INT32: "int32", STR: "string"})
    rank = ctx.input(0).rank
    if rank is None or rank == 0:
        ctx.block("the input's rank is unknown (onnxruntime returns [1, k] for rank 1, the rank kept otherwise)")
    e = ctx.emit
    index = ctx.node.input[1]
    if ctx.input(1).rank != 1:
        index = e.op("Reshape", [index, e.ints([-1])])
    z = ctx.node.output[0]
    if rank == 1:
        e.unsqueeze(e.op("Gather", [ctx.node.input[0], index], axis=-1), [0], out=z)
    else:
        e.op("Gather", [ctx.node.input[0], index], out=z, axis=-1)


@lowering("OneHotEncoder", exactness=EXACT + "; zeros=0: onnxruntime fails on an unknown category, "
                                             "the lowering gives a row of zeros")
def one_hot_encoder(ctx) -> None:
    """Y[..., c] = 1.0 where the element (numbers truncated to int64) is category c, the last of
    equal categories winning (the kernel's map keeps the last index)."""
    ctx.known("cats_int64s", "cats_strings", "zeros")
    elem = ctx.input_elem({I64: "int64", F32: "float", F64: "double", STR: "string"})
    ints, strs = ctx.ints("cats_int64s"), ctx.strings("cats_strings")
    if len(ints) and strs:
        ctx.block("both cats_int64s and cats_strings (onnxruntime refuses the node)")
    cats = strs or list(ints)
    if not cats:
        ctx.block("no categories (onnxruntime refuses the node)")
    rank = ctx.input(0).rank
    if rank is not None and rank > 2:
        ctx.block(f"input rank {rank}: onnxruntime encodes rank <= 2")
    e, x, width = ctx.emit, ctx.node.input[0], len(cats)
    strings_in = elem == STR
    if strings_in != bool(strs):  # the kernel looks the value up in the other (empty) map: all zeros
        shape = e.op("Concat", [e.op("Shape", [x]), e.ints([width])], axis=0)
        e.op("ConstantOfShape", [shape], out=ctx.node.output[0],
             value=numpy_helper.from_array(np.zeros(1, np.float32)))
        return
    winner = {c: j for j, c in enumerate(cats)}  # last index of each category
    keys = list(winner)
    if not strings_in and elem != I64:
        x = e.cast(x, I64)
    index, hit = lookup(e, x, np.asarray(keys, dtype=object if strings_in else np.int64), strings_in)
    column = e.op("Gather", [e.const(np.asarray(list(winner.values()), np.int64), hint="columns"), index])
    onehot = e.op("And", [e.op("Equal", [e.unsqueeze(column, [-1]), e.const(np.arange(width, dtype=np.int64),
                                                                              hint="range")]),
                          e.unsqueeze(hit, [-1])])
    e.cast(onehot, F32, out=ctx.node.output[0])


_DEFAULTS = {"int64": ("default_int64", -1), "string": ("default_string", "_Unused"), "float": ("default_float", -0.0)}
_KINDS = {"int64s": "int64", "strings": "string", "floats": "float"}
_NP = {"int64": np.int64, "float": np.float32, "string": object}


def _tensor_kind(arr: np.ndarray) -> str:
    return "string" if arr.dtype.kind in "OUS" else {"float32": "float"}.get(str(arr.dtype), str(arr.dtype))


def _pairs(ctx, side: str) -> tuple[str, np.ndarray] | None:
    """(kind, values) of the ``keys`` or ``values`` side, from its list or (opset 4) tensor attribute."""
    for suffix, kind in _KINDS.items():
        if f"{side}_{suffix}" in ctx.attrs:
            vals = ctx.strings(f"{side}_{suffix}") if kind == "string" else ctx.attrs[f"{side}_{suffix}"]
            return kind, np.asarray(vals, dtype=_NP[kind])
    t = ctx.tensor(f"{side}_tensor")
    if t is not None:
        return _tensor_kind(t), t.reshape(-1).astype(object) if t.dtype.kind in "OUS" else t.reshape(-1)
    return None


def _v1(ctx, elem) -> tuple:
    classes = ctx.strings("classes_strings")
    if elem == STR:  # string -> index of its last occurrence
        last = {c: i for i, c in enumerate(classes)}
        return ("string", list(last), "int64", np.asarray(list(last.values()), np.int64),
                np.int64(ctx.attr("default_int64", -1)))
    return ("int64", np.arange(len(classes), dtype=np.int64), "string", np.asarray(classes, dtype=object),
            np.asarray(ctx.attr("default_string", "_Unused"), dtype=object))


def _first_wins(kind: str, keys: np.ndarray, values: np.ndarray, nan_matches: bool):
    kept_k, kept_v, nan_value = [], [], None
    for k, v in zip(keys.tolist(), values.tolist()):
        if kind in ("float", "float64") and k != k:
            if nan_matches and nan_value is None:
                nan_value = v
            continue
        if not any(k == other for other in kept_k):  # -0.0 == 0.0, as the kernel's map compares
            kept_k.append(k)
            kept_v.append(v)
    return kept_k, kept_v, nan_value


@lowering("LabelEncoder", exactness=EXACT)
def label_encoder(ctx) -> None:
    """Y = the value of the key X equals (opset 1: the class index, or the class of an index), else
    the default; among equal keys the first wins (opset 1, string to index: the last); from opset
    4 a NaN key matches NaN input."""
    version = ctx.domain_version
    ctx.known("classes_strings", "default_int64", "default_string", "default_float", "default_tensor",
              *(f"{s}_{k}" for s in ("keys", "values") for k in (*_KINDS, "tensor")))
    elem = ctx.input_elem()
    if version < 2:
        key_kind, keys, value_kind, values, default = _v1(ctx, elem)
        nan_value = None
    else:
        k, v = _pairs(ctx, "keys"), _pairs(ctx, "values")
        if k is None or v is None or len(k[1]) != len(v[1]):
            ctx.block("keys and values missing or of different lengths (onnxruntime refuses the node)")
        key_kind, value_kind = k[0], v[0]
        kept_k, kept_v, nan_value = _first_wins(key_kind, k[1], v[1], version >= 4)
        keys, values = np.asarray(kept_k, dtype=k[1].dtype), np.asarray(kept_v, dtype=v[1].dtype)
        default = _default(ctx, value_kind, v[1].dtype)
    want = {"int64": I64, "string": STR, "float": F32, "float64": F64, "int32": INT32, "int16": 5}
    if want.get(key_kind) != elem:
        ctx.block(f"keys of type {key_kind} for a {_kind_name(elem)} input")
    out_elem = ctx.output(0).elem
    if out_elem is not None and want.get(value_kind) != out_elem:
        ctx.block(f"values of type {value_kind} for a {_kind_name(out_elem)} output")
    _encode(ctx, elem, np.asarray(keys, dtype=object) if key_kind == "string" else np.asarray(keys),
            np.asarray(values, dtype=object) if value_kind == "string" else np.asarray(values), default, nan_value)


def _kind_name(elem) -> str:
    from rewriter.convert.lowering.context import type_name
    return type_name(elem)


def _default(ctx, kind: str, dtype):
    t = ctx.tensor("default_tensor")
    if t is not None and t.size:
        return t.reshape(-1)[0]
    name, fallback = _DEFAULTS.get(kind, (None, 0))
    if name is None:
        return np.zeros((), dtype)
    value = ctx.attr(name, fallback)
    return np.asarray(value, dtype=_NP[kind])


def _encode(ctx, elem, keys: np.ndarray, values: np.ndarray, default, nan_value) -> None:
    e, x, y = ctx.emit, ctx.node.input[0], ctx.node.output[0]
    dtype = values.dtype
    fallback = e.const(np.asarray(default, dtype=dtype), hint="default")
    if nan_value is not None:
        fallback = e.op("Where", [e.op("IsNaN", [x]), e.const(np.asarray(nan_value, dtype=dtype), hint="nan_value"),
                                  fallback])
    if not len(keys):
        e.op("Expand", [fallback, e.op("Shape", [x])], out=y)
        return
    index, hit = lookup(e, x, keys, elem == STR)
    found = e.op("Gather", [e.const(values, hint="values"), index])
    if values.dtype.kind == "f":
        e.select(hit, found, fallback, a_signed=negative_zeros(values), dtype=values.dtype.type, out=y)
    else:
        e.op("Where", [hit, found, fallback], out=y)

