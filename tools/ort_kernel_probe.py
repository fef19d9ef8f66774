"""Measure which (domain, op, schema version) each old ONNX Runtime release has no CPU kernel for.

    python tools/ort_kernel_probe.py [--out FILE] [--jobs N] [--keep DIR] [RELEASE ...]

For every schema of the default domain ("") and of "ai.onnx.ml" that the installed onnx
knows (``onnx.defs.get_all_schemas_with_history()``), skipping deprecated and experimental
schemas, and for each since_version ``v`` with ``7 <= v`` ("" domain; ``1 <= v`` for
ai.onnx.ml, whose versions are 1..5) and ``v <=`` the release's newest opset for that domain
(NEWEST below), one tiny model with that single node is built with onnx.helper at
opset_import ``{domain: v}`` (ai.onnx.ml models also import "" opset 13) and the lowest IR
version valid for it (``onnx.helper.find_min_ir_version_for``):

* each type parameter is tensor(float) when allowed, else seq(tensor(float)) /
  optional(tensor(float)) when allowed, else the first allowed tensor type, else the first
  allowed type;
* only required inputs are given (plus the few optional ones an op needs to be valid at all,
  e.g. Resize's scales), one input for a variadic one; required attributes get plausible
  values (Cast 'to' matching the output type, Constant a value tensor, Split num_outputs,
  single-leaf trees for the tree ensembles, ...); If / Loop / Scan / SequenceMap get small
  subgraphs without nodes (outputs wired straight to subgraph inputs or initializers), so
  that no other op's kernel is involved;
* inputs get static shapes; several shape layouts are tried (data rank 4 and shape-like
  inputs rank 1; all rank 4; all rank 1; all rank 2; all scalars; no shape at all), those
  that pass ``onnx.checker.check_model`` and strict shape inference first (an input without
  a shape is not held against a model: onnxruntime takes it); graph output types are the
  ones onnx infers.

The models are written to a temporary directory by this (the project's) python; then, per
release, ONE process of the release's venv python (numpy + onnxruntime only: the LOADER
script below, run with ``-c``) creates an InferenceSession (CPU EP, graph optimizations
disabled) for each file and prints a JSON line per file; a release that crashes on a file is
restarted after it.  That happens in a few rounds (next shape variants, then type variants),
one process per release per round.  Per (op, v) and release:

* a variant loads                                  -> present (not listed);
* "Could not find an implementation for OP(N)"     -> the model passed graph resolution, so
  shapes no longer matter: every other assignment of allowed types to the type parameters
  is tried (up to 40 models, one round).  One loads: present, and listed under
  "type_limited" (the kernel exists for some types only); none does: "missing".  When OP is
  another op than the one probed, the probed one is a function op whose body needs a kernel
  the release lacks (CastLike-19 -> Cast(19)): "missing" too, and "missing_via_function"
  says which;
* any other failure                                -> the next shape variant, then the type
  variants; when none loads: "probe_invalid" with the first error (first 200 chars).

Output (tools/runtime_data/ort_kernel_probe.json unless --out):

    {"source": "measured by tools/ort_kernel_probe.py on DATE with onnxruntime VERSIONS ...",
     "releases": {"1.15": {"onnxruntime": "1.15.1",
                           "missing": {"": {"Identity": [19], ...}, "ai.onnx.ml": {...}},
                           "probe_invalid": {"": {"Op": {"v": "error"}}, "ai.onnx.ml": {}},
                           "type_limited": {"": {"ConvInteger": {"10": "no kernel for ...; loads with ..."}}},
                           "missing_via_function": {"": {"CastLike": {"19": "Cast(19)"}}},
                           "checked": 346}, ...}}

("type_limited" and "missing_via_function" only where there is something to say.)
Developer tool; no network.  Takes about a minute for all ten releases.

Half types: ``--dtypes float16,bfloat16 [--current]``
-----------------------------------------------------

    python tools/ort_kernel_probe.py --dtypes float16,bfloat16 --current [--out FILE] [--data-out FILE] [RELEASE ...]

which schemas have a CPU kernel for float16 / bfloat16.  The same schemas (plus the older
ones still in force at opset 7, e.g. Relu-6, probed at opset 7 and IR 4), for each type those
whose type constraints allow it: every type parameter that is float (tensor, seq or optional
of it) becomes the same form of the half type where allowed, one without float but with
tensor(half) becomes that; the shape variants as above; when none runs in the half type, the
type variants move only the other parameters (int64 / int32 indices, ...), never a half one
back to float.  ``--current`` also measures the onnxruntime of the project's python (as its
MAJOR.MINOR; it replaces a venv of the same minor in the shipped table, a difference is noted).

A session that loads is not enough: ONNX Runtime's InsertCastTransformer runs even with graph
optimizations disabled, and a float16 node without a float16 kernel gets Casts to and from
float32 around it and loads (Add, MatMul, Relu, Conv on x86_64; bfloat16 has no such fallback).
So each session is made with ``optimized_model_filepath`` and the final graph it saves is read:

* loads, no Cast added, the node still there (or no node left: Constant) -> "kernel";
* loads, no Cast added, the node expanded into its function body, whose nodes all run in
  the half type -> "function", if it does so with every optional input given too (a body
  depends on them: Clip-13 without min and max is Identity, with them Less and Where);
  else what that model does ("function_inputs" says which);
* loads with Casts InsertCastTransformer added (named InsertedCast_* in 1.15/1.16,
  InsertedPrecisionFreeCast_* since 1.17; or more Casts than the model had while the node
  is kept) -> "cast_fallback" (no half kernel: ORT computes it in float32);
* "Could not find an implementation for OP(N)", or the float fallback failing ("Failed to
  find kernel for OP(N)", an error naming an inserted Cast)               -> "missing";
* any other failure of a model onnx's checker and strict shape inference accept (ORT's own
  type errors: a function body only valid for float, ...)                  -> "load_error";
* only models onnx rejects fail that way (or none could be built)          -> "probe_invalid".

A single-node graph measures the kernel registry: ORT's IsIsolatedFp16NodeOnCpu (which moves
an fp16 node that has a kernel to float32 when every neighbour is cast) needs input edges from
other nodes and no graph output.  Output: tools/runtime_data/ort_half_probe.json (unless --out)
with, per release and type, the six parts above as {domain: {op: [since_version, ...]}} (the
last two as {op: {version: error}}), "type_limited" ({op: {version: "not with ...; with ..."}}),
"function_inputs" ({op: {version: note}}) and "checked"; and the shipped table
rewriter/targets/data/onnxruntime_half.json (unless --data-out): per release "onnxruntime",
"opsets" (NEWEST), per type the versions of "kernel" and "function", and "no_kernel" per type
(those of "cast_fallback", "missing", "load_error"); rewriter/targets/half_kernels.py reads it.
Kernels differ by platform (arm64 builds register more float16 ones): the source line names it.
Takes about a minute for both types and all releases.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import onnx.checker
import onnx.defs
import onnx.shape_inference
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests import old_ort  # noqa: E402

OUT = ROOT / "tools" / "runtime_data" / "ort_kernel_probe.json"
ML = "ai.onnx.ml"
ML_DEFAULT_OPSET = 13  # "" opset imported next to ai.onnx.ml in ML models

# newest opset each release loads (measured by tools/ort_probe.py): release -> {domain: opset}
NEWEST = {
    "1.15": {"": 19, ML: 3},
    "1.16": {"": 19, ML: 3},
    "1.17": {"": 20, ML: 4},
    "1.18": {"": 21, ML: 5},
    "1.19": {"": 21, ML: 5},
    "1.20": {"": 21, ML: 5},
    "1.21": {"": 22, ML: 5},
    "1.22": {"": 22, ML: 5},
    "1.23": {"": 23, ML: 5},
    "1.32": {"": 28, ML: 5},
}
MIN_VERSION = {"": 7, ML: 1}
CURRENT = "current"  # the release of the project's own python (--current)
_ELEM_NAME = {TensorProto.FLOAT: "float", TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16"}

LOADER = r"""
import json, os, sys
import onnxruntime as ort
ort.set_default_logger_severity(4)
args = sys.argv[1:]
save = None
if args[:1] == ["--save"]:  # write each loaded session's final graph to SAVE/<file>
    save, args = args[1], args[2:]
folder = args[0]
names = args[1:] or sorted(n for n in os.listdir(folder) if n.endswith(".onnx"))
print(json.dumps({"ort": ort.__version__}), flush=True)
for name in names:
    print(json.dumps({"start": name}), flush=True)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    if save:
        opts.optimized_model_filepath = os.path.join(save, name)
    try:
        ort.InferenceSession(os.path.join(folder, name), sess_options=opts, providers=["CPUExecutionProvider"])
        r = {"ok": True}
    except Exception as e:
        r = {"ok": False, "error": type(e).__name__ + ": " + str(e)}
    r["file"] = name
    print(json.dumps(r), flush=True)
"""

MISSING_RE = re.compile(r"Could not find an implementation for ([A-Za-z0-9_]+)\((\d+)\) node")
# how InsertCastTransformer's float fallback says the node has no kernel for float either (--dtypes)
FALLBACK_MISSING_RE = re.compile(r"Failed to find kernel for ([A-Za-z0-9_]+)\((\d+)\)")

# --------------------------------------------------------------------------------------------
# types


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    parts.append(cur.strip())
    return parts


def elem_type(name: str) -> int:
    return TensorProto.DataType.Value(name.upper())


def type_proto(text: str, shape) -> onnx.TypeProto:
    """TypeProto of a type string ("tensor(float)", "seq(tensor(int64))", "map(int64, float)", ...).

    ``shape`` applies to a top-level tensor only (None: no shape); nested tensors get none.
    """
    if "(" not in text:  # a map's value type "float" stands for tensor(float)
        text = f"tensor({text})"
    kind, inner = text.split("(", 1)
    inner = inner[:-1]
    if kind == "tensor":
        return helper.make_tensor_type_proto(elem_type(inner), shape)
    if kind == "seq":
        return helper.make_sequence_type_proto(type_proto(inner, None))
    if kind == "optional":
        return helper.make_optional_type_proto(type_proto(inner, None))
    if kind == "map":
        key, value = _split_top(inner)
        return helper.make_map_type_proto(elem_type(key), type_proto(value, None))
    if kind == "sparse_tensor":
        return helper.make_sparse_tensor_type_proto(elem_type(inner), shape)
    raise ValueError(text)


def default_type(allowed: list[str]) -> str:
    for pref in ("tensor(float)", "seq(tensor(float))", "optional(tensor(float))"):
        if pref in allowed:
            return pref
    for t in allowed:
        if t.startswith("tensor("):
            return t
    return allowed[0]


def tensor_elem(text: str) -> str | None:
    """'float' for 'tensor(float)' (else None)."""
    m = re.fullmatch(r"tensor\((\w+)\)", text)
    return m.group(1) if m else None


# --------------------------------------------------------------------------------------------
# per-op knowledge

SHAPE_LIKE = {
    "shape", "axes", "starts", "ends", "steps", "pads", "repeats", "sizes", "scales", "roi",
    "split", "K", "k", "image_shape", "block_shape", "sequence_lens", "output_shape", "axis",
    "size", "depth", "position", "dft_length", "frame_step", "frame_length", "write_indices",
    "M", "cond", "start", "limit", "delta", "num_mel_bins", "sample_rate", "lower_edge_hertz",
    "upper_edge_hertz", "x_scale", "y_scale", "a_scale", "b_scale", "w_scale", "x_zero_point",
    "y_zero_point", "a_zero_point", "b_zero_point", "w_zero_point", "ratio", "training_mode",
    "min", "max", "constant_value", "values", "slope", "batch_indices", "Y",
}

# optional inputs an op cannot do without (by op, from version): names to keep
KEEP_OPTIONAL = {
    "Resize": {"scales"},
    "Optional": {"input"},  # else it needs a 'type' attribute
}


def _tensor(name: str, elem: int, values) -> TensorProto:
    arr = np.array(values)
    return helper.make_tensor(name, elem, list(arr.shape), arr.flatten().tolist())


def attributes(op: str, domain: str, v: int, types: dict[str, str], schema) -> dict:
    """Attribute values for the node (required ones, plus a few an op needs in practice)."""
    out_elem = None
    for o in schema.outputs:
        t = types.get(o.type_str, o.type_str)
        out_elem = tensor_elem(t)
        break
    a: dict = {}
    if domain == "":
        if op in ("AveragePool", "MaxPool", "LpPool", "MaxUnpool"):
            a["kernel_shape"] = [1, 1]
        elif op in ("BitCast", "Cast"):
            a["to"] = elem_type(out_elem)
        elif op == "BitShift":
            a["direction"] = "LEFT"
        elif op in ("Concat", "ConcatFromSequence"):
            a["axis"] = 0
        elif op == "Constant":
            a["value"] = _tensor("value", elem_type(out_elem), [1.0])
        elif op == "ConstantOfShape":
            a["value"] = _tensor("value", elem_type(out_elem), [0])
        elif op == "DepthToSpace":
            a["blocksize"] = 2
        elif op == "SpaceToDepth":
            a["blocksize"] = 2
        elif op == "Einsum":
            a["equation"] = "abcd->abdc"
        elif op in ("RNN", "GRU", "LSTM"):
            a["hidden_size"] = 4  # optional in the schema, required by onnxruntime's kernels
        elif op == "RegexFullMatch":
            a["pattern"] = "a.*"  # optional in the schema, required by onnxruntime's kernel
        elif op == "StringNormalizer":
            a["locale"] = "C"  # the default, en_US.UTF-8, need not be installed
        elif op == "MeanVarianceNormalization":
            a["axes"] = [0, 2, 3]  # its function body refers to the attribute
        elif op == "GroupNormalization":
            a["num_groups"] = 2
        elif op == "LRN":
            a["size"] = 3
        elif op == "LinearAttention":
            a["q_num_heads"] = 1
            a["kv_num_heads"] = 1
            a["update_rule"] = "linear"  # the default, gated_delta, needs the optional decay input
        elif op == "MaxRoiPool":
            a["pooled_shape"] = [1, 1]
        elif op in ("RandomNormal", "RandomUniform"):
            a["shape"] = [2, 3]
            a["dtype"] = elem_type(out_elem)
        elif op in ("RandomNormalLike", "RandomUniformLike", "EyeLike", "Bernoulli", "Multinomial", "SequenceEmpty"):
            if out_elem:
                a["dtype"] = elem_type(out_elem)
            elif op == "SequenceEmpty":
                a["dtype"] = TensorProto.FLOAT
        elif op == "Unsqueeze" and v < 13:
            a["axes"] = [0]
        elif op == "Upsample" and v < 9:
            a["scales"] = [1.0, 1.0, 2.0, 2.0]
        elif op == "Slice" and v < 10:  # (schemas before opset 7: --dtypes probes them at opset 7)
            a.update(starts=[0], ends=[1])
        elif op == "TopK" and v < 10:
            a["k"] = 1
        elif op == "Pad" and v < 11:
            a["pads"] = [0] * 8  # data of rank 4
        elif op == "Split" and v >= 18:
            a["num_outputs"] = 1
        elif op == "TfIdfVectorizer":
            a.update(mode="TF", ngram_indexes=[0], ngram_counts=[0], max_skip_count=0,
                     min_gram_length=1, max_gram_length=1)
            elem = tensor_elem(types["T"])
            if elem == "string":
                a["pool_strings"] = ["a"]
            else:
                a["pool_int64s"] = [1]
        elif op == "Scan":
            a["num_scan_inputs"] = 1
        elif op in ("QuantizeLinear",) and v >= 21 and out_elem:
            a["output_dtype"] = elem_type(out_elem)
    else:  # ai.onnx.ml
        if op == "CastMap":
            a["cast_to"] = {"string": "TO_STRING", "int64": "TO_INT64"}.get(out_elem, "TO_FLOAT")
        elif op == "CategoryMapper":
            a.update(cats_strings=["a", "b"], cats_int64s=[1, 2])
        elif op == "DictVectorizer":
            key = _split_top(types["T1"][4:-1])[0]
            if key == "string":
                a["string_vocabulary"] = ["a", "b"]
            else:
                a["int64_vocabulary"] = [1, 2]
        elif op == "FeatureVectorizer":
            a["inputdimensions"] = [4]
        elif op == "Imputer":
            a.update(imputed_value_floats=[0.0], replaced_value_float=float("nan"))
        elif op == "LabelEncoder":
            in_elem = tensor_elem(types["T1"])
            if v == 1:
                a["classes_strings"] = ["a", "b"]
                a["default_int64"] = -1 if out_elem == "int64" else None
                a["default_string"] = "_" if out_elem == "string" else None
                a = {k: x for k, x in a.items() if x is not None}
            else:
                suffix = {"string": "strings", "int64": "int64s", "float": "floats"}
                if v >= 4 and (in_elem not in suffix or out_elem not in suffix):
                    a["keys_tensor"] = _tensor("keys_tensor", elem_type(in_elem), [1, 2])
                    a["values_tensor"] = _tensor("values_tensor", elem_type(out_elem), [3, 4])
                else:
                    sample = {"string": ["a", "b"], "int64": [1, 2], "float": [1.0, 2.0]}
                    a[f"keys_{suffix[in_elem]}"] = sample[in_elem]
                    a[f"values_{suffix[out_elem]}"] = sample[out_elem]
        elif op == "LinearClassifier":
            a.update(coefficients=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], intercepts=[0.0, 0.0])
            if out_elem == "string":
                a["classlabels_strings"] = ["a", "b"]
            else:
                a["classlabels_ints"] = [0, 1]
        elif op == "LinearRegressor":
            a.update(coefficients=[1.0, 1.0, 1.0, 1.0], intercepts=[0.0], targets=1)
        elif op == "Normalizer":
            a["norm"] = "MAX"
        elif op == "OneHotEncoder":
            elem = tensor_elem(types["T"])
            if elem == "string":
                a["cats_strings"] = ["a", "b"]
            else:
                a["cats_int64s"] = [0, 1]
        elif op == "SVMClassifier":
            a.update(kernel_type="LINEAR", kernel_params=[0.0, 0.0, 1.0], coefficients=[1.0, 1.0, 1.0, 1.0], rho=[0.0])
            if out_elem == "string":
                a["classlabels_strings"] = ["a", "b"]
            else:
                a["classlabels_ints"] = [0, 1]
        elif op == "SVMRegressor":
            a.update(kernel_type="LINEAR", kernel_params=[0.0, 0.0, 1.0], coefficients=[1.0, 1.0, 1.0, 1.0], rho=[0.0],
                     n_supports=0)
        elif op == "Scaler":
            a.update(offset=[0.0], scale=[1.0])
        elif op == "TreeEnsembleClassifier":
            a.update(nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_modes=["LEAF"],
                     nodes_values=[0.0], nodes_truenodeids=[0], nodes_falsenodeids=[0],
                     class_treeids=[0], class_nodeids=[0], class_ids=[0], class_weights=[1.0])
            if out_elem == "string":
                a["classlabels_strings"] = ["a"]
            else:
                a["classlabels_int64s"] = [0]
        elif op == "TreeEnsembleRegressor":
            a.update(nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_modes=["LEAF"],
                     nodes_values=[0.0], nodes_truenodeids=[0], nodes_falsenodeids=[0],
                     target_treeids=[0], target_nodeids=[0], target_ids=[0], target_weights=[1.0],
                     n_targets=1)
        elif op == "TreeEnsemble":
            elem = elem_type(tensor_elem(types["T"]))
            a.update(tree_roots=[0], nodes_featureids=[0],
                     nodes_splits=_tensor("nodes_splits", elem, [0.5]),
                     nodes_modes=_tensor("nodes_modes", TensorProto.UINT8, [0]),
                     nodes_truenodeids=[0], nodes_falsenodeids=[1], nodes_trueleafs=[1], nodes_falseleafs=[1],
                     leaf_targetids=[0, 0], leaf_weights=_tensor("leaf_weights", elem, [1.0, 2.0]),
                     n_targets=1)
        elif op == "ZipMap":
            a["classlabels_int64s"] = [0, 1]
    return a


def _subgraph(name: str, inputs: list[tuple[str, onnx.TypeProto]], outputs: list[tuple[str, onnx.TypeProto]],
              initializers: list[TensorProto] = ()) -> onnx.GraphProto:
    return helper.make_graph(
        [], name,
        [helper.make_value_info(n, t) for n, t in inputs],
        [helper.make_value_info(n, t) for n, t in outputs],
        initializer=list(initializers),
    )


def control_flow(op: str, v: int, types: dict[str, str], shape,
                 elem: int = TensorProto.FLOAT) -> tuple[list, dict] | None:
    """(graph inputs [(name, TypeProto)], attributes) for an op with a subgraph, else None.

    The values passed through are of type ``elem`` (float; the half type in --dtypes mode).
    """
    f32 = helper.make_tensor_type_proto(elem, shape)
    scalar = lambda e: helper.make_tensor_type_proto(e, [])  # noqa: E731
    if op == "If":
        branch = lambda tag: _subgraph(  # noqa: E731
            f"{tag}_branch", [], [(f"{tag}_out", helper.make_tensor_type_proto(elem, [1]))],
            [_tensor(f"{tag}_out", elem, [1.0 if tag == "then" else 2.0])])
        return [("cond", scalar(TensorProto.BOOL))], {"then_branch": branch("then"), "else_branch": branch("else")}
    if op == "Loop":
        body = _subgraph(
            "body",
            [("iter", scalar(TensorProto.INT64)), ("cond_in", scalar(TensorProto.BOOL)),
             ("v_in", helper.make_tensor_type_proto(elem, None))],
            [("cond_in", scalar(TensorProto.BOOL)), ("v_in", helper.make_tensor_type_proto(elem, None))])
        return ([("M", scalar(TensorProto.INT64)), ("cond", scalar(TensorProto.BOOL)), ("v", f32)],
                {"body": body})
    if op == "Scan":
        # one state, one scan input; the body returns the state and the scan slice unchanged
        body = _subgraph(
            "body",
            [("s_in", helper.make_tensor_type_proto(elem, None)),
             ("x_in", helper.make_tensor_type_proto(elem, None))],
            [("s_in", helper.make_tensor_type_proto(elem, None)),
             ("x_in", helper.make_tensor_type_proto(elem, None))])
        ins = [("s", f32), ("x", f32)]
        if v == 8:
            ins = [("", None)] + ins
        return ins, {"body": body, "num_scan_inputs": 1}
    if op == "SequenceMap":
        body = _subgraph("body", [("e_in", helper.make_tensor_type_proto(elem, None))],
                         [("e_in", helper.make_tensor_type_proto(elem, None))])
        return [("seq", type_proto(f"seq(tensor({_ELEM_NAME[elem]}))", None))], {"body": body}
    return None


# --------------------------------------------------------------------------------------------
# model building

SHAPE_LAYOUTS = ["mixed", "rank4", "rank1", "rank2", "scalar", "none"]


def _shape(layout: str, input_name: str):
    if layout == "none":
        return None
    if layout == "mixed":
        return [1] if input_name in SHAPE_LIKE else [1, 4, 4, 4]
    return {"rank4": [1, 4, 4, 4], "rank1": [4], "rank2": [4, 4], "scalar": []}[layout]


def opsets_for(domain: str, v: int) -> list:
    if domain == "":
        return [helper.make_opsetid("", v)]
    return [helper.make_opsetid("", ML_DEFAULT_OPSET), helper.make_opsetid(domain, v)]


def build(schema, v: int, types: dict[str, str], layout: str, cf_elem: int = TensorProto.FLOAT,
          opset: int | None = None, all_optional: bool = False) -> onnx.ModelProto:
    """The single-node model of ``schema`` at opset ``opset`` (default ``v``) of its domain
    (``all_optional``: with every optional input given, too)."""
    op, domain = schema.name, schema.domain
    cf = control_flow(op, v, types, _shape(layout, "x"), cf_elem)
    graph_inputs: list = []
    node_inputs: list[str] = []
    attrs: dict
    if cf is not None:
        ins, attrs = cf
        for name, tp in ins:
            node_inputs.append(name)
            if name:
                graph_inputs.append(helper.make_value_info(name, tp))
    else:
        attrs = attributes(op, domain, v, types, schema)
        formals = list(schema.inputs)
        keep = KEEP_OPTIONAL.get(op, set())
        # last formal that must be given (required, or optional but kept)
        for i, f in enumerate(formals):
            opt = f.option == onnx.defs.OpSchema.FormalParameterOption.Optional
            if opt and f.name not in keep and not all_optional:
                node_inputs.append("")
                continue
            count = max(1, f.min_arity) if f.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else 1
            for k in range(count):
                name = f.name if count == 1 else f"{f.name}_{k}"
                t = types.get(f.type_str, f.type_str)
                shape = _shape(layout, f.name)
                graph_inputs.append(helper.make_value_info(name, type_proto(t, shape)))
                node_inputs.append(name)
        while node_inputs and node_inputs[-1] == "":
            node_inputs.pop()
    # outputs: the required ones (one for a variadic output), "" for skipped optional ones
    node_outputs: list[str] = []
    if op == "Scan":  # final state and scan output
        node_outputs = ["out_state", "out_scan"]
    for f in ([] if node_outputs else schema.outputs):
        if f.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            node_outputs.append("")
        else:
            node_outputs.append(f"out_{f.name}")
    while node_outputs and node_outputs[-1] == "":
        node_outputs.pop()
    if not node_outputs:  # all outputs optional: keep the first
        node_outputs = [f"out_{schema.outputs[0].name}"]
    node = helper.make_node(op, node_inputs, node_outputs, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], f"{op}_{v}", graph_inputs, [helper.make_empty_tensor_value_info(n) for n in node_outputs if n])
    opsets = opsets_for(domain, opset or v)
    ir = helper.find_min_ir_version_for(opsets)
    if opset is not None and opset > v:
        ir = max(ir, 4)  # IR 3 wants a subgraph's initializers among its inputs
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir, producer_name="ort_kernel_probe")
    # output types: what onnx infers, else the chosen type parameters
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        known = {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    except Exception:  # noqa: BLE001
        known = {}
    formal_out = {f"out_{f.name}": f.type_str for f in schema.outputs}
    cf_type = f"tensor({_ELEM_NAME[cf_elem]})"
    formal_out.update(out_state=cf_type, out_scan=cf_type)
    for out in model.graph.output:
        t = known.get(out.name)
        if t is not None and t.WhichOneof("value") is not None:
            out.type.CopyFrom(t)
        else:
            ts = formal_out[out.name]
            out.type.CopyFrom(type_proto(types.get(ts, ts), None))
    return model


def local_error(model: onnx.ModelProto) -> str | None:
    """Why onnx rejects the model (checker + strict shape inference), or None.

    The checker wants a shape on every graph input and output; an input without one (unknown
    rank) is fine for onnxruntime, so that complaint alone is not held against a model.
    """
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001
        if "Field 'shape' of 'type' is required but missing" not in str(exc):
            return f"{type(exc).__name__}: {exc}"
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


def choose_types(schema, overrides: dict[str, str] | None = None) -> dict[str, str]:
    types = {tc.type_param_str: default_type(list(tc.allowed_type_strs)) for tc in schema.type_constraints}
    # a few ops whose type parameters must differ or match each other
    if schema.domain == ML and schema.name == "LabelEncoder" and schema.since_version == 1:
        types["T2"] = "tensor(int64)"  # string -> int64 (the two must differ)
    if schema.domain == ML and schema.name == "CastMap":
        types["T1"] = "map(int64, float)"
    if overrides:
        types.update(overrides)
    return types


def describe_types(types: dict[str, str]) -> str:
    return ", ".join(f"{k}={t}" for k, t in sorted(types.items()))


def type_alternatives(schema, limit: int = 40) -> list[dict[str, str]]:
    """Other type assignments: each parameter through its allowed tensor types, then all at once."""
    base = choose_types(schema)
    params = [tc for tc in schema.type_constraints]
    alts: list[dict[str, str]] = []
    seen = {tuple(sorted(base.items()))}

    def add(over):
        t = choose_types(schema, over)
        key = tuple(sorted(t.items()))
        if key not in seen:
            seen.add(key)
            alts.append(over)

    # all parameters with the same element type, where each allows it
    elems = []
    for tc in params:
        for t in tc.allowed_type_strs:
            if tensor_elem(t) and tensor_elem(t) not in elems:
                elems.append(tensor_elem(t))
    for e in elems:
        over = {tc.type_param_str: f"tensor({e})" for tc in params if f"tensor({e})" in tc.allowed_type_strs}
        if over:
            add(over)
    for tc in params:
        for t in tc.allowed_type_strs:
            add({tc.type_param_str: t})
    return alts[:limit]


def schemas_to_probe() -> list:
    top = {d: max(n[d] for n in NEWEST.values()) for d in ("", ML)}
    out = []
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in ("", ML) or s.deprecated:
            continue
        if s.support_level != onnx.defs.OpSchema.SupportType.COMMON:
            continue
        if MIN_VERSION[s.domain] <= s.since_version <= top[s.domain]:
            out.append(s)
    return sorted(out, key=lambda s: (s.domain, s.name, s.since_version))


def key_of(s) -> str:
    return f"{s.domain or 'ai.onnx'}__{s.name}__{s.since_version}"


def make_variants(schema, folder: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """Write the shape variants (locally valid first) and type variants of one schema.

    Returns (shape variant files, type variant files, {file: description of its types}).
    """
    v = schema.since_version
    base = choose_types(schema)
    shape_files, bad = [], []
    seen_bytes = set()
    for layout in SHAPE_LAYOUTS:
        try:
            m = build(schema, v, base, layout)
        except Exception:  # noqa: BLE001 - that layout cannot be built
            continue
        data = m.SerializeToString()
        if data in seen_bytes:
            continue
        seen_bytes.add(data)
        name = f"{key_of(schema)}__{layout}.onnx"
        (folder / name).write_bytes(data)
        if local_error(m) is None:
            shape_files.append(name)
        else:
            bad.append(name)
    # locally invalid ones last (onnxruntime may still take them)
    shape_files += bad
    type_files, descr = [], {}
    for i, over in enumerate(type_alternatives(schema)):
        types = choose_types(schema, over)
        for layout in ("mixed", "none"):
            try:
                m = build(schema, v, types, layout)
            except Exception:  # noqa: BLE001
                continue
            if local_error(m) is None:
                name = f"{key_of(schema)}__t{i}_{layout}.onnx"
                (folder / name).write_bytes(m.SerializeToString())
                type_files.append(name)
                descr[name] = describe_types(types)
                break
    return shape_files, type_files, descr


# --------------------------------------------------------------------------------------------
# running


def release_python(release: str) -> str:
    """The python of the release's venv; CURRENT: the project's own python."""
    return sys.executable if release == CURRENT else str(old_ort.venvs_dir() / release / "bin" / "python")


def run_loader(release: str, folder: Path, names: list[str], timeout: float = 1800,
               save: Path | None = None) -> tuple[dict, str]:
    """{file: (ok, error)} for each name, loaded by one process of the release's python (restarted after a crash).

    ``save``: each session's final graph is written to ``save / file`` (``optimized_model_filepath``).
    """
    python = release_python(release)
    results: dict[str, tuple[bool, str]] = {}
    version = ""
    todo = list(names)
    extra = ["--save", str(save)] if save is not None else []
    while todo:
        proc = subprocess.run([python, "-c", LOADER, *extra, str(folder), *todo],
                              capture_output=True, text=True, timeout=timeout)
        started = None
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "ort" in r:
                version = r["ort"]
            elif "start" in r:
                started = r["start"]
            else:
                results[r["file"]] = (r["ok"], r.get("error", ""))
                started = None
        if started is not None:  # crashed on this file
            tail = proc.stderr.strip()[-300:]
            results[started] = (False, f"crash (exit status {proc.returncode}): {tail}")
        elif proc.returncode != 0 and not results:
            raise RuntimeError(f"{release}: loader failed: {proc.stderr[-2000:]}")
        todo = [n for n in todo if n not in results]
    return results, version


def missing_kernel(error: str) -> tuple[str, int] | None:
    """(op, version) of a "Could not find an implementation for OP(N) node" error, else None."""
    m = MISSING_RE.search(error or "")
    return (m.group(1), int(m.group(2))) if m else None


def probe_release(release: str, folder: Path, plan: dict, log) -> dict:
    """Load the models of every schema the release should know, in rounds; classify each schema.

    Per schema: its shape variants one per round until one loads or reports a missing kernel
    (the model then passed graph resolution, so shapes no longer matter); after a missing
    kernel, or when no shape variant loaded, all its type variants in one more round.
    """
    newest = NEWEST[release]
    keys = [k for k, p in plan.items() if p["schema"].since_version <= newest[p["schema"].domain]]
    state = {k: {"i": 0, "stage": "shape", "errors": [], "missing": None, "base_missing": False, "ok": None}
             for k in keys}
    version = ""
    rounds = 0
    while True:
        batch: dict[str, str] = {}
        sent: dict[str, str] = {}  # key -> the stage whose files went into this round
        for k in keys:
            st, p = state[k], plan[k]
            if st["ok"] is not None or st["stage"] == "done":
                continue
            if st["stage"] == "shape" and st["i"] >= len(p["shape"]):
                st["stage"] = "types"
            if st["stage"] == "shape":
                batch[p["shape"][st["i"]]] = k
                sent[k] = "shape"
            elif p["types"]:
                batch.update({f: k for f in p["types"]})
                sent[k] = "types"
            else:
                st["stage"] = "done"
        if not batch:
            break
        rounds += 1
        results, ver = run_loader(release, folder, sorted(batch))
        version = version or ver
        for f in sorted(batch):
            k = batch[f]
            st = state[k]
            ok, err = results[f]
            if st["ok"] is not None:
                continue
            if ok:
                st["ok"] = f
                continue
            miss = missing_kernel(err)
            if sent[k] == "shape":
                if miss is not None:
                    st["missing"], st["base_missing"] = (miss, err), True
                    st["stage"] = "types"  # the model is valid: try the other types
                else:
                    st["errors"].append(err)
                    st["i"] += 1
            elif miss is not None and st["missing"] is None:
                st["missing"] = (miss, err)
        for k, stage in sent.items():  # the round of type variants is a schema's last
            if stage == "types":
                state[k]["stage"] = "done"
        log(f"{release}: round {rounds}: {len(batch)} models")
    out = {"onnxruntime": version, "missing": {"": {}, ML: {}}, "probe_invalid": {"": {}, ML: {}},
           "type_limited": {"": {}, ML: {}}, "missing_via_function": {"": {}, ML: {}}, "checked": len(keys)}
    for k in keys:
        st, p = state[k], plan[k]
        s = p["schema"]
        v = s.since_version
        if st["ok"] is not None:
            if st["base_missing"]:  # the first types tried had no kernel, these loaded
                out["type_limited"][s.domain].setdefault(s.name, {})[str(v)] = (
                    f"no kernel for {describe_types(choose_types(s))}; loads with {p['descr'].get(st['ok'], '')}")
            continue
        if st["missing"] is not None:
            (op, n), err = st["missing"]
            out["missing"][s.domain].setdefault(s.name, []).append(v)
            if op != s.name:  # a function op whose body needs a kernel the release lacks
                out["missing_via_function"][s.domain].setdefault(s.name, {})[str(v)] = f"{op}({n})"
            elif n != v:
                out.setdefault("notes", []).append(f"{s.name}({v}): onnxruntime resolved it as version {n}")
            continue
        err = st["errors"][0] if st["errors"] else "no model could be built"
        out["probe_invalid"][s.domain].setdefault(s.name, {})[str(v)] = err[:200]
    for part in ("missing", "probe_invalid", "type_limited", "missing_via_function"):
        for d in out[part]:
            out[part][d] = dict(sorted(out[part][d].items()))
    for part in ("type_limited", "missing_via_function"):
        if not any(out[part].values()):
            del out[part]
    return out


# --------------------------------------------------------------------------------------------
# --dtypes float16,bfloat16: which schemas have a CPU kernel for a half type

HALF_TYPES = ("float16", "bfloat16")
HALF_OUT = ROOT / "tools" / "runtime_data" / "ort_half_probe.json"
HALF_DATA = ROOT / "rewriter" / "targets" / "data" / "onnxruntime_half.json"
# the names InsertCastTransformer gives its Casts: InsertedCast_X (1.15, 1.16), InsertedPrecisionFreeCast_X (1.17+)
INSERTED_CAST = re.compile(r"Inserted\w*Cast_")
_FLOAT_FORMS = ("tensor({})", "seq(tensor({}))", "optional(tensor({}))")


def half_types(schema, dtype: str) -> dict[str, str] | None:
    """The type parameters of the ``dtype`` model of a schema, or None when none allows ``dtype``.

    A type parameter whose default (``choose_types``) is float (tensor, seq or optional of
    it) becomes the same form of ``dtype`` when the schema allows that; one that does not
    allow float but allows tensor(dtype) becomes tensor(dtype).  The others keep their default.
    """
    types = choose_types(schema)
    halved = False
    for tc in schema.type_constraints:
        p, allowed = tc.type_param_str, list(tc.allowed_type_strs)
        for form in _FLOAT_FORMS:
            if types[p] == form.format("float") and form.format(dtype) in allowed:
                types[p], halved = form.format(dtype), True
                break
        else:
            if "tensor(float)" not in allowed and f"tensor({dtype})" in allowed:
                types[p], halved = f"tensor({dtype})", True
    return types if halved else None


def half_alternatives(schema, dtype: str, limit: int = 40) -> list[dict[str, str]]:
    """Other type assignments: each parameter that is not at ``dtype`` through its allowed
    types, the ``dtype`` ones kept (a kernel that takes the half type only with, say, int64
    indices still counts; one that takes it only next to float tensors does not: the
    conversion changes every float tensor of the node)."""
    base = half_types(schema, dtype)
    default = choose_types(schema)
    seen = {tuple(sorted(base.items()))}
    alts: list[dict[str, str]] = []
    for tc in schema.type_constraints:
        p = tc.type_param_str
        if base[p] != default[p]:
            continue
        for t in tc.allowed_type_strs:
            types = {**base, p: t}
            key = tuple(sorted(types.items()))
            if key not in seen:
                seen.add(key)
                alts.append(types)
    return alts[:limit]


def half_schemas() -> list:
    """``schemas_to_probe()`` and the older schemas still in force at opset MIN_VERSION (Relu-6 is
    Relu up to opset 12): these are probed at opset MIN_VERSION."""
    out = schemas_to_probe()
    for s in onnx.defs.get_all_schemas_with_history():
        low = MIN_VERSION.get(s.domain)
        if low is None or s.since_version >= low or s.deprecated:
            continue
        if s.support_level != onnx.defs.OpSchema.SupportType.COMMON:
            continue
        if onnx.defs.get_schema(s.name, low, s.domain).since_version == s.since_version:
            out.append(s)
    return sorted(out, key=lambda s: (s.domain, s.name, s.since_version))


def make_half_variants(schema, dtype: str, folder: Path) -> dict:
    """Like ``make_variants``, for the ``dtype`` model and its ``half_alternatives`` (a schema
    older than MIN_VERSION at opset MIN_VERSION): {"shape": files, "types": files, "descr":
    {file: its types}, "valid": the shape and full variants that pass ``local_error``, "full": the shape
    variants with every optional input given (none when there is none), valid ones first}."""
    v = schema.since_version
    opset = max(v, MIN_VERSION[schema.domain])
    base = half_types(schema, dtype)
    cf_elem = elem_type(dtype)
    prefix = f"{dtype}__{key_of(schema)}"
    shape_files, bad, seen_bytes, descr = [], [], set(), {}
    for layout in SHAPE_LAYOUTS:
        try:
            m = build(schema, v, base, layout, cf_elem, opset)
        except Exception:  # noqa: BLE001 - that layout cannot be built
            continue
        data = m.SerializeToString()
        if data in seen_bytes:
            continue
        seen_bytes.add(data)
        name = f"{prefix}__{layout}.onnx"
        (folder / name).write_bytes(data)
        descr[name] = describe_types(base)
        (shape_files if local_error(m) is None else bad).append(name)
    valid = set(shape_files)
    shape_files += bad
    type_files = []
    for i, types in enumerate(half_alternatives(schema, dtype)):
        for layout in ("mixed", "none"):
            try:
                m = build(schema, v, types, layout, cf_elem, opset)
            except Exception:  # noqa: BLE001
                continue
            if local_error(m) is None:
                name = f"{prefix}__t{i}_{layout}.onnx"
                (folder / name).write_bytes(m.SerializeToString())
                type_files.append(name)
                descr[name] = describe_types(types)
                break
    full, full_bad = [], []
    if any(f.option == onnx.defs.OpSchema.FormalParameterOption.Optional for f in schema.inputs):
        for layout in SHAPE_LAYOUTS:
            try:
                m = build(schema, v, base, layout, cf_elem, opset, all_optional=True)
            except Exception:  # noqa: BLE001
                continue
            data = m.SerializeToString()
            if data in seen_bytes:
                continue
            seen_bytes.add(data)
            name = f"{prefix}__full_{layout}.onnx"
            (folder / name).write_bytes(data)
            descr[name] = describe_types(base) + ", every optional input"
            (full if local_error(m) is None else full_bad).append(name)
    return {"shape": shape_files, "types": type_files, "descr": descr, "valid": valid | set(full),
            "full": full + full_bad}


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for g in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from _all_nodes(g)


def how_it_runs(schema, original: Path, saved: Path) -> str:
    """How a session that loaded runs the node, from the final graph ORT saved.

    "cast": InsertCastTransformer put Casts around it (no kernel for the half type; ORT
    computes in float32 -- it does so with graph optimizations disabled too): a Cast named as
    it names them, or, when the node is still there, more Casts than the model had; "function": no
    Cast was added and the node is gone, expanded into its function body, whose nodes all have
    half kernels; "kernel": no Cast added and the node is still there (or no node is left at
    all, as for Constant, which becomes an initializer).
    """
    before = onnx.load(str(original), load_external_data=False)
    after = onnx.load(str(saved), load_external_data=False)
    nodes = list(_all_nodes(after.graph))
    norm = lambda d: "" if d in ("", "ai.onnx") else d  # noqa: E731
    casts = lambda ns: sum(n.op_type == "Cast" and norm(n.domain) == "" for n in ns)  # noqa: E731
    kept = not nodes or any(n.op_type == schema.name and norm(n.domain) == norm(schema.domain) for n in nodes)
    if any(n.op_type == "Cast" and INSERTED_CAST.match(n.name) for n in nodes):
        return "cast"
    if kept and casts(nodes) > casts(_all_nodes(before.graph)):  # (a function body may hold Casts of its own)
        return "cast"
    return "kernel" if kept else "function"


def _stable(error: str, folder: Path) -> str:
    """An error message without what changes from run to run (the models' folder, addresses)."""
    return re.sub(r"0x[0-9a-f]{6,}", "0x...", error.replace(f"{folder}{os.sep}", ""))


def probe_release_half(release: str, dtype: str, folder: Path, plan: dict, log, newest: dict) -> dict:
    """Classify, for one release and half type, each schema of ``plan`` the release knows.

    Per schema: its shape variants one per round until one loads or reports a missing kernel;
    a load with a kernel or a function body is the answer; a load through inserted Casts or a
    missing kernel means the model is valid, and all its type variants follow in one round
    (one of them running in the half type without Casts: "type_limited").
    """
    keys = [k for k, p in plan.items() if p["schema"].since_version <= newest[p["schema"].domain]]
    state = {k: {"i": 0, "stage": "shape", "errors": [], "missing": None, "cast": None, "base_failed": False,
                 "ok": None} for k in keys}
    saved = folder / f"saved-{release}-{dtype}"
    saved.mkdir(exist_ok=True)
    version, rounds = "", 0
    while True:
        batch: dict[str, str] = {}
        sent: dict[str, str] = {}
        for k in keys:
            st, p = state[k], plan[k]
            if st["ok"] is not None or st["stage"] == "done":
                continue
            if st["stage"] == "shape" and st["i"] >= len(p["shape"]):
                st["stage"] = "types"
            if st["stage"] == "shape":
                batch[p["shape"][st["i"]]] = k
                sent[k] = "shape"
            elif p["types"]:
                batch.update({f: k for f in p["types"]})
                sent[k] = "types"
            else:
                st["stage"] = "done"
        if not batch:
            break
        rounds += 1
        results, ver = run_loader(release, folder, sorted(batch), save=saved)
        version = version or ver
        for f in sorted(batch):
            k = batch[f]
            st, schema = state[k], plan[k]["schema"]
            if st["ok"] is not None:
                continue
            ok, err = results[f]
            if ok:
                kind = how_it_runs(schema, folder / f, saved / f) if (saved / f).is_file() else "unsaved"
                if kind in ("kernel", "function"):
                    st["ok"] = (f, kind)
                    continue
                if kind == "unsaved":
                    err = "loaded, but onnxruntime saved no final graph"
                else:
                    st["cast"] = st["cast"] or f
            miss = None if ok else missing_kernel(err)
            if miss is None and not ok:  # no half kernel, and InsertCastTransformer's float fallback failed
                m = FALLBACK_MISSING_RE.search(err)
                miss = (m.group(1), int(m.group(2))) if m else ("", 0) if INSERTED_CAST.search(err) else None
            if sent[k] == "shape":
                if ok and kind == "cast" or miss is not None:
                    st["base_failed"] = True
                    if miss is not None and st["missing"] is None:
                        st["missing"] = (miss, err)
                    st["stage"] = "types"
                else:
                    st["errors"].append((err, f))
                    st["i"] += 1
            elif miss is not None and st["missing"] is None:
                st["missing"] = (miss, err)
        for k, stage in sent.items():
            if stage == "types":
                state[k]["stage"] = "done"
        log(f"{release} {dtype}: round {rounds}: {len(batch)} models")
    # a function body depends on which optional inputs are there (Clip-13 without min and max is
    # Identity, with them Less and Where): a schema that ran as its function body is tried with
    # every optional input as well, its shape variants one per round until one loads or misses
    recheck = {k: 0 for k in keys if state[k]["ok"] is not None and state[k]["ok"][1] == "function" and plan[k]["full"]}
    while recheck:
        batch = {plan[k]["full"][i]: k for k, i in recheck.items()}
        results, _ = run_loader(release, folder, sorted(batch), save=saved)
        rounds += 1
        for f, k in batch.items():
            st, schema = state[k], plan[k]["schema"]
            ok, err = results[f]
            kind = (how_it_runs(schema, folder / f, saved / f) if (saved / f).is_file() else "unsaved") if ok else None
            if ok and kind in ("kernel", "function"):
                del recheck[k]
                continue
            missed = not ok and (missing_kernel(err) or FALLBACK_MISSING_RE.search(err) or INSERTED_CAST.search(err))
            if ok and kind == "cast" or missed or not ok and f in plan[k]["valid"]:
                st["ok"], st["full_failed"] = None, f
                if ok:
                    st["cast"] = f
                elif missed:
                    st["missing"] = (missing_kernel(err) or ("", 0), err)
                else:  # refused though onnx takes it ("load_error")
                    st["errors"].insert(0, (err, f))
                del recheck[k]
                continue
            recheck[k] += 1
            if recheck[k] >= len(plan[k]["full"]):  # none loaded: the minimal model's answer stands
                del recheck[k]
        log(f"{release} {dtype}: round {rounds}: {len(batch)} models with every optional input")
    parts = ("kernel", "function", "cast_fallback", "missing", "load_error", "probe_invalid", "type_limited")
    out = {"onnxruntime": version, **{part: {"": {}, ML: {}} for part in parts}, "checked": len(keys),
           "function_inputs": {"": {}, ML: {}}}
    for k in keys:
        st, p = state[k], plan[k]
        s, v = p["schema"], p["schema"].since_version
        d = s.domain
        if st["ok"] is not None:
            f, kind = st["ok"]
            out[kind][d].setdefault(s.name, []).append(v)
            if st["base_failed"]:
                out["type_limited"][d].setdefault(s.name, {})[str(v)] = (
                    f"not with {p['descr'][p['shape'][0]]}; with {p['descr'][f]}")
        elif st["cast"] is not None:
            out["cast_fallback"][d].setdefault(s.name, []).append(v)
        elif st["missing"] is not None:
            out["missing"][d].setdefault(s.name, []).append(v)
        else:  # a model onnx takes that the release refuses: it has no kernel (for the half type)
            valid = [e for e, f in st["errors"] if f in p["valid"]]
            part = "load_error" if valid else "probe_invalid"
            err = (valid or [e for e, _ in st["errors"]] or ["no model could be built"])[0]
            out[part][d].setdefault(s.name, {})[str(v)] = _stable(err, folder)[:200]
        if st.get("full_failed"):
            out["function_inputs"][d].setdefault(s.name, {})[str(v)] = (
                "runs as its function body with the required inputs only; with every optional input "
                + ("through inserted Casts" if st["cast"] else "not at all") + f" ({st['full_failed']})")
            if not st["cast"] and st["missing"] is None:
                out["function_inputs"][d][s.name][str(v)] += f": {_stable(st['errors'][0][0], folder)[:200]}"
    for part in (*parts, "function_inputs"):
        for d in out[part]:
            out[part][d] = dict(sorted(out[part][d].items()))
    return out


def _merge(*tables: dict) -> dict:
    """{domain: {op: sorted versions}} of the union of tables of that form (op -> list or dict)."""
    out: dict = {}
    for table in tables:
        for d, ops in table.items():
            for op, vs in ops.items():
                out.setdefault(d, {}).setdefault(op, set()).update(int(v) for v in vs)
    return {d: {op: sorted(vs) for op, vs in sorted(ops.items())} for d, ops in out.items()}


def shipped_half_data(doc: dict) -> dict:
    """The compact table rewriter/targets/half_kernels.py reads (its docstring describes it)."""
    releases = {}
    for r, per_dtype in doc["releases"].items():
        first = next(iter(per_dtype.values()))
        entry = {"onnxruntime": first["onnxruntime"], "opsets": NEWEST[r]}
        for dtype, res in per_dtype.items():  # every domain measured is there, with ops or not
            entry[dtype] = {d: {} for d in res["kernel"]} | _merge(res["kernel"], res["function"])
        entry["no_kernel"] = {dtype: {d: {} for d in res["kernel"]}
                              | _merge(res["cast_fallback"], res["missing"], res["load_error"])
                              for dtype, res in per_dtype.items()}
        releases[r] = entry
    return {"source": doc["source"], "releases": releases}


def compact_json(obj, indent: int = 0) -> str:
    """JSON with one line per op: lists, and objects of scalars, stay on one line."""
    leaf = lambda x: not isinstance(x, (dict, list))  # noqa: E731
    if isinstance(obj, list) or (isinstance(obj, dict) and all(map(leaf, obj.values()))):
        return json.dumps(obj)
    if not isinstance(obj, dict) or not obj:
        return json.dumps(obj)
    pad = " " * (indent + 1)
    items = [f"{pad}{json.dumps(k)}: {compact_json(v, indent + 1)}" for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def main_half(args, dtypes: list[str], log) -> int:
    releases = args.releases or [r for r in old_ort.releases() if r in NEWEST]
    current = None
    if args.current:
        import onnxruntime  # the project's own

        current = ".".join(onnxruntime.__version__.split(".")[:2])
        if current not in NEWEST:
            print(f"no NEWEST entry for the installed onnxruntime {onnxruntime.__version__}", file=sys.stderr)
            return 2
    unknown = [r for r in releases if r not in NEWEST]
    if unknown:
        print(f"no NEWEST entry for {unknown}", file=sys.stderr)
        return 2
    runs = [(r, r) for r in releases] + ([(CURRENT, current)] if current else [])  # (python, release)
    with tempfile.TemporaryDirectory(prefix="ort-half-probe-") as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        plans = {}
        for dtype in dtypes:
            plan = {}
            for s in half_schemas():
                if half_types(s, dtype) is None:
                    continue
                plan[key_of(s)] = {"schema": s, **make_half_variants(s, dtype, folder)}
            plans[dtype] = plan
            log(f"{dtype}: built models for {len(plan)} schemas into {folder}")
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {(py, dtype): pool.submit(probe_release_half, py, dtype, folder, plans[dtype], log, NEWEST[r])
                       for py, r in runs for dtype in dtypes}
            results = {key: f.result() for key, f in futures.items()}
    by_release: dict = {}
    notes = []
    for py, release in runs:
        per = {dtype: results[(py, dtype)] for dtype in dtypes}
        if py == CURRENT and release in by_release:
            # the project's onnxruntime and a venv of the same minor release: the data takes the
            # project's (the tests compare with it); a difference is noted
            venv = by_release[release]
            for dtype in dtypes:
                a, b = shipped_half_data({"source": "", "releases": {release: {dtype: venv[dtype]}}}), \
                    shipped_half_data({"source": "", "releases": {release: {dtype: per[dtype]}}})
                same = a["releases"][release][dtype] == b["releases"][release][dtype]
                notes.append(f"{release} {dtype}: the project's onnxruntime {per[dtype]['onnxruntime']} "
                             f"{'agrees with' if same else 'DIFFERS from'} the venv's {venv[dtype]['onnxruntime']}")
        by_release[release] = per
    by_release = dict(sorted(by_release.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))
    versions = ", ".join(next(iter(per.values()))["onnxruntime"] for per in by_release.values())
    import platform

    doc = {
        "source": f"measured by tools/ort_kernel_probe.py --dtypes {','.join(dtypes)}"
                  f"{' --current' if current else ''} on {_dt.date.today().isoformat()} with onnxruntime {versions} "
                  f"(onnx {onnx.__version__} schemas; CPUExecutionProvider of the {platform.system()} "
                  f"{platform.machine()} wheels, graph optimizations disabled)",
        "releases": by_release,
    }
    if notes:
        doc["notes"] = notes
    out = Path(args.out or HALF_OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    log(f"wrote {out}")
    data = Path(args.data_out or HALF_DATA)
    data.write_text(compact_json(shipped_half_data(doc)) + "\n")
    log(f"wrote {data}")
    for note in notes:
        print(note)
    for r, per in by_release.items():
        for dtype, res in per.items():
            n = {part: sum(len(x) for t in res[part].values() for x in t.values())
                 for part in ("kernel", "function", "cast_fallback", "missing", "load_error", "probe_invalid")}
            ops = len({(d, op) for part in ("kernel", "function") for d, t in res[part].items() for op in t})
            print(f"{r} ({res['onnxruntime']}) {dtype}: checked {res['checked']}, ops with a kernel {ops}, "
                  + ", ".join(f"{k} {v}" for k, v in n.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="MAJOR.MINOR (default: every working venv with a NEWEST entry)")
    parser.add_argument("--out", help=f"output JSON (default {OUT.relative_to(ROOT)}; "
                                      f"with --dtypes {HALF_OUT.relative_to(ROOT)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="releases probed at once")
    parser.add_argument("--keep", help="write the models into this directory (kept) instead of a temporary one")
    parser.add_argument("--dtypes", help="float16,bfloat16: which schemas have a CPU kernel for these types")
    parser.add_argument("--current", action="store_true",
                        help="with --dtypes: also the onnxruntime of this python (its data replaces a venv's)")
    parser.add_argument("--data-out", help=f"with --dtypes: the shipped table (default {HALF_DATA.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.dtypes:
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        if not dtypes or any(d not in HALF_TYPES for d in dtypes):
            parser.error(f"--dtypes takes {','.join(HALF_TYPES)}")
        t0 = time.time()
        return main_half(args, dtypes, lambda msg: print(f"[{time.time() - t0:7.1f}s] {msg}", file=sys.stderr,
                                                          flush=True))
    args.out = args.out or str(OUT)
    releases = args.releases or [r for r in old_ort.releases() if r in NEWEST]
    unknown = [r for r in releases if r not in NEWEST]
    if unknown:
        print(f"no NEWEST entry for {unknown}", file=sys.stderr)
        return 2
    t0 = time.time()
    log = lambda msg: print(f"[{time.time() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="ort-kernel-probe-") as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        plan = {}
        for s in schemas_to_probe():
            shape, types, descr = make_variants(s, folder)
            plan[key_of(s)] = {"schema": s, "shape": shape, "types": types, "descr": descr}
        log(f"built models for {len(plan)} schemas into {folder}")
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {r: pool.submit(probe_release, r, folder, plan, log) for r in releases}
            results = {r: f.result() for r, f in futures.items()}
    results = dict(sorted(results.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))
    versions = ", ".join(f"{r['onnxruntime']}" for r in results.values())
    doc = {
        "source": f"measured by tools/ort_kernel_probe.py on {_dt.date.today().isoformat()} with onnxruntime "
                  f"{versions} (onnx {onnx.__version__} schemas; CPU EP, graph optimizations disabled)",
        "releases": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    log(f"wrote {out}")
    for r, res in results.items():
        nm = sum(len(x) for d in res["missing"].values() for x in d.values())
        ni = sum(len(x) for d in res["probe_invalid"].values() for x in d.values())
        print(f"{r} ({res['onnxruntime']}): checked {res['checked']}, missing {nm}, probe_invalid {ni}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
