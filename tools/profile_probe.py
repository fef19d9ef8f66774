"""Measure a runtime through a few lines of the user's Python and write the profile that
``rewriter convert MODEL --target PROFILE.json`` reads.

    python tools/profile_probe.py --runner RUNNER.py --out PROFILE.json [--name NAME]
                                  [--python PYTHON] [--opsets 11 13 17 18 ...] [--ops OP ...]
                                  [--timeout S] [--once] [--rtol R] [--atol A] [--report FILE]
                                  [--keep DIR]

RUNNER.py defines ``run(model_path: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]``:
load the ONNX model at ``model_path`` into the runtime, run it on ``inputs`` (keyed by graph input
name) and return its outputs in the graph's output order; raise to refuse. It may set ``NAME``
("MNN 3.6.1") for the profile's name. It runs in a subprocess of ``--python`` (the toolchain's
own venv; default: this python) through tools/profile_probe_worker.py, which needs only numpy
there; a case that crashes the process or runs longer than --timeout is recorded as such and
the worker restarted. Examples: tools/runners/mnn.py, tools/runners/rknn.py.

What it runs (models built here with onnx, judged here; the toolchain sees only files):

1. **Limits**: an Add model at every default-domain opset from 1 to onnx's newest + 1, at IR
   versions 3 to onnx's newest + 1 (opset 7), and a Binarizer at each ``ai.onnx.ml`` opset: the
   newest default opset, IR version and ML opset it loads and runs right.
2. **Ops**, at each opset of ``--opsets`` (default: every one from 7 to the newest it loads),
   one-node models per (op, the schema version in force at that opset):

   * the ONNX backend node tests (``onnx.backend.test.case.node``, the cases behind
     onnx/backend/test/data/node) of that op, judged against their own expected outputs with
     their own tolerance (rtol 1e-3, atol 1e-7 unless the case says otherwise), as onnx's backend
     runner judges them; a test written for another schema version of the op is used at that
     opset when the same node is valid there (checker with strict shape inference) and both
     onnx.reference and ONNX Runtime still compute its expected outputs, or when, with its
     non-data inputs made constants, the project's converter writes it as one node of the
     op at that opset (attribute <-> input moves) that both still compute right;
   * where no test gives a model at that opset, one built from the op's schema in onnx.defs: its
     required inputs only, of the op's first allowed float type (float32 where allowed), shape
     [2, 3, 4] (else [3, 3], [1, 3, 4, 4]), values in [0.1, 0.9], no attribute; kept only when
     the checker, onnx.reference and ONNX Runtime agree on it (onnx.reference's outputs are the
     expected ones; rtol 1e-3, atol 1e-7). Ops with a required attribute or a non-float input
     get no such model.

   The random ops (Bernoulli, Multinomial, Random*) are judged by output shape and type only.
   Inputs or outputs of a type numpy lacks (bfloat16, float8, int4), sequences and optionals
   are not run.

Each run is "ok" (the outputs match), "dtype" (the values match in another element type: a
runtime that keeps int64 as int32), "wrong" (an output differs, in value, shape or number),
"refused" (run raised), "crash" or "timeout" (then the same model at its other opsets is not
run, and counts as crashed or timed out too). Per (domain, op, schema version), over every case
and opset: **wrong** when one case computed wrongly, **missing** when every case was refused
(crashed, timed out), **partial** when some were, else **runs**. The profile lists the wrong and
missing versions as ``missing`` ({domain: {op: [versions]}}; ``Target.lacks`` reads it), so that
``convert --target`` expands such a node into its function body or refuses it; an op version no
case reached is not listed (the report names them: ``unprobed``). ``opsets`` is the newest
default-domain opset it loads, capped at the newest asked (and ``min_opsets`` the oldest asked), plus
the newest ``ai.onnx.ml`` opset it loads; when it loads none, every ``ai.onnx.ml`` op is
``unsupported``. ``source`` names the command, the runner, the versions and the date.

The report (``--report``, default PROFILE.report.json beside the profile) holds the limits' runs
and, per op version, the status, the counts, the opsets run and the first message of each kind.
``--ops`` limits the op probe to those ops (a partial profile: every other op is assumed
present). ``--once`` runs each (op, version) at one opset only (the newest asked where it is in
force), for slow toolchains. ``--rtol`` / ``--atol`` raise every case's tolerance to at least
that, for a runtime that computes in float16 (an NPU); the profile's source says so.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import queue
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
WORKER = HERE / "profile_probe_worker.py"
ML = "ai.onnx.ml"
DOMAINS = ("", ML)
RTOL, ATOL = 1e-3, 1e-7  # onnx's backend runner's defaults
LOWEST_OPSET = 7
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
FLOAT_TYPES = ["tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)"]
_ELEM = {"tensor(float)": TensorProto.FLOAT, "tensor(float16)": TensorProto.FLOAT16,
         "tensor(double)": TensorProto.DOUBLE, "tensor(bfloat16)": TensorProto.BFLOAT16}
SYNTHETIC_SHAPES = ([2, 3, 4], [3, 3], [1, 3, 4, 4])
FAILED = ("refused", "crash", "timeout")


@dataclass
class Case:
    id: str
    op: str
    domain: str
    version: int | None
    opset: int | None
    origin: str  # node | node-restamped | node-converted | schema | limit
    model: onnx.ModelProto | None
    feeds: dict
    expected: list
    rtol: float = RTOL
    atol: float = ATOL
    not_probed: str = ""
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# schemas and models


def version_at(op: str, domain: str, opset: int) -> int | None:
    """The schema version of ``op`` in force at ``opset`` of ``domain`` (None: not defined there)."""
    try:
        return onnx.defs.get_schema(op, opset, domain).since_version
    except onnx.defs.SchemaError:
        return None


def _set_opset(model: onnx.ModelProto, domain: str, opset: int) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    imports = {o.domain or "": o.version for o in out.opset_import}
    imports["" if domain in ("", "ai.onnx") else domain] = opset
    imports.pop("ai.onnx", None)
    del out.opset_import[:]
    out.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(imports.items()))
    try:
        out.ir_version = helper.find_min_ir_version_for(list(out.opset_import), True)
        onnx.checker.check_model(out)
    except Exception:  # noqa: BLE001 - a feature of a newer IR version: keep the test's own
        out.ir_version = model.ir_version
    return out


def _array(value):
    """A data-set entry as a numpy array; None for a sequence, map or absent optional."""
    if isinstance(value, TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    return None


def _exotic(arr: np.ndarray) -> bool:
    """A type plain numpy lacks (ml_dtypes: bfloat16, float8, int4, ...)."""
    return arr.dtype.kind == "V" or arr.dtype.type.__module__.startswith("ml_dtypes")


@dataclass
class NodeTest:
    name: str
    model: onnx.ModelProto
    op: str
    domain: str
    version: int | None
    opset: int
    feeds: dict
    expected: list
    rtol: float
    atol: float
    not_probed: str = ""


def node_tests(ops: set | None = None) -> list[NodeTest]:
    """The backend node tests of the default and ai.onnx.ml domains (not the *_expanded ones)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import onnx.backend.test.case.node as cases_module

        one = next(iter(ops)) if ops and len(ops) == 1 else None
        if cases_module._NodeTestCases and cases_module._TargetOpType not in (None, one):
            raise RuntimeError(f"this process collected the node tests of {cases_module._TargetOpType} only")
        tests = list(cases_module.collect_testcases(one if not cases_module._NodeTestCases else None))
    out = []
    for t in tests:
        if "_expanded" in t.name or len(t.model.graph.node) != 1:
            continue
        node = t.model.graph.node[0]
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        if domain not in DOMAINS or (ops and node.op_type not in ops):
            continue
        opset = next(o.version for o in t.model.opset_import if (o.domain or "") in ((domain,) if domain else ("", "ai.onnx")))
        inputs, outputs = t.data_sets[0]
        init = {i.name for i in t.model.graph.initializer}
        names = [i.name for i in t.model.graph.input if i.name not in init]
        feeds, why = {}, ""
        for name, value in zip(names, inputs):
            arr = _array(value)
            if arr is None:
                why = f"input {name} is a {type(value).__name__} (sequence, map or absent optional)"
            elif _exotic(arr):
                why = f"input {name} is {arr.dtype.name}, a type numpy lacks"
            else:
                feeds[name] = arr
        expected = []
        for value in outputs:
            arr = _array(value)
            if arr is None:
                why = why or f"an output is a {type(value).__name__} (sequence or map)"
            elif _exotic(arr):
                why = why or f"an output is {arr.dtype.name}, a type numpy lacks"
            expected.append(arr)
        out.append(NodeTest(t.name, t.model, node.op_type, domain, version_at(node.op_type, domain, opset), opset,
                            feeds, expected, t.rtol, t.atol, why))
    return out


def compare(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> tuple[str, str]:
    """("ok"|"dtype"|"wrong", detail), as onnx's backend runner compares (np.testing.assert_allclose
    with the case's rtol/atol, NaN equal; strings equal); "dtype": the values match in another type."""
    got = np.asarray(got)
    if tuple(got.shape) != tuple(expected.shape):
        return "wrong", f"shape {list(got.shape)}, expected {list(expected.shape)}"
    if expected.dtype == object or expected.dtype.kind in "US":
        same = np.array_equal(got.astype(str), expected.astype(str))
        return ("ok", "") if same else ("wrong", "strings differ")
    note = "" if got.dtype == expected.dtype else f"dtype {got.dtype}, expected {expected.dtype}"
    try:
        if expected.dtype.kind in "biu" and got.dtype.kind in "biu":
            same = np.array_equal(got.astype(np.int64) if got.dtype != np.uint64 else got,
                                  expected.astype(np.int64) if expected.dtype != np.uint64 else expected)
        else:
            np.testing.assert_allclose(got.astype(np.float64) if got.dtype.kind != "c" else got,
                                       expected.astype(np.float64) if expected.dtype.kind != "c" else expected,
                                       rtol=rtol, atol=atol)
            same = True
    except AssertionError:
        same = False
    except (TypeError, ValueError) as e:
        return "wrong", f"cannot compare: {e}"[:200]
    if not same:
        with np.errstate(all="ignore"):
            try:
                d = np.abs(got.astype(np.float64) - expected.astype(np.float64))
                diff = f"max abs diff {np.nanmax(d):.3g}" if d.size else ""
            except (TypeError, ValueError):
                diff = ""
        return "wrong", "; ".join(x for x in ("values differ", diff, note) if x)
    return ("dtype", note) if note else ("ok", "")


def _oracles_agree(model: onnx.ModelProto, feeds: dict, expected: list | None, rtol: float, atol: float):
    """The model's outputs by onnx.reference when it passes the checker (full: strict shape
    inference) and ONNX Runtime computes the same (and both match ``expected`` when given);
    None otherwise."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onnx.checker.check_model(model, full_check=True)
            with np.errstate(all="ignore"):
                ref = ReferenceEvaluator(model).run(None, feeds)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        got = sess.run(None, feeds)
    except Exception:  # noqa: BLE001 - either oracle refuses: not a case
        return None
    ref = [np.asarray(r) for r in ref]
    if len(ref) != len(got) or (expected is not None and len(expected) != len(ref)):
        return None
    for i, (r, g) in enumerate(zip(ref, got)):
        if compare(r, np.asarray(g), rtol, atol)[0] != "ok":
            return None
        if expected is not None and expected[i] is not None and compare(expected[i], r, rtol, atol)[0] != "ok":
            return None
    return ref


def _fold_inputs(model: onnx.ModelProto, feeds: dict, which) -> tuple[onnx.ModelProto, dict] | None:
    """The model with the graph inputs ``which`` picks made initializers holding their feeds."""
    names = [i.name for i in model.graph.input if i.name in feeds]
    folded = [n for n in names[1:] if which(feeds[n])]
    if not folded:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for n in folded:
        out.graph.initializer.append(onnx.numpy_helper.from_array(feeds[n], n))
    kept = [i for i in out.graph.input if i.name not in folded]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    return out, {k: v for k, v in feeds.items() if k not in folded}


def _converted(test: NodeTest, opset: int):
    """The test written at ``opset`` by the project's converter, its non-data inputs (integers,
    then every input but the first) made constants: (model, feeds) when the result is one node
    of the op; else None."""
    try:
        from rewriter.convert import convert_model
    except ImportError:
        return None
    for which in (lambda a: a.dtype.kind in "iu", lambda a: True):
        folded = _fold_inputs(test.model, test.feeds, which)
        if folded is None:
            continue
        model, feeds = folded
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result, _ = convert_model(model, opset)
        except Exception:  # noqa: BLE001 - blocked or refused: no such form
            continue
        nodes = list(result.graph.node)
        if len(nodes) == 1 and nodes[0].op_type == test.op:
            return result, feeds
    return None


def _synthetic(op: str, opset: int, rng: np.random.Generator):
    """(model, feeds, expected) of a one-node model from the op's schema at ``opset``, or (None, why)."""
    schema = onnx.defs.get_schema(op, opset, "")
    required = [a.name for a in schema.attributes.values() if a.required]
    if required:
        return None, f"required attribute {required[0]}"
    constraints = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    chosen: dict = {}

    def pick(type_str):
        if type_str in chosen:
            return chosen[type_str]
        allowed = constraints.get(type_str, [type_str])
        t = next((f for f in FLOAT_TYPES if f in allowed), None)
        chosen[type_str] = t
        return t

    inputs = []  # (name, type)
    for formal in schema.inputs:
        if formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            break
        t = pick(formal.type_str)
        if t is None:
            return None, f"input {formal.name} takes no float type"
        count = max(1, formal.min_arity) if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else 1
        inputs += [(f"{formal.name}{i}" if count > 1 else formal.name, t) for i in range(count)]
    outputs = []
    for formal in schema.outputs:
        if formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            break
        count = max(1, formal.min_arity) if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else 1
        outputs += [f"out_{formal.name}{i}" if count > 1 else f"out_{formal.name}" for i in range(count)]
    if not outputs:
        return None, "no output"
    why = "no input shape gives a model both onnx.reference and ONNX Runtime compute alike"
    for shape in SYNTHETIC_SHAPES:
        feeds = {}
        for name, t in inputs:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(_ELEM[t])
            if _exotic(np.zeros(0, dtype)):
                return None, f"{t} inputs only (a type numpy lacks)"
            feeds[name] = rng.uniform(0.1, 0.9, size=shape).astype(dtype)
        node = helper.make_node(op, [n for n, _ in inputs], outputs, name="n")
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, _ELEM[t], shape) for n, t in inputs],
                                  [onnx.ValueInfoProto(name=o) for o in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), True)
        try:
            from onnx.reference import ReferenceEvaluator

            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                ref = [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]
        except Exception:  # noqa: BLE001 - not a model onnx.reference computes
            continue
        if any(r.dtype == object or _exotic(r) for r in ref):
            continue
        del model.graph.output[:]
        model.graph.output.extend(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype),
                                                                list(r.shape)) for o, r in zip(outputs, ref))
        agreed = _oracles_agree(model, feeds, None, RTOL, 1e-5)
        if agreed is not None:
            return (model, feeds, agreed), ""
    return None, why


def op_cases(opsets: list[int], ops: set | None, once: bool, log=print) -> tuple[list, dict]:
    """The cases of every (op, schema version) at each of ``opsets``; and {(domain, op, version):
    why no case reached it} for those none did."""
    tests = node_tests(ops)
    log(f"{len(tests)} backend node tests")
    cases: list[Case] = []
    covered: set = set()  # (op, opset) with a node-test case
    by_op: dict = {}
    for t in tests:
        by_op.setdefault((t.domain, t.op), []).append(t)
    for (domain, op), group in sorted(by_op.items()):
        if domain == ML:
            for t in group:  # at its own ML opset, the default one capped at the newest asked
                default = next((o.version for o in t.model.opset_import if o.domain in ("", "ai.onnx")), None)
                model = t.model if default is None else _set_opset(t.model, "", min(default, max(opsets)))
                cases.append(Case(f"{t.name}@ml{t.opset}", op, domain, t.version, t.opset, "node", model, t.feeds,
                                  t.expected, t.rtol, t.atol, t.not_probed))
            continue
        forms: dict = {}  # (test name, version) -> (model, feeds, origin) or None
        targets = [o for o in opsets if version_at(op, "", o) is not None]
        if once:
            newest: dict = {}
            for o in targets:
                newest[version_at(op, "", o)] = o
            targets = sorted(newest.values())
        for opset in targets:
            version = version_at(op, "", opset)
            for t in group:
                if t.not_probed:
                    if version == t.version:
                        cases.append(Case(f"{t.name}@{opset}", op, "", version, opset, "node", None, {}, [],
                                          not_probed=t.not_probed))
                        covered.add((op, opset))
                    continue
                key = (t.name, version)
                if key not in forms:
                    if version == t.version:
                        forms[key] = (t.model, t.feeds, "node")
                    else:
                        forms[key] = None
                        restamped = _set_opset(t.model, "", opset)
                        if _oracles_agree(restamped, t.feeds, t.expected, t.rtol, t.atol) is not None:
                            forms[key] = (t.model, t.feeds, "node-restamped")
                        else:
                            conv = _converted(t, opset)
                            if conv is not None and _oracles_agree(conv[0], conv[1], t.expected, t.rtol,
                                                                   t.atol) is not None:
                                forms[key] = (conv[0], conv[1], "node-converted")
                form = forms[key]
                if form is None:
                    continue
                model, feeds, origin = form
                cases.append(Case(f"{t.name}@{opset}", op, "", version, opset, origin, _set_opset(model, "", opset),
                                  feeds, t.expected, t.rtol, t.atol, extra={"group": f"{t.name}/{version}"}))
                covered.add((op, opset))
                covered.add((op, version, "version"))
    # the schema-built models where no node test reached an (op, opset)
    rng = np.random.default_rng(41)
    unprobed: dict = {}
    names = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""})
    for op in names:
        if ops and op not in ops:
            continue
        done_versions: set = set()
        for opset in opsets:
            version = version_at(op, "", opset)
            if version is None or (op, opset) in covered:
                continue
            if once and (version in done_versions or (op, version, "version") in covered):
                continue  # a node test ran this version at another opset
            built, why = _synthetic(op, opset, rng)
            if built is None:
                unprobed.setdefault(("", op, version), why)
                continue
            done_versions.add(version)
            model, feeds, expected = built
            cases.append(Case(f"schema/{op}-{version}@{opset}", op, "", version, opset, "schema", model, feeds,
                              expected, RTOL, ATOL, extra={"group": f"schema/{op}-{version}"}))
    return cases, unprobed


def limit_cases() -> list[Case]:
    """Add at each default opset, at each IR version (opset 7), Binarizer at each ML opset."""
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    newest_ml = max(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == ML)

    def model(opset, ir=None, ml=None):
        vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
        if ml is None:
            node, imports = helper.make_node("Add", ["X", "X"], ["Y"]), [helper.make_opsetid("", opset)]
        else:
            node = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=0.0)
            imports = [helper.make_opsetid("", opset), helper.make_opsetid(ML, ml)]
        m = helper.make_model(helper.make_graph([node], "g", [vi("X")], [vi("Y")]), opset_imports=imports)
        try:
            m.ir_version = ir or helper.find_min_ir_version_for(imports, True)
        except Exception:  # noqa: BLE001 - newer than onnx's table
            m.ir_version = onnx.IR_VERSION
        return m

    cases = [Case(f"limit/opset/{o}", "Add", "", None, o, "limit", model(o), {"X": x}, [x + x])
             for o in range(1, onnx.defs.onnx_opset_version() + 2)]
    cases += [Case(f"limit/ir/{ir}", "Add", "", None, 7, "limit", model(7, ir), {"X": x}, [x + x])
              for ir in range(3, onnx.IR_VERSION + 2)]
    cases += [Case(f"limit/ml/{ml}", "Binarizer", ML, None, ml, "limit", model(13, None, ml), {"X": x},
                   [(x > 0).astype(np.float32)]) for ml in range(1, newest_ml + 2)]
    return cases


# --------------------------------------------------------------------------------------------
# running


def _write_npz(path: Path, arrays: dict) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            arr = np.asanyarray(arr)
            if arr.dtype == object:
                arr = arr.astype(str)
            with zf.open(key + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)


def run_cases(python: str, runner: str, cases: list[Case], timeout: float, folder: Path, log=print) -> tuple[dict, dict]:
    """{case id: (verdict, detail)} for every case, and the worker's header."""
    lines = []
    for i, case in enumerate(cases):
        if case.not_probed or case.model is None:
            continue
        stem = folder / f"{i:06d}"
        Path(f"{stem}.onnx").write_bytes(case.model.SerializeToString())
        _write_npz(Path(f"{stem}.in.npz"), case.feeds)
        lines.append({"id": case.id, "model": f"{stem}.onnx", "inputs": f"{stem}.in.npz", "outputs": case.extra["outputs"],
                      "group": case.extra.get("group", case.id)})
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
            proc = subprocess.Popen([python, str(WORKER), str(Path(runner).resolve()), str(manifest)],
                                    stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(folder))
        q: queue.Queue = queue.Queue()

        def pump(stream=proc.stdout, q=q):
            for raw in stream:
                q.put(raw)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        current, wait = None, max(timeout, 120.0)  # the first line waits for the runtime's import
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
            obj = json.loads(raw)
            wait = timeout
            if "runner_error" in obj:
                proc.wait()
                raise SystemExit(f"the runner does not start in {python}: {obj['runner_error']}")
            if "start" in obj:
                current = obj["start"]
            elif "id" in obj:
                results[obj["id"]] = obj
                current = None
            elif "runner" in obj:
                header = obj
        if current is not None:  # the same model at the other opsets would crash or hang again: not run
            stage = results[current]["stage"]
            group = next(line["group"] for line in pending if line["id"] == current)
            for line in pending:
                if line["group"] == group and line["id"] not in results:
                    results[line["id"]] = {"ok": False, "stage": stage, "error": f"not run: {stage} on {current}"}
        before = len(pending)
        pending = [line for line in pending if line["id"] not in results]
        if pending and len(pending) == before:
            raise SystemExit(f"the worker answers nothing in {python}: see {err_path}")
        if pending:
            log(f"  worker restarted after {current or '?'} ({len(results)} done, {len(pending)} to go)")
    verdicts = {}
    for case in cases:
        if case.not_probed or case.model is None:
            verdicts[case.id] = ("not_probed", case.not_probed)
            continue
        verdicts[case.id] = judge(case, results.get(case.id))
    return verdicts, header


def judge(case: Case, result: dict | None) -> tuple[str, str]:
    if result is None:
        return "crash", "no result"
    if not result.get("ok"):
        stage = result.get("stage")
        msg = " ".join(str(result.get("error", "")).split())[:300]
        return (stage, msg) if stage in ("crash", "timeout") else ("refused", msg)
    path = case.extra.get("outputs")
    try:
        with np.load(path, allow_pickle=False) as data:
            got = [data[str(i)] for i in range(len(data.files))]
    except Exception as e:  # noqa: BLE001 - unreadable outputs
        return "wrong", f"outputs unreadable: {e}"[:300]
    if len(got) != len(case.expected):
        return "wrong", f"{len(got)} outputs, expected {len(case.expected)}"
    verdict, details = "ok", []
    for i, (exp, arr) in enumerate(zip(case.expected, got)):
        if exp is None:
            continue
        if case.op in RANDOM_OPS:
            v, d = ("ok", "") if tuple(arr.shape) == tuple(exp.shape) else ("wrong", f"shape {list(arr.shape)}")
        else:
            v, d = compare(exp, arr, case.rtol, case.atol)
        if v != "ok":
            details.append(f"output {i}: {d}")
            if v == "wrong" or verdict == "ok":
                verdict = v
    return verdict, "; ".join(details)[:300]


def run_all(python: str, runner: str, cases: list[Case], timeout: float, keep: str | None, log=print):
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="profile-probe-"))
    folder.mkdir(parents=True, exist_ok=True)
    for i, case in enumerate(cases):
        case.extra["outputs"] = str(folder / f"{i:06d}.out.npz")
    start = time.monotonic()
    try:
        verdicts, header = run_cases(python, runner, cases, timeout, folder, log)
    finally:  # also when the runner does not start
        if not keep:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    log(f"  {len(cases)} cases in {time.monotonic() - start:.0f}s")
    return verdicts, header


# --------------------------------------------------------------------------------------------
# the profile


def _limits(verdicts: dict, cases: list[Case]) -> dict:
    ok = lambda v: v[0] in ("ok", "dtype")  # noqa: E731
    table: dict = {"opset": {}, "ir": {}, "ml": {}}
    for c in cases:
        _, kind, n = c.id.split("/")
        v = verdicts[c.id]
        table[kind][int(n)] = "ok" if ok(v) else f"{v[0]}: {v[1][:200]}"
    best = lambda kind: max((n for n, v in table[kind].items() if v == "ok"), default=None)  # noqa: E731
    low = min((n for n, v in table["opset"].items() if v == "ok"), default=None)
    return {"opset": best("opset"), "lowest_opset": low, "ir": best("ir"), "ml": best("ml"), "runs": table}


def op_status(cases: list[Case], verdicts: dict) -> dict:
    """{(domain, op, version): {"status", "counts", "opsets", "examples"}} over the op cases."""
    groups: dict = {}
    for c in cases:
        groups.setdefault((c.domain, c.op, c.version), []).append(c)
    out = {}
    for key, group in groups.items():
        probed = [(c, verdicts[c.id]) for c in group if verdicts[c.id][0] != "not_probed"]
        counts: dict = {}
        examples: dict = {}
        for c, (v, d) in [(c, verdicts[c.id]) for c in group]:
            counts[v] = counts.get(v, 0) + 1
            examples.setdefault(v, f"{c.id}: {d}"[:300] if d else c.id)
        failed = [c for c, (v, _) in probed if v in FAILED]
        if not probed:
            status = "unprobed"
        elif any(v == "wrong" for _, (v, _) in probed):
            status = "wrong"
        elif len(failed) == len(probed):
            status = "missing"
        elif failed:
            status = "partial"
        else:
            status = "runs"
        out[key] = {"status": status, "counts": counts,
                    "opsets": sorted({c.opset for c, _ in probed if c.opset is not None}),
                    "origins": sorted({c.origin for c in group}), "examples": examples}
    return out


def make_profile(name: str, limits: dict, opsets: list[int], status: dict, source: str) -> dict:
    profile: dict = {"name": name, "opsets": {"": min(limits["opset"], max(opsets))}}
    if limits["ml"] is not None:
        profile["opsets"][ML] = min(limits["ml"], max(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                                                      if s.domain == ML))
    profile["min_opsets"] = {"": min(opsets)}
    if limits["ir"] is not None:
        profile["ir_version"] = min(limits["ir"], onnx.IR_VERSION)
    missing: dict = {"": {}}
    for (domain, op, version), row in sorted(status.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        if row["status"] in ("wrong", "missing") and version is not None:
            missing.setdefault(domain, {}).setdefault(op, []).append(version)
    profile["missing"] = missing
    if limits["ml"] is None:
        profile["unsupported"] = {ML: sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                                              if s.domain == ML})}
    profile["source"] = source
    return profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runner", required=True, help="RUNNER.py defining run(model_path, inputs) -> outputs")
    parser.add_argument("--out", required=True, help="the profile .json to write")
    parser.add_argument("--name", help="the profile's name (default: the runner's NAME, else its file name)")
    parser.add_argument("--python", default=sys.executable, help="the python that runs the runner (its venv)")
    parser.add_argument("--opsets", type=int, nargs="+",
                        help="default-domain opsets to probe the ops at (default: 7 to the newest it loads)")
    parser.add_argument("--ops", nargs="+", help="probe only these ops (a partial profile)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one model may take (default 60)")
    parser.add_argument("--once", action="store_true", help="each (op, version) at one opset only")
    parser.add_argument("--rtol", type=float, help="judge with at least this relative tolerance (a float16 NPU)")
    parser.add_argument("--atol", type=float, help="judge with at least this absolute tolerance")
    parser.add_argument("--report", help="the report (default: PROFILE.report.json beside --out)")
    parser.add_argument("--keep", help="keep the models and outputs in this folder")
    args = parser.parse_args(argv)
    if not os.path.exists(args.runner):
        parser.error(f"no runner {args.runner}")
    t0 = time.monotonic()
    limit = limit_cases()
    print(f"limits: {len(limit)} models")
    verdicts, header = run_all(args.python, args.runner, limit, args.timeout, args.keep and os.path.join(args.keep, "limits"))
    limits = _limits(verdicts, limit)
    if limits["opset"] is None:
        print(json.dumps(limits["runs"], indent=1))
        raise SystemExit("the runtime runs no Add model at any opset: is the runner right?")
    newest = min(limits["opset"], onnx.defs.onnx_opset_version())
    print(f"loads default opsets {limits['lowest_opset']}..{limits['opset']}, IR up to {limits['ir']}, "
          f"ai.onnx.ml opset {limits['ml']}")
    asked = sorted(set(args.opsets)) if args.opsets else list(range(max(LOWEST_OPSET, limits["lowest_opset"]), newest + 1))
    opsets = [o for o in asked if limits["runs"]["opset"].get(o) == "ok" and o <= onnx.defs.onnx_opset_version()]
    if not opsets:
        raise SystemExit(f"the runtime loads none of the opsets asked ({asked})")
    if opsets != asked:
        print(f"opsets it does not load, left out: {sorted(set(asked) - set(opsets))}")
    cases, unprobed = op_cases(opsets, set(args.ops) if args.ops else None, args.once)
    for c in cases:
        c.rtol, c.atol = max(c.rtol, args.rtol or 0.0), max(c.atol, args.atol or 0.0)
    print(f"{len(cases)} op cases built in {time.monotonic() - t0:.0f}s")
    more, header = run_all(args.python, args.runner, cases, args.timeout, args.keep and os.path.join(args.keep, "ops"))
    verdicts.update(more)
    status = op_status(cases, verdicts)
    for key, why in unprobed.items():
        status.setdefault(key, {"status": "unprobed", "counts": {}, "opsets": [], "origins": [], "examples": {}})
        status[key].setdefault("why_no_model", why)
    name = args.name or header.get("runner") or Path(args.runner).stem
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    command = "python tools/profile_probe.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    kinds: dict = {}
    for c in cases:
        kinds[verdicts[c.id][0]] = kinds.get(verdicts[c.id][0], 0) + 1
    tally: dict = {}
    for row in status.values():
        tally[row["status"]] = tally.get(row["status"], 0) + 1
    tolerance = "" if args.rtol is None and args.atol is None else \
        f", judged with rtol >= {args.rtol or 0:g}, atol >= {args.atol or 0:g}"
    report_path = args.report or str(Path(args.out).with_suffix("")) + ".report.json"
    source = (f"measured on {date} by `{command}` (runner {Path(args.runner).name}: {header.get('runner') or '?'}; "
              f"python {header.get('python')}, numpy {header.get('numpy')}; onnx {onnx.__version__}, onnxruntime "
              f"{_ort_version()}, {platform.machine()}): {len(cases)} one-node models at opsets "
              f"{_ranges(opsets)} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}){tolerance}; per op version "
              f"{', '.join(f'{k} {v}' for k, v in sorted(tally.items()))}; wrong and missing versions are "
              f"\"missing\"; details in {os.path.basename(report_path)}")
    profile = make_profile(name, limits, opsets, status, source)
    Path(args.out).write_text(json.dumps(profile, indent=1, sort_keys=False) + "\n")
    report = {
        "name": name, "command": command, "date": date, "runner": header, "onnx": onnx.__version__,
        "opsets_probed": opsets, "limits": {k: ({str(n): v for n, v in t.items()} if isinstance(t, dict) else t)
                                            for k, t in limits["runs"].items()},
        "cases": kinds, "op_versions": tally,
        "ops": {f"{d + ':' if d else ''}{op}-{v}": row for (d, op, v), row in
                sorted(status.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0))},
    }
    Path(report_path).write_text(json.dumps(report, indent=1) + "\n")
    print(f"per op version: {tally}")
    print(f"wrote {args.out} and {report_path} in {time.monotonic() - t0:.0f}s")
    return 0


def _ort_version() -> str:
    try:
        import onnxruntime

        return onnxruntime.__version__
    except ImportError:
        return "absent"


def _ranges(values: list[int]) -> str:
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ", ".join(out)


if __name__ == "__main__":
    sys.exit(main())
