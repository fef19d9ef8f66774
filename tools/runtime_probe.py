"""Measure what one release of a runtime (OpenVINO, tract, ...) runs right, refuses or computes wrongly.

    python tools/runtime_probe.py --runtime openvino==2026.4 [--jobs-timeout S] [--only PATTERN]
                                  [--no-const] [--keep DIR] [--raw FILE] [--data FILE]

The release runs in its own venv (tools/runtime_venvs.py), through its runner
(tools/runtime_run_<runtime>.py, one process for many models, restarted after a case that
crashes it or runs longer than --timeout).  Three sets of models:

* **node**: every ONNX backend node test case of the installed onnx
  (``onnx.backend.test.case.node.collect_testcases``: the models and data behind
  onnx/backend/test/data/node/*/model.onnx and test_data_set_0), with its first data set, judged
  against the case's own expected outputs as onnx's backend runner judges them (same shape; same
  dtype; ``np.testing.assert_allclose`` with the case's rtol/atol, NaN equal; strings equal;
  bfloat16 by value with rtol at least 2**-6 as onnx's runner does; float8 and 4-bit types bit
  for bit; the random ops, Bernoulli, Multinomial, RandomNormal/Uniform(Like), by shape and dtype
  only).
  ``*_expanded*`` cases (the op written out as its function body) are run and kept in the raw
  file as kind "expanded", but say nothing about the op itself.
* **form**: the forms the rewriter's engine writes, as one-node models built here: every Reduce
  op at opsets 11, 13, 17 and 18, axes as an attribute (where the schema has it), as a constant
  input (initializer) and as a graph input fed at run time, no axes, one axis, a negative axis,
  two axes, keepdims 0 and 1, ``noop_with_empty_axes`` with empty axes, float32 (all of those)
  and double / int32 / int64 (one axis, keepdims 1, where the schema allows the type; integers
  not for L2, LogSum, LogSumExp, Mean, whose integer rounding the spec leaves open); expected
  outputs computed by numpy in float64 (integers exactly); rtol 1e-3, atol 1e-5.  Also
  Squeeze / Unsqueeze (axes) and Split (split sizes; num_outputs at 18) at the same opsets, the
  attribute before 13 and a constant or fed input from 13 on, float32, against numpy.
* **const** (unless --no-const): each node case the release refused or computed wrongly, again with every graph
  input but the first made an initializer holding the case's own input (what folding constant
  inputs would give the release); recorded beside the case as "const_inputs".

Plus the newest default-domain opset (an Add model at opset 1 .. onnx's newest + 1, at the
lowest IR version each needs), IR version (opset 13, IR 7 .. onnx's newest + 1) and ai.onnx.ml
opset (a Binarizer at ml opset 1 .. 6) the release loads and runs.

Verdict per model: "ok" (runs and matches), "refused" (load or run raised: the message is
kept), "wrong" (runs; shape, count or values differ), "dtype" (values match, the output's
dtype differs: a runtime that returns int32 for int64), "crash" / "timeout", "not_probed" (the
runner cannot feed the input: a sequence input, a type the venv's numpy lacks).

Output: the raw verdicts, tools/runtime_data/<runtime>-<release>.json (--raw), and the release's
entry in the summary rewriter/targets/data/<runtime>.json (--data; other releases' entries are
kept): per release the versions, the probe's command and date, ``opsets``, ``ir_version``, the
counts, and per (domain, op) the schema versions that are

* ``missing``: every node/form case of that version was refused (or crashed);
* ``wrong``: at least one node/form case computed something else;
* ``partial``: some cases refused, some ran ({op: {version: "refused N of M: first message"}});
* ``dtype_differs``: right values in another dtype;
* ``needs_constant``: refused or wrong as given, every such case runs right with constant inputs;
  or every case refused as given and most (over half) run with constant inputs, none computing
  wrongly, the others refused either way (then also in ``partial``, "with constant inputs too").

``--crosscheck PUBLISHED`` compares a release's raw file with the project's published list and
adds the differences to its summary entry ("published"); tools/runtime_data/README.md explains
them.  ``--only PATTERN`` (a regex on case ids) makes a partial run that writes nothing unless --raw
and --data are given.  Takes about 10 minutes per release on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import onnx.numpy_helper
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import runtime_probe_forms as gen
import runtime_venvs

RAW_DIR = HERE / "runtime_data"
DATA_DIR = ROOT / "rewriter" / "targets" / "data"
ML = "ai.onnx.ml"
REDUCE_OPS = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
              "ReduceProd", "ReduceSum", "ReduceSumSquare"]
FORM_OPSETS = [11, 13, 17, 18]
FORM_RTOL, FORM_ATOL = 1e-3, 1e-5
JUDGED = ("node", "form")  # kinds whose verdicts make an op version's
# ops whose outputs are random draws: their cases are judged by output shape and dtype only
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}


def _random_dropout(case) -> bool:
    """A Dropout test in training mode with a ratio above 0: its mask is a random draw (the test's
    outputs are one draw of numpy's), so it is judged as the random ops are."""
    return case.op == "Dropout" and "training" in case.id and "zero_ratio" not in case.id


@dataclass
class Case:
    id: str
    kind: str  # node | expanded | form | const | opset
    model: onnx.ModelProto
    feeds: dict  # input name -> array (ml_dtypes arrays allowed)
    expected: list  # arrays, in graph output order (empty: load only)
    rtol: float = FORM_RTOL
    atol: float = FORM_ATOL
    op: str = ""
    domain: str = ""
    version: int | None = None
    opset: int | None = None
    not_probed: str = ""  # why the runner cannot take it
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# building the models


def _np(value):
    """A data-set entry as an array (TensorProto -> its numpy/ml_dtypes array); None for a
    sequence, map or absent optional."""
    if isinstance(value, TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return None


def _op_info(model: onnx.ModelProto, node: onnx.NodeProto) -> tuple[str, int | None, int | None]:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    opset = next((o.version for o in model.opset_import if (o.domain or "") in (domain, "ai.onnx" if not domain else domain)),
                 None)
    try:
        version = onnx.defs.get_schema(node.op_type, opset, domain).since_version
    except Exception:  # noqa: BLE001 - an op onnx does not know at that opset
        version = None
    return domain, version, opset


def node_cases(pattern: re.Pattern | None) -> list[Case]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        tests = list(collect_testcases(None))
    by_name = {t.name: t for t in tests}
    cases = []
    for t in tests:
        if pattern and not pattern.search(t.name):
            continue
        expanded = "_expanded" in t.name
        source = t
        if expanded:
            base = t.name[: t.name.index("_expanded")]
            source = by_name.get(base, t)
        node = source.model.graph.node[0]
        domain, version, opset = _op_info(source.model, node)
        inputs, outputs = t.data_sets[0]
        init = {i.name for i in t.model.graph.initializer}
        names = [i.name for i in t.model.graph.input if i.name not in init]
        feeds, why = {}, ""
        for name, value in zip(names, inputs):
            arr = _np(value)
            if arr is None:
                why = f"input {name} is a {type(value).__name__} (sequence, map or absent optional)"
            else:
                feeds[name] = arr
        expected = []
        for value in outputs:
            arr = _np(value)
            if arr is None:
                why = why or f"an expected output is a {type(value).__name__} (sequence or map)"
            expected.append(arr)
        cases.append(Case(t.name, "expanded" if expanded else "node", t.model, feeds, expected, t.rtol, t.atol,
                          node.op_type, domain, version, opset, why))
    return cases


_FORM_TYPES = [("float", TensorProto.FLOAT, np.float32), ("double", TensorProto.DOUBLE, np.float64),
               ("int32", TensorProto.INT32, np.int32), ("int64", TensorProto.INT64, np.int64)]


def _reduce_model(op, opset, elem, axes, keepdims, form, noop=None):
    """One Reduce node on X float[2,3,4]; axes per ``form``: "attr" | "const" | "input" | "none"."""
    attrs = {"keepdims": keepdims}
    inputs = ["X"]
    inits, graph_inputs = [], [helper.make_tensor_value_info("X", elem, [2, 3, 4])]
    if form == "attr":
        attrs["axes"] = axes
    elif form in ("const", "input"):
        inputs.append("axes")
        if form == "const":
            inits.append(onnx.numpy_helper.from_array(np.array(axes, dtype=np.int64), "axes"))
        else:
            graph_inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]))
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    node = helper.make_node(op, inputs, ["Y"], name="n", **attrs)
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("Y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), True)
    return model


_NP_REDUCE = {
    "ReduceL1": lambda x, ax: np.sum(np.abs(x), axis=ax, keepdims=True),
    "ReduceL2": lambda x, ax: np.sqrt(np.sum(x * x, axis=ax, keepdims=True)),
    "ReduceLogSum": lambda x, ax: np.log(np.sum(x, axis=ax, keepdims=True)),
    "ReduceLogSumExp": lambda x, ax: np.log(np.sum(np.exp(x), axis=ax, keepdims=True)),
    "ReduceMax": lambda x, ax: np.max(x, axis=ax, keepdims=True),
    "ReduceMean": lambda x, ax: np.mean(x, axis=ax, keepdims=True),
    "ReduceMin": lambda x, ax: np.min(x, axis=ax, keepdims=True),
    "ReduceProd": lambda x, ax: np.prod(x, axis=ax, keepdims=True),
    "ReduceSum": lambda x, ax: np.sum(x, axis=ax, keepdims=True),
    "ReduceSumSquare": lambda x, ax: np.sum(x * x, axis=ax, keepdims=True),
}
# integer results that need a rounding rule the spec leaves open: only float data for these
_FLOAT_ONLY = {"ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean"}


def reduce_reference(op: str, x: np.ndarray, axes, keepdims: int, noop) -> np.ndarray:
    """The Reduce op's result by numpy, in float64 and back to x's dtype (integers exactly).
    Empty axes with noop_with_empty_axes=1 reduce over no axis: the op's elementwise steps still
    apply (ReduceSumSquare squares, ReduceL1 takes abs, ReduceLogSum the log; the schema says so)."""
    if not axes:
        axes = [] if noop else list(range(x.ndim))
    ax = tuple(sorted(a % x.ndim for a in axes))
    y = _NP_REDUCE[op](x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64), ax)
    if not keepdims:
        y = np.squeeze(y, axis=ax)
    return np.asarray(y).astype(x.dtype)


def form_cases(pattern: re.Pattern | None) -> list[Case]:
    rng = np.random.default_rng(41)
    cases = []
    for op in REDUCE_OPS:
        for opset in FORM_OPSETS:
            schema = onnx.defs.get_schema(op, opset, "")
            version = schema.since_version
            has_input = any(p.name == "axes" for p in schema.inputs)
            allowed = set(schema.type_constraints[0].allowed_type_strs)
            for tname, elem, npt in _FORM_TYPES:
                if f"tensor({tname})" not in allowed or (tname != "float" and tname != "double"
                                                         and op in _FLOAT_ONLY):
                    continue
                if np.dtype(npt).kind == "f":
                    x = rng.uniform(0.5, 2.0, size=(2, 3, 4)).astype(npt)
                else:
                    x = rng.integers(1, 3, size=(2, 3, 4)).astype(npt)
                full = tname == "float"
                variants = []
                for axes in ([None, [1], [-1], [0, 2]] if full else [[1]]):
                    for keepdims in ((1, 0) if full else (1,)):
                        if axes is None:
                            variants.append(("none", axes, keepdims, None))
                        elif has_input:
                            variants += [("const", axes, keepdims, None), ("input", axes, keepdims, None)]
                        else:
                            variants.append(("attr", axes, keepdims, None))
                if has_input and full:
                    variants += [("const", [], 1, 1), ("const", [], 1, 0)]
                for form, axes, keepdims, noop in variants:
                    cid = (f"form/{op}-{version}/opset{opset}/{tname}/axes={form}"
                           f"{'' if axes is None else axes}/keepdims={keepdims}"
                           f"{'' if noop is None else f'/noop={noop}'}").replace(" ", "")
                    if pattern and not pattern.search(cid):
                        continue
                    model = _reduce_model(op, opset, elem, axes, keepdims, form, noop)
                    feeds = {"X": x}
                    if form == "input":
                        feeds["axes"] = np.array(axes, dtype=np.int64)
                    expected = [reduce_reference(op, x, axes, keepdims, noop)]
                    form_name = {"attr": "axes attribute", "const": "axes constant input",
                                 "input": "axes graph input", "none": "no axes"}[form]
                    cases.append(Case(cid, "form", model, feeds, expected, FORM_RTOL, FORM_ATOL, op, "", version,
                                      opset, extra={"form": form_name, "dtype": tname}))
    return cases


def _move_model(op, opset, x_shape, form, values, attr_name, extra_attrs, n_outputs=1):
    """One node whose second input moved from an attribute (``attr_name``) at older opsets:
    ``form`` "attr" (the attribute), "const" (an initializer), "input" (a graph input fed at
    run time) or "none" (neither)."""
    attrs = dict(extra_attrs)
    inputs, inits = ["X"], []
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))]
    if form == "attr":
        attrs[attr_name] = values
    elif form in ("const", "input"):
        inputs.append(attr_name)
        if form == "const":
            inits.append(onnx.numpy_helper.from_array(np.array(values, dtype=np.int64), attr_name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(attr_name, TensorProto.INT64, [len(values)]))
    outs = [f"Y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, inputs, outs, name="n", **attrs)
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), True)
    return model


def move_form_cases(pattern: re.Pattern | None) -> list[Case]:
    """Squeeze, Unsqueeze (axes) and Split (split) at opsets 11, 13, 17, 18: the attribute before
    13, a constant or a fed input from 13 on (and Split's num_outputs at 18); float32 data."""
    rng = np.random.default_rng(13)
    specs = []  # (op, x shape, form values, numpy reference, extra attributes, outputs)
    x_sq = rng.standard_normal((2, 1, 3, 1)).astype(np.float32)
    for axes in ([1], [-1], [1, 3], None):
        ref = np.squeeze(x_sq, axis=tuple(axes) if axes else None)
        specs.append(("Squeeze", x_sq, axes, [ref], {}, 1))
    x_un = rng.standard_normal((2, 3)).astype(np.float32)
    for axes in ([0], [-1], [1, 3]):
        ref = x_un
        for a in sorted(a % (x_un.ndim + len(axes)) for a in axes):
            ref = np.expand_dims(ref, a)
        specs.append(("Unsqueeze", x_un, axes, [ref], {}, 1))
    x_sp = rng.standard_normal((6, 4)).astype(np.float32)
    specs.append(("Split", x_sp, [2, 4], [x_sp[:2], x_sp[2:]], {"axis": 0}, 2))
    specs.append(("Split", x_sp, None, [x_sp[:3], x_sp[3:]], {"axis": 0}, 2))
    cases = []
    for op, x, values, refs, extra, n_out in specs:
        attr_name = "split" if op == "Split" else "axes"
        for opset in FORM_OPSETS:
            schema = onnx.defs.get_schema(op, opset, "")
            has_input = any(p.name == attr_name for p in schema.inputs)
            attrs = dict(extra)
            if values is None:
                forms = ["none"]
                if op == "Split" and opset >= 18:
                    attrs["num_outputs"] = 2
            else:
                forms = ["const", "input"] if has_input else ["attr"]
            for form in forms:
                cid = (f"form/{op}-{schema.since_version}/opset{opset}/float/{attr_name}={form}"
                       f"{'' if values is None else values}").replace(" ", "")
                if pattern and not pattern.search(cid):
                    continue
                model = _move_model(op, opset, x.shape, form, values, attr_name, attrs, n_out)
                feeds = {"X": x}
                if form == "input":
                    feeds[attr_name] = np.array(values, dtype=np.int64)
                form_name = {"attr": f"{attr_name} attribute", "const": f"{attr_name} constant input",
                             "input": f"{attr_name} graph input", "none": f"no {attr_name}"}[form]
                cases.append(Case(cid, "form", model, feeds, [np.asarray(r) for r in refs], FORM_RTOL, FORM_ATOL,
                                  op, "", schema.since_version, opset, extra={"form": form_name, "dtype": "float"}))
    return cases


def const_variant(case: Case) -> Case | None:
    """The case with every graph input but the first made an initializer (None: nothing to fold)."""
    names = [i.name for i in case.model.graph.input if i.name in case.feeds]
    if len(names) < 2 or case.not_probed:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    keep = names[0]
    for name in names[1:]:
        try:
            model.graph.initializer.append(onnx.numpy_helper.from_array(case.feeds[name], name))
        except Exception:  # noqa: BLE001 - a value from_array cannot write
            return None
    kept = [i for i in model.graph.input if i.name == keep or i.name not in case.feeds]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return Case(case.id + "#const", "const", model, {keep: case.feeds[keep]}, case.expected, case.rtol, case.atol,
                case.op, case.domain, case.version, case.opset)


def opset_cases() -> list[Case]:
    newest, ir_newest = onnx.defs.onnx_opset_version(), onnx.IR_VERSION
    cases = []
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)

    def add_model(opset: int, ir: int | None, domain_ml: int | None = None):
        def vi(n):
            return helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])
        if domain_ml is None:
            node = helper.make_node("Add", ["X", "X"], ["Y"])
            imports = [helper.make_opsetid("", opset)]
        else:
            node = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=0.0)
            imports = [helper.make_opsetid("", 13), helper.make_opsetid(ML, domain_ml)]
        model = helper.make_model(helper.make_graph([node], "g", [vi("X")], [vi("Y")]), opset_imports=imports)
        if ir is None:
            try:
                ir = helper.find_min_ir_version_for(list(imports), True)
            except Exception:  # noqa: BLE001 - an opset newer than onnx's table
                ir = ir_newest
        model.ir_version = ir
        return model

    for opset in range(1, newest + 2):
        cases.append(Case(f"opset/ai.onnx/{opset}", "opset", add_model(opset, None), {"X": x}, [x + x],
                          opset=opset))
    for ir in range(7, ir_newest + 2):
        cases.append(Case(f"opset/ir/{ir}", "opset", add_model(13, ir), {"X": x}, [x + x], extra={"ir": ir}))
    for ml in range(1, 7):
        cases.append(Case(f"opset/ai.onnx.ml/{ml}", "opset", add_model(13, None, ml), {"X": x},
                          [(x > 0).astype(np.float32)], opset=ml))
    return cases


# --------------------------------------------------------------------------------------------
# running


def _write_npz(path: Path, arrays: dict) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False)


def _ml_dtype(arr: np.ndarray) -> bool:
    """A type numpy itself lacks (ml_dtypes: bfloat16, float8*, int4, uint4, float4_e2m1fn, ...)."""
    return arr.dtype.kind == "V" or arr.dtype.type.__module__.startswith("ml_dtypes")


_NIBBLE_TYPES = ("int4", "uint4", "float4_e2m1fn")  # 4-bit types: one element a byte, the code in its low nibble


def write_case(case: Case, folder: Path, index: int) -> dict | None:
    """Write the case's files; the manifest line for the runner (None: not probed)."""
    if case.not_probed:
        return None
    stem = folder / f"{index:05d}"
    model_path, in_path, out_path = (Path(f"{stem}{s}") for s in (".onnx", ".in.npz", ".out.npz"))
    model_path.write_bytes(case.model.SerializeToString())
    arrays = {}
    for name, arr in case.feeds.items():
        if _ml_dtype(arr):  # raw bits, the type named after "@" (the runner decides what it can feed)
            arrays[f"{name}@{arr.dtype.name}"] = np.ascontiguousarray(arr).view(np.uint8 if arr.dtype.itemsize == 1 else np.uint16)
        elif arr.dtype == object:
            arrays[name] = arr.astype(str)
        else:
            arrays[name] = arr
    _write_npz(in_path, arrays)
    want = [o.name for o in case.model.graph.output]
    return {"id": case.id, "model": str(model_path), "inputs": str(in_path), "outputs": str(out_path), "want": want}


def run_batch(python: Path, runner: Path, lines: list[dict], folder: Path, timeout: float,
              log=print) -> tuple[dict, dict]:
    """{id: result line} for every manifest line, restarting the runner after a crash or a hang;
    and the runner's header line."""
    results: dict = {}
    header: dict = {}
    pending = list(lines)
    rounds = 0
    while pending:
        rounds += 1
        manifest = folder / f"manifest-{rounds}.jsonl"
        manifest.write_text("".join(json.dumps(line) + "\n" for line in pending))
        err_path = folder / f"stderr-{rounds}.txt"
        with open(err_path, "w") as err:
            proc = subprocess.Popen(["nice", str(python), str(runner), "--batch", str(manifest)],
                                    stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(folder))
        q: queue.Queue = queue.Queue()

        def pump(stream=proc.stdout, q=q):
            for raw in stream:
                q.put(raw)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        current = None
        wait = max(timeout, 120.0)  # the first line waits for the runtime's import
        while True:
            try:
                raw = q.get(timeout=wait)
            except queue.Empty:
                proc.kill()
                proc.wait()
                if current is not None:
                    results[current] = {"ok": False, "stage": "timeout", "error": f"no answer in {timeout:.0f}s"}
                break
            if raw is None:
                code = proc.wait()
                if current is not None:
                    tail = err_path.read_text(errors="replace").strip()[-300:]
                    results[current] = {"ok": False, "stage": "crash", "error": f"exit {code}: {tail}"}
                break
            try:
                obj = json.loads(raw)
            except ValueError:
                continue  # a runtime printing to stdout
            wait = timeout
            if "start" in obj:
                current = obj["start"]
            elif "id" in obj:
                results[obj["id"]] = obj
                current = None
            elif "config" in obj:
                header = obj
        before = len(pending)
        pending = [line for line in pending if line["id"] not in results]
        if pending and len(pending) == before:  # nothing answered at all: the runner does not start
            for line in pending:
                results[line["id"]] = {"ok": False, "stage": "crash", "error": "runner did not start"}
            pending = []
        if pending:
            log(f"  runner restarted after {current or '?'} ({len(results)} done, {len(pending)} to go)")
    return results, header


def _load_npz(path: str) -> dict:
    with np.load(path, allow_pickle=True) as data:
        return {k: data[k] for k in data.files}


def _compare(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> tuple[str, str]:
    """("ok"|"dtype"|"wrong", detail), as onnx's backend runner judges (dtype apart)."""
    if tuple(got.shape) != tuple(expected.shape):
        return "wrong", f"shape {list(got.shape)}, expected {list(expected.shape)}"
    if expected.dtype == object or expected.dtype.kind in "US":
        same = np.array_equal(np.asarray(got).astype(str), np.asarray(expected).astype(str))
        return ("ok", "") if same else ("wrong", "strings differ")
    if _ml_dtype(expected):
        if expected.dtype.name in _NIBBLE_TYPES and got.dtype == np.uint8:  # the runner's 4-bit codes
            same = np.array_equal(np.ascontiguousarray(got) & 15, np.ascontiguousarray(expected).view(np.uint8) & 15)
            return ("ok", "") if same else ("wrong", f"{expected.dtype.name} codes differ")
        if got.dtype.itemsize == expected.dtype.itemsize and got.dtype.kind in "uiV":
            if expected.dtype.name == "bfloat16":  # as onnx's runner: values, rtol at least two ULPs
                got = np.ascontiguousarray(got).view(expected.dtype).astype(np.float32)
                try:
                    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=max(rtol, 2 ** -6), atol=atol)
                    return "ok", ""
                except AssertionError:
                    return "wrong", "bfloat16 values differ"
            same = np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(expected).view(np.uint8))
            return ("ok", "") if same else ("wrong", f"{expected.dtype.name} bits differ")
        exp, dtype_note = expected.astype(np.float32), f"dtype {got.dtype}, expected {expected.dtype.name}"
    else:
        exp, dtype_note = expected, "" if got.dtype == expected.dtype else f"dtype {got.dtype}, expected {expected.dtype}"
    try:
        if exp.dtype.kind in "biu" and got.dtype.kind in "biu":
            ok = np.array_equal(got.astype(np.int64) if got.dtype != np.uint64 else got,
                                exp.astype(np.int64) if exp.dtype != np.uint64 else exp)
        else:
            np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol)
            ok = True
    except AssertionError:
        ok = False
    except (TypeError, ValueError) as e:
        return "wrong", f"cannot compare: {e}"[:200]
    # all-NaN slices etc. warn in nanmax; the message is enough
    if not ok:
        diff = ""
        try:
            with np.errstate(all="ignore"):
                d = np.abs(got.astype(np.float64) - exp.astype(np.float64))
                diff = f"max abs diff {np.nanmax(d):.3g}" if d.size else ""
        except (TypeError, ValueError):
            pass
        return "wrong", "; ".join(x for x in ("values differ", diff, dtype_note) if x)
    return ("dtype", dtype_note) if dtype_note else ("ok", "")


def judge(case: Case, result: dict | None) -> tuple[str, str]:
    if case.not_probed:
        return "not_probed", case.not_probed
    if result is None:
        return "crash", "no result"
    if not result.get("ok"):
        stage = result.get("stage")
        msg = " ".join(str(result.get("error", "")).split()).split(" Stack backtrace:")[0][:300]
        if stage in ("crash", "timeout"):
            return stage, msg
        if stage == "feed":
            return "not_probed", msg
        return "refused", f"{stage}: {msg}"
    out_path = result.get("_outputs")
    try:
        got = _load_npz(out_path) if out_path and os.path.exists(out_path) else {}
    except ValueError as e:  # a dtype this numpy cannot read back
        return "not_probed", f"outputs unreadable here: {e}"[:300]
    order = result.get("outputs") or []
    names = [o.name for o in case.model.graph.output]
    if len(order) != len(names):
        return "wrong", f"{len(order)} outputs, expected {len(names)}"
    verdict, details = "ok", []
    for i, (name, exp) in enumerate(zip(names, case.expected)):
        if exp is None:
            continue
        arr = got.get(name)
        if arr is None:
            arr = got.get(order[i])
        arr = np.asarray(arr)
        if (case.op in RANDOM_OPS or _random_dropout(case)) and case.kind in ("node", "expanded", "const"):
            same = tuple(arr.shape) == tuple(exp.shape) and arr.dtype == exp.dtype
            v, d = ("ok", "") if same else ("wrong", (f"shape {list(arr.shape)} {arr.dtype}, expected "
                                                      f"{list(exp.shape)} {exp.dtype}"))
        else:
            v, d = _compare(exp, arr, case.rtol, case.atol)
        if v != "ok":
            details.append(f"{name}: {d}")
            if v == "wrong" or verdict == "ok":
                verdict = v
    return verdict, "; ".join(details)[:300]


def probe(runtime: str, release: str, cases: list[Case], timeout: float, keep: str | None, log=print) -> tuple:
    python = runtime_venvs.venv_python(runtime, release)
    if python is None:
        raise SystemExit(f"no working venv for {runtime} {release}: python tools/runtime_venvs.py {runtime}=={release}")
    runner = runtime_venvs.runner(runtime)
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=f"probe-{runtime}-"))
    folder.mkdir(parents=True, exist_ok=True)
    lines, line_of = [], {}
    for i, case in enumerate(cases):
        line = write_case(case, folder, i)
        if line:
            lines.append(line)
            line_of[case.id] = line
    log(f"{runtime} {release}: {len(lines)} models ({len(cases) - len(lines)} not probed) in {folder}")
    start = time.monotonic()
    results, header = run_batch(python, runner, lines, folder, timeout, log)
    log(f"  ran in {time.monotonic() - start:.0f}s")
    verdicts = {}
    for case in cases:
        result = results.get(case.id)
        if result is not None and case.id in line_of:
            result = {**result, "_outputs": line_of[case.id]["outputs"]}
        verdicts[case.id] = judge(case, result)
    if not keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return verdicts, header


# --------------------------------------------------------------------------------------------
# summarizing


def _highest_contiguous(table: dict, start: int) -> int | None:
    best = None
    n = start
    while str(n) in table:
        if table[str(n)] != "ok":
            break
        best = n
        n += 1
    return best


# runtime_probe_symbolic.py, runtime_probe_quant.py, runtime_computed_shapes.py; rewrite_forms: measured by hand
# (each says its command)
OTHER_PROBES = ("needs_static_dims", "quantized_forms", "rewrite_forms", "computed_shapes")


def summarize(raw: dict) -> dict:
    """The release's entry in rewriter/targets/data/<runtime>.json, from the raw file."""
    newest = raw["onnx_newest"]
    opset_rows = raw["opset_probe"]
    default = opset_rows["ai.onnx"]
    high = max((int(k) for k, v in default.items() if v == "ok"), default=None)
    opset = min(high, newest["opset"]) if high is not None else None
    ir_rows = opset_rows["ir"]
    ir_high = max((int(k) for k, v in ir_rows.items() if v == "ok"), default=None)
    ml_rows = opset_rows["ai.onnx.ml"]
    ml_high = max((int(k) for k, v in ml_rows.items() if v == "ok"), default=None)
    opsets = {"": opset}
    if ml_high is not None:
        opsets[ML] = min(ml_high, newest["ml_opset"])
    notes = []
    if high is not None and high > newest["opset"]:
        notes.append(f"loads opset {high}, newer than onnx {raw['versions']['onnx']} knows: the opset number "
                     f"is not checked; {opset} is the newest measured")
    if ir_high is not None and ir_high > newest["ir_version"]:
        notes.append(f"loads IR version {ir_high}, newer than onnx knows: the IR version is not checked")
    if ml_high is None:
        notes.append("no ai.onnx.ml op loads (Binarizer at ml opsets 1-6 refused)")
    groups: dict = {}
    for cid, row in raw["cases"].items():
        if row["kind"] not in JUDGED or row.get("version") is None or row.get("named"):
            continue
        groups.setdefault((row["domain"], row["op"], row["version"]), []).append((cid, row))
    missing, wrong, partial, dtype, needs_const, by_type = {}, {}, {}, {}, {}, {}

    def put(table, domain, op, version, value=None):
        slot = table.setdefault(domain, {})
        if value is None:
            slot.setdefault(op, []).append(version)
        else:
            slot.setdefault(op, {})[str(version)] = value

    for (domain, op, version), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        verdicts = [r["verdict"] for _, r in rows]
        probed = [v for v in verdicts if v != "not_probed"]
        if not probed:
            continue
        refused = [r for _, r in rows if r["verdict"] in ("refused", "crash", "timeout")]
        wrongs = [r for _, r in rows if r["verdict"] == "wrong"]
        refused_ok = bool(refused) and all(r.get("const_inputs") == "ok" for r in refused)
        # every case refused as fed, most running with constant inputs and none computing wrongly
        # then (LiteRT's Slice-13: 7 of 8, negative steps refused either way): the version runs
        # with constant inputs, save the forms refused either way, which stay listed as partial
        const_partly = len(refused) == len(probed) and not refused_ok and \
            2 * sum(r.get("const_inputs") == "ok" for r in refused) > len(probed) and \
            all(r.get("const_inputs") in ("ok", "refused", "crash", "timeout") for r in refused)
        wrong_ok = bool(wrongs) and all(r.get("const_inputs") == "ok" for r in wrongs) and (refused_ok or not refused)
        split = gen.type_split(rows)
        if split:
            put(by_type, domain, op, version, split)
        if any(v == "wrong" for v in probed) and split is None and not wrong_ok:
            n = sum(v == "wrong" for v in probed)
            put(wrong, domain, op, version)
            first = next(cid for cid, r in rows if r["verdict"] == "wrong")
            wrong.setdefault("_detail", {}).setdefault(domain, {}).setdefault(op, {})[str(version)] = \
                f"wrong in {n} of {len(probed)} cases, e.g. {first}"
        if len(refused) == len(probed):  # (as fed: needs_constant takes it out of what the target lacks)
            put(missing, domain, op, version)
        if const_partly:
            still = [r for r in refused if r.get("const_inputs") != "ok"]
            put(partial, domain, op, version, f"refused {len(still)} of {len(probed)} with constant inputs too: "
                                              f"{(still[0].get('const_detail') or still[0]['detail'])[:160]}")
        elif refused and len(refused) < len(probed):
            put(partial, domain, op, version, f"refused {len(refused)} of {len(probed)}: {refused[0]['detail'][:160]}")
        if any(v == "dtype" for v in probed):
            put(dtype, domain, op, version)
        if refused_ok or wrong_ok or const_partly:  # refused or wrong as given, right with constant inputs (Expand in TVM)
            put(needs_const, domain, op, version)
    detail = wrong.pop("_detail", {})
    counts: dict = {}
    for kind in ("node", "expanded", "form", "opset"):
        rows = [r for r in raw["cases"].values() if r["kind"] == kind]
        if rows:
            counts[kind] = {"cases": len(rows), **{v: sum(r["verdict"] == v for r in rows)
                                                  for v in ("ok", "refused", "wrong", "dtype", "crash", "timeout",
                                                            "not_probed")}}
    const_rows = [r for r in raw["cases"].values() if r["kind"] == "node" and "const_inputs" in r]
    if const_rows:
        counts["node_refused_const_inputs"] = {"tried": len(const_rows),
                                               "ok": sum(r["const_inputs"] == "ok" for r in const_rows)}
    entry = {
        raw["runtime"]: raw["versions"].get("full") or raw["release_full"],
        "opsets": opsets,
        "ir_version": ir_high if ir_high is None else min(ir_high, newest["ir_version"]),
        "missing": missing,
        "wrong": wrong,
        "wrong_detail": detail,
        "partial": partial,
        "dtype_differs": dtype,
        "needs_constant": needs_const,
        "types_refused": types_refused(raw),
        "type_verdicts": by_type,
        "form_verdicts": gen.named_verdicts(raw),
        "unmeasured": gen.unmeasured(raw),
        "counts": counts,
        "config": raw.get("config", {}),
        "probe": {"command": raw["command"], "date": raw["date"], "versions": raw["versions"],
                  "raw": f"tools/runtime_data/{raw['runtime']}-{raw['release']}.json"},
    }
    if raw.get("reruns"):
        entry["probe"]["reruns"] = raw["reruns"]
    if notes:
        entry["notes"] = notes
    return entry


# element type -> the node test cases on tensors of it (by their names: onnx names them so)
TYPE_CASES = {"string": re.compile(r"string|STRING|strnormalizer|regex_full_match")}


def types_refused(raw: dict) -> dict:
    """Element type -> what shows the release refuses it: every node test on it refused (with
    its inputs constant too)."""
    out = {}
    for kind, pattern in TYPE_CASES.items():
        rows = [(cid, r) for cid, r in raw["cases"].items() if r["kind"] == "node" and pattern.search(cid)]
        bad = [(cid, r) for cid, r in rows if r["verdict"] in ("refused", "crash", "timeout")
               and r.get("const_inputs") != "ok"]
        if rows and len(bad) == len(rows):
            cid, r = min(bad, key=lambda b: (b[1]["domain"] != "", b[0]))  # an ONNX op's case first
            said = " ".join(r["detail"].split())[-90:]
            out[kind] = f"{len(rows)} of {len(rows)} node tests refused, e.g. {cid}: ...{said}"
    return out


# --------------------------------------------------------------------------------------------
# cross-check with the runtime's published list

_REASONS = [  # (regex on the first refusal message, short reason)
    ((r"OpConversion|Unimplemented\(|not supported by|No conversion rule|is not supported|unsupported operator"
      r"|Not supported|doesn't support|is not implemented|unimplemented"), "no translator or kernel for this form"),
    (r"[Uu]nsupported type|DatumType|element type|[Tt]ype .* not supported|dtype", "an element type it lacks"),
    (r"dynamic rank|dynamic shape|symbolic|as a constant|must be constant|const", "needs a constant or static input"),
]


def _reason(message: str) -> str:
    for pattern, reason in _REASONS:
        if re.search(pattern, message):
            return reason
    return "other: " + message[:120]


def _op_status(raw: dict) -> dict:
    """{(op, version): (status, first message)} over node/form cases of the default domain."""
    groups: dict = {}
    for cid, row in raw["cases"].items():
        if row["kind"] in JUDGED and row["domain"] == "" and row.get("version") and row["verdict"] != "not_probed":
            groups.setdefault((row["op"], row["version"]), []).append((cid, row))
    out = {}
    for key, rows in groups.items():
        verdicts = [r["verdict"] for _, r in rows]
        refused = [r for _, r in rows if r["verdict"] in ("refused", "crash", "timeout")]
        if "wrong" in verdicts:
            status = "wrong"
        elif len(refused) == len(rows):
            status = "missing"
        elif refused:
            status = "partial"
        else:
            status = "runs"
        out[key] = (status, refused[0]["detail"] if refused else "")
    return out


def crosscheck_openvino(raw: dict, published_path: Path) -> dict:
    lines = [ln.split() for ln in published_path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    table = {op: ([] if vs == "-" else [int(v) for v in vs.split(",")]) for op, vs in lines}
    source = next(ln for ln in published_path.read_text().splitlines() if "at " in ln and "openvino" in ln)
    status = _op_status(raw)
    agree, diffs = 0, {"published_but_refused": {}, "published_but_wrong": {}, "unlisted_but_runs": {},
                       "published_but_partly_refused": {}}
    for (op, version), (st, msg) in sorted(status.items()):
        listed = bool(table.get(op)) and min(table[op]) <= version
        key = f"{op}-{version}"
        if listed and st == "missing":
            diffs["published_but_refused"][key] = _reason(msg)
        elif listed and st == "wrong":
            diffs["published_but_wrong"][key] = "computes wrongly (see \"wrong_detail\")"
        elif listed and st == "partial":
            diffs["published_but_partly_refused"][key] = _reason(msg)
        elif not listed and st in ("runs", "partial"):
            diffs["unlisted_but_runs"][key] = ("not in the list" if op not in table else
                                               f"listed from {min(table[op])}" if table[op] else "listed with no version")
        else:
            agree += 1
    return {"source": "openvinotoolkit/openvino " + source.split("(openvinotoolkit/openvino at ")[-1].rstrip(")") +
            " src/frontends/onnx/docs/supported_ops.md (tools/runtime_data/openvino-published.txt)",
            "op_versions_compared": len(status), "agree": agree,
            **{k: v for k, v in diffs.items()}, "counts": {k: len(v) for k, v in diffs.items()}}


def crosscheck_tract(raw: dict, node_txt: Path, source: str) -> dict:
    """tract's test-rt/suite-onnx/node.txt: the node test cases its CI passes (regexes, each with
    options; "input:X" runs the case with every other input made a constant)."""
    entries = []
    for line in node_txt.read_text().splitlines():
        if len(line.strip()) <= 1 or line.strip().startswith("#"):
            continue
        parts = line.split()
        entries.append((re.compile(f"^{parts[0]}$"), parts[1:]))
    agree = 0
    diffs = {"listed_but_refused": {}, "listed_but_wrong": {}, "listed_runs_with_constant_inputs": {},
             "unlisted_but_runs": []}
    for cid, row in sorted(raw["cases"].items()):
        if row["kind"] not in ("node", "expanded") or row["verdict"] == "not_probed":
            continue
        opts = next((o for rx, o in entries if rx.match(cid)), None)
        ok = row["verdict"] == "ok"
        if opts is None:
            if ok:
                diffs["unlisted_but_runs"].append(cid)
            else:
                agree += 1
            continue
        if ok:
            agree += 1
        elif row.get("const_inputs") == "ok" and any(o.startswith("input:") for o in opts):
            diffs["listed_runs_with_constant_inputs"][cid] = "listed with " + " ".join(opts)
        elif row["verdict"] == "wrong":
            diffs["listed_but_wrong"][cid] = row["detail"][:160]
        else:
            diffs["listed_but_refused"][cid] = (" ".join(opts) + ": " if opts else "") + row["detail"][:160]
    return {"source": source, "cases_compared": agree + sum(len(v) for v in diffs.values()), "agree": agree, **diffs,
            "counts": {k: len(v) for k, v in diffs.items()}}


def crosscheck(runtime: str, release: str, published: str, source: str | None, data: str | None) -> int:
    raw = json.loads((RAW_DIR / f"{runtime}-{release}.json").read_text())
    if runtime == "openvino":
        result = crosscheck_openvino(raw, Path(published))
    elif runtime == "tract":
        result = crosscheck_tract(raw, Path(published), source or published)
    else:
        raise SystemExit(f"no published list known for {runtime}")
    data_path = Path(data) if data else DATA_DIR / f"{runtime}.json"
    table = json.loads(data_path.read_text())
    table["releases"][release]["published"] = result
    data_path.write_text(json.dumps(table, indent=1) + "\n")
    print(json.dumps(result["counts"]), "agree:", result["agree"])
    return 0


def merged(new: dict, raw_path: Path, types_of: dict, why: str) -> dict:
    """The raw file at ``raw_path`` with the cases of ``new`` (a run of some cases) in it, every
    case given its element types (``types_of``: id -> types) and the run named in "reruns"."""
    raw = json.loads(raw_path.read_text())
    raw["cases"].update(new["cases"])
    for cid, row in raw["cases"].items():
        row.setdefault("types", types_of.get(cid, []))
    for kind, rows in new["opset_probe"].items():
        raw["opset_probe"][kind].update(rows)
    raw.setdefault("reruns", []).append({"command": new["command"], "date": new["date"], "cases": len(new["cases"]),
                                         "why": why})
    return raw


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", required=True, help="RUNTIME==RELEASE, e.g. openvino==2026.4")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one model may take (default 60)")
    parser.add_argument("--only", help="regex on case ids: a partial run")
    parser.add_argument("--no-const", action="store_true", help="skip the constant-input variants")
    parser.add_argument("--keep", help="keep the models and outputs in this folder")
    parser.add_argument("--raw", help="raw output file (default tools/runtime_data/<runtime>-<release>.json)")
    parser.add_argument("--data", help="summary file (default rewriter/targets/data/<runtime>.json)")
    parser.add_argument("--crosscheck", metavar="PUBLISHED",
                        help="compare the raw file already written with the runtime's published list (OpenVINO: "
                             "tools/runtime_data/openvino-published.txt; tract: a copy of test-rt/suite-onnx/node.txt) "
                             "and add it to the summary as the release's \"published\"")
    parser.add_argument("--source", help="with --crosscheck: where the list comes from (repository, path, commit)")
    parser.add_argument("--merge", metavar="WHY",
                        help="with --only: run the cases it selects, put their verdicts into the raw file already "
                             "written (replacing those of the same id; the file's \"reruns\" names this command and "
                             "WHY) and summarize the whole file again")
    args = parser.parse_args(argv)
    runtime, release = runtime_venvs.parse(args.runtime)
    if args.crosscheck:
        return crosscheck(runtime, release, args.crosscheck, args.source, args.data)
    pattern = re.compile(args.only) if args.only else None
    if args.merge and not pattern:
        raise SystemExit("--merge runs what --only selects")
    t0 = time.monotonic()
    built = node_cases(None) + form_cases(None) + move_form_cases(None)
    reached = {(c.op, c.version) for c in built if c.kind in JUDGED and c.domain == ""}
    built += gen.where_nan_cases(Case, None) + gen.double_inside_cases(Case, None) + gen.single_input_cases(Case, None) + \
        gen.negative_steps_cases(Case, None) + gen.string_labels_cases(Case, None) + gen.control_flow_cases(Case, None) + gen.recurrent_cases(Case, None) + gen.generated_cases(Case, reached, pattern)
    types_of = {c.id: gen.case_types(c.model) for c in built}
    cases = [c for c in built if not pattern or pattern.search(c.id)]
    if not pattern or pattern.search("opset/"):
        cases += [c for c in opset_cases() if not pattern or pattern.search(c.id)]
    print(f"{len(cases)} cases built in {time.monotonic() - t0:.0f}s")
    verdicts, header = probe(runtime, release, cases, args.timeout, args.keep)
    const_of = {}
    if not args.no_const:
        refused = [c for c in cases if (c.kind == "node" or c.id.startswith(("gen/", "form/")))
                   and verdicts[c.id][0] in ("refused", "crash", "timeout", "wrong")]
        variants = [v for v in (const_variant(c) for c in refused) if v is not None]
        print(f"{len(variants)} refused or wrong cases again with constant inputs")
        if variants:
            more, _ = probe(runtime, release, variants, args.timeout, args.keep and os.path.join(args.keep, "const"))
            const_of = {v.id[: -len("#const")]: more[v.id] for v in variants}
    marker = json.loads((runtime_venvs.venv_path(runtime, release) / runtime_venvs.MARKER).read_text())
    versions = {k: v for k, v in marker.items() if k not in ("runtime", "release", "pip", "made", "runner")}
    versions["onnx"] = onnx.__version__
    versions["full"] = header.get("runtime") or marker.get("runner")
    raw_cases = {}
    opset_probe = {"ai.onnx": {}, "ir": {}, "ai.onnx.ml": {}}
    for case in cases:
        verdict, detail = verdicts[case.id]
        if case.kind == "opset":
            kind, n = case.id.split("/")[1:]
            opset_probe[kind][n] = verdict if verdict != "refused" else f"refused: {detail[:200]}"
            continue
        row = {"kind": case.kind, "op": case.op, "domain": case.domain, "version": case.version, "opset": case.opset,
               "verdict": verdict, "detail": detail, "types": types_of.get(case.id, []), **case.extra}
        if case.id in const_of:
            row["const_inputs"], row["const_detail"] = const_of[case.id]
            if not row["const_detail"]:
                del row["const_detail"]
        raw_cases[case.id] = row
    command = "python tools/runtime_probe.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    raw = {
        "runtime": runtime, "release": release, "release_full": versions["full"],
        "command": command, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions, "config": header.get("config", {}),
        "onnx_newest": {"opset": onnx.defs.onnx_opset_version(), "ir_version": onnx.IR_VERSION,
                        "ml_opset": max(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                                        if s.domain == ML)},
        "opset_probe": opset_probe,
        "cases": raw_cases,
    }
    if args.merge:
        raw = merged(raw, Path(args.raw) if args.raw else RAW_DIR / f"{runtime}-{release}.json", types_of, args.merge)
    entry = summarize(raw)
    print(json.dumps({k: entry[k] for k in ("opsets", "ir_version", "counts")}, indent=1))
    if pattern and not (args.raw and args.data) and not args.merge:
        print("partial run (--only): nothing written")
        return 0
    raw_path = Path(args.raw) if args.raw else RAW_DIR / f"{runtime}-{release}.json"
    raw_path.write_text(json.dumps(raw, indent=0, sort_keys=False) + "\n")
    data_path = Path(args.data) if args.data else DATA_DIR / f"{runtime}.json"
    table = json.loads(data_path.read_text()) if data_path.exists() else {}
    table.setdefault("source", f"measured in each release by tools/runtime_probe.py (see each release's \"probe\"); "
                               f"raw verdicts per case in tools/runtime_data/{runtime}-RELEASE.json; "
                               "tools/runtime_data/README.md explains the differences with the published op lists")
    before = table.get("releases", {}).get(release, {})
    if args.merge and "published" in before:
        entry["published"] = before["published"]  # (its own command redoes it)
    for key in OTHER_PROBES:  # what the other probes measured, each rewritten by its own command only
        if key in before:
            entry[key] = before[key]
    table.setdefault("releases", {})[release] = entry
    table["releases"] = dict(sorted(table["releases"].items(), key=lambda kv: [int(p) for p in kv[0].split(".")]))
    data_path.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {raw_path} and {data_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
