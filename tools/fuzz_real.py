#!/usr/bin/env python3
"""A time-boxed fuzzer over real models: mutate one, run one command in-process, judge the outcome.

    python tools/fuzz_real.py /work/corpus/fp16 /work/corpus/ml --seconds 300 --seed 0 \\
        [--findings DIR] [--json OUT] [--max-mb 20]

Corpus: folders of ``NAME.onnx`` with ``NAME.npz`` samples (the model's inputs by name); a model
without a sample is fuzzed without the numerics check. Models above ``--max-mb`` are skipped and
smaller ones are picked more often (weight 1/sqrt(size) within a folder; each folder gets a share of
the runs growing as the square root of its model count), so that runs stay fast.

Each run, seeded by ``(seed, run number)`` so that one run can be replayed with ``--replay N``:
  1. picks a source model (loaded once, cached; each run mutates a copy in memory);
  2. applies one mutation: plausible ones (another default-domain opset, value_info dropped or
     reordered, values or nodes renamed, an attribute flipped to another value of its type, a node
     duplicated with some readers moved to the copy, an Identity inserted) or invalid ones (bad
     dims, a dangling input, an unknown op, nodes out of order, a dropped initializer);
  3. runs ONE command through ``rewriter.cli.main([...])``: convert --opset K (K in 7..latest),
     convert --target onnxruntime==1.17 | tensorrt==10.16, convert --dtype float16 | bfloat16,
     fold, optimize or check;
  4. judges it: exit 0, 1 or 2 only; no traceback; on failure exactly one ``error:`` line and no
     file left behind; on exit 0 the output passes ``onnx.checker.check_model(full_check=True)``
     (when the mutated input does), loads in ONNX Runtime (when the input does) and computes what
     the input computes on the sample (relative L2 <= 1e-2 for --dtype, else 1e-4 or an absolute
     difference <= 1e-5; non-float outputs equal; types may differ, values are compared as
     float64). Numerics are skipped when the input does not run, or has random ops.
The input's own status (checker, ORT, outputs) is computed only when a verdict needs it: the
source's reference outputs are computed once per source and reused for the mutations that keep
what the model computes; the others run the mutated input.

A finding (traceback, exit status not 0/1/2, bad error lines, file left behind, invalid output,
output ORT refuses, numeric mismatch) is printed with its reproducer and the mutated model is
saved under the findings directory with a .json describing it. Exit status: 0 with no finding,
1 with findings, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

LATEST = onnx.defs.onnx_opset_version()
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
              "Bernoulli", "Dropout"}
COMMANDS = [
    ("convert-opset", None),
    ("convert-target", ["--target", "onnxruntime==1.17"]),
    ("convert-target", ["--target", "tensorrt==10.16"]),
    ("convert-dtype", ["--dtype", "float16"]),
    ("convert-dtype", ["--dtype", "bfloat16"]),
    ("fold", []),
    ("optimize", []),
    ("check", []),
]


# ------------------------------------------------------------------------------------------ corpus

class Source:
    """One corpus model: its bytes-parsed ModelProto (loaded once), sample and reference outputs."""

    def __init__(self, path: str):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.size = os.path.getsize(path)
        sample = os.path.splitext(path)[0] + ".npz"
        self.sample_path = sample if os.path.exists(sample) else None
        self._model = None
        self._sample = None
        self._reference = None  # (ok, outputs | error text)

    @property
    def model(self) -> onnx.ModelProto:
        if self._model is None:
            self._model = onnx.load(self.path)
        return self._model

    @property
    def sample(self) -> dict | None:
        if self._sample is None and self.sample_path:
            with np.load(self.sample_path, allow_pickle=False) as d:
                self._sample = {k: d[k] for k in d.files}
        return self._sample

    def reference(self):
        if self._reference is None:
            self._reference = run_ort(self.model.SerializeToString(), self.sample)
        return self._reference


def find_sources(dirs: list[str], max_bytes: int) -> tuple[list[Source], list[str]]:
    sources, skipped = [], []
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(".onnx"):
                    s = Source(os.path.join(root, f))
                    (sources if s.size <= max_bytes else skipped).append(s if s.size <= max_bytes else s.path)
    return sources, skipped


def pick_weights(sources: list[Source]) -> list[float]:
    """Each corpus directory gets a share of the runs growing as the square root of its model count
    (a folder of 80 tiny scikit-learn models does not crowd out 40 networks), and within it a model
    is picked with weight 1/sqrt(size): small models more often, so that runs stay fast."""
    by_dir = defaultdict(list)
    for i, s in enumerate(sources):
        by_dir[os.path.dirname(s.path)].append(i)
    weights = [0.0] * len(sources)
    for members in by_dir.values():
        inv = {i: 1 / math.sqrt(max(sources[i].size, 1)) for i in members}
        total = sum(inv.values())
        for i in members:
            weights[i] = math.sqrt(len(members)) * inv[i] / total
    return weights


# ------------------------------------------------------------------------------------------ ORT

def _session(data: bytes | str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def run_ort(data: bytes | str, sample: dict | None):
    """(loads, outputs or None, error text): outputs in graph-output order, None without a sample."""
    try:
        sess = _session(data)
    except Exception as e:  # noqa: BLE001 - any refusal
        return False, None, f"load: {one_line(e)}"
    if sample is None:
        return True, None, "no sample"
    names = [i.name for i in sess.get_inputs()]
    if any(n not in sample for n in names):
        return True, None, f"sample lacks inputs {[n for n in names if n not in sample]}"
    feed = {n: sample[n] for n in names}
    try:
        return True, sess.run(None, feed), ""
    except Exception as e:  # noqa: BLE001
        return True, None, f"run: {one_line(e)}"


def one_line(e) -> str:
    text = " ".join(str(e).split())
    return text[:300]


def compare(ref, got, dtype: bool) -> str | None:
    """None when ``got`` computes ``ref``, else the first difference."""
    if len(ref) != len(got):
        return f"{len(got)} outputs, the input has {len(ref)}"
    for i, (a, b) in enumerate(zip(ref, got)):
        why = _compare_one(a, b, dtype)
        if why:
            return f"output {i}: {why}"
    return None


def _compare_one(a, b, dtype: bool) -> str | None:
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return "sequence differs in kind or length"
        for x, y in zip(a, b):
            why = _compare_one(x, y, dtype)
            if why:
                return why
        return None
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
            return "map keys differ"
        return next((w for k in a if (w := _compare_one(a[k], b[k], dtype))), None)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"shape {b.shape} instead of {a.shape}"
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        if a.dtype.kind in "OUS" or b.dtype.kind in "OUS":
            return None if a.tolist() == b.tolist() else "string values differ"
        diff = int(np.sum(a.astype(np.float64) != b.astype(np.float64)))
        return f"{diff} of {a.size} non-float values differ" if diff else None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)):
        return "NaN in other places"
    inf = np.isinf(a64) | np.isinf(b64)
    if not np.array_equal(a64[inf], b64[inf]):
        return "infinities differ"
    keep = ~(np.isnan(a64) | inf)
    a64, b64 = a64[keep], b64[keep]
    if a64.size == 0:
        return None
    err = float(np.linalg.norm(b64 - a64))
    norm = float(np.linalg.norm(a64))
    rel = err / norm if norm else math.inf
    if dtype:
        rms = err / math.sqrt(a64.size)
        return None if rel <= 1e-2 or rms <= 1e-5 else f"relative L2 {rel:.3g} > 1e-2 (rms {rms:.3g})"
    maxabs = float(np.max(np.abs(b64 - a64)))
    return None if rel <= 1e-4 or maxabs <= 1e-5 else f"relative L2 {rel:.3g} > 1e-4 (max abs {maxabs:.3g})"


# ------------------------------------------------------------------------------------------ mutations

def _graphs(model: onnx.ModelProto) -> list[onnx.GraphProto]:
    found, todo = [], [model.graph]
    while todo:
        g = todo.pop()
        found.append(g)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    todo.append(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    todo.extend(a.graphs)
    return found


def _all_nodes(model):
    return [(g, n) for g in _graphs(model) for n in g.node]


def _rename_everywhere(model, renames: dict[str, str]) -> None:
    """Rename values in every graph (one pass over the model)."""
    for g in _graphs(model):
        for n in g.node:
            for field in (n.input, n.output):
                for i, x in enumerate(field):
                    if x in renames:
                        field[i] = renames[x]
        for vi in [*g.input, *g.output, *g.value_info]:
            if vi.name in renames:
                vi.name = renames[vi.name]
        for t in g.initializer:
            if t.name in renames:
                t.name = renames[t.name]


def _default_opset(model):
    return next((o for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


# each returns a description, or None when it does not apply; PRESERVING ones keep what the model computes
def m_opset(model, rng):
    o = _default_opset(model)
    if o is None:
        return None
    choices = [v for v in range(7, LATEST + 1) if v != o.version]
    new = rng.choice(choices)
    old, o.version = o.version, new
    return f"opset {old}->{new}"


def m_drop_value_info(model, rng):
    g = model.graph
    if not g.value_info:
        return None
    if rng.random() < 0.5:
        n = len(g.value_info)
        del g.value_info[:]
        return f"dropped all {n} value_info"
    keep = [vi for vi in g.value_info if rng.random() < 0.5]
    n = len(g.value_info) - len(keep)
    del g.value_info[:]
    g.value_info.extend(keep)
    return f"dropped {n} value_info"


def m_reorder_value_info(model, rng):
    g = model.graph
    if len(g.value_info) < 2:
        return None
    items = list(g.value_info)
    rng.shuffle(items)
    copies = [onnx.ValueInfoProto() for _ in items]
    for c, vi in zip(copies, items):
        c.CopyFrom(vi)
    del g.value_info[:]
    g.value_info.extend(copies)
    return f"reordered {len(items)} value_info"


def m_rename_values(model, rng):
    g = model.graph
    boundary = {vi.name for vi in [*g.input, *g.output]}
    names = sorted({o for _, n in _all_nodes(model) for o in n.output if o and o not in boundary})
    if not names:
        return None
    picked = rng.sample(names, min(len(names), rng.choice([1, 3, 10, len(names)])))
    style = rng.choice(["fz_v{i}", "renamed/{old}", "{old}::{i}", "ÿ{i}"])
    _rename_everywhere(model, {old: style.format(i=i, old=old) for i, old in enumerate(picked)})
    return f"renamed {len(picked)} values"


def m_rename_nodes(model, rng):
    nodes = [n for _, n in _all_nodes(model)]
    if not nodes:
        return None
    style = rng.choice(["empty", "numbered", "same-as-output"])
    for i, n in enumerate(nodes):
        n.name = "" if style == "empty" else f"n{i}" if style == "numbered" else (n.output[0] if n.output else "")
    return f"renamed nodes ({style})"


def m_flip_attribute(model, rng):
    candidates = [(n, a) for _, n in _all_nodes(model) for a in n.attribute
                  if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.INTS,
                                onnx.AttributeProto.STRING)]
    if not candidates:
        return None
    n, a = rng.choice(candidates)
    old = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice([v for v in {0, 1, -1, a.i + 1, a.i - 1} if v != a.i])
        new = a.i
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([a.f * 0.5, a.f + 0.1, 0.0, 1.0])
        new = a.f
    elif a.type == onnx.AttributeProto.INTS:
        vals = list(a.ints)
        if vals and rng.random() < 0.5:
            k = rng.randrange(len(vals))
            vals[k] = rng.choice([vals[k] + 1, vals[k] - 1, -vals[k], 0])
        else:
            rng.shuffle(vals)
        del a.ints[:]
        a.ints.extend(vals)
        new = vals
    else:
        choices = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "linear", "nearest", "cubic", "constant",
                   "reflect", "edge", "half_pixel", "asymmetric", "align_corners", "tanh", "none"}
        a.s = rng.choice(sorted(choices - {a.s.decode(errors="replace")})).encode()
        new = a.s
    return f"attribute {n.op_type} {n.name!r} {a.name}: {old!r}->{new!r}"


def m_duplicate(model, rng):
    """Copy a node (or a chain of 2-3) and move some readers of its output to the copy."""
    g = model.graph
    outputs = {vi.name for vi in g.output}
    nodes = [n for n in g.node if n.op_type not in RANDOM_OPS and n.output and n.output[0]]
    if not nodes:
        return None
    start = rng.randrange(len(nodes))
    chain = [nodes[start]]
    by_input = defaultdict(list)
    for n in g.node:
        for x in n.input:
            by_input[x].append(n)
    for _ in range(rng.choice([0, 1, 2])):
        nxt = [r for r in by_input[chain[-1].output[0]] if r in nodes and len(r.output) >= 1 and r not in chain]
        if not nxt:
            break
        chain.append(nxt[0])
    renames = {}
    copies = []
    for n in chain:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = (n.name or n.op_type) + "__dup"
        for i, x in enumerate(c.input):
            c.input[i] = renames.get(x, x)
        for i, x in enumerate(c.output):
            if x:
                renames[x] = c.output[i] = x + "__dup"
        copies.append(c)
    last = chain[-1].output[0]
    readers = [r for r in by_input[last] if r not in chain]
    moved = [r for r in readers if rng.random() < 0.5]
    for r in moved:
        for i, x in enumerate(r.input):
            if x == last:
                r.input[i] = renames[last]
    # insert the copies right after the last node of the chain, so that the order stays topological
    pos = list(g.node).index(chain[-1]) + 1
    rest = [onnx.NodeProto() for _ in g.node[pos:]]
    for c, n in zip(rest, g.node[pos:]):
        c.CopyFrom(n)
    del g.node[pos:]
    g.node.extend(copies + rest)
    if not moved and last not in outputs and rng.random() < 0.5:
        vi = next((v for v in [*g.value_info, *g.output] if v.name == last), None)
        if vi is not None:
            new = g.output.add()
            new.CopyFrom(vi)
            new.name = renames[last]
            return f"duplicated {len(chain)} node(s) from {chain[0].op_type}, copy is a new graph output"
    return f"duplicated {len(chain)} node(s) from {chain[0].op_type} {chain[0].name!r}, {len(moved)} reader(s) moved"


def m_identity(model, rng):
    g = model.graph
    if not g.node:
        return None
    n = rng.choice(list(g.node))
    if not n.output or not n.output[0]:
        return None
    old = n.output[0]
    n.output[0] = old + "__pre_id"
    for other in g.node:
        for i, x in enumerate(other.input):
            if x == old:
                other.input[i] = n.output[0]
    idx = list(g.node).index(n)
    g.node.insert(idx + 1, helper.make_node("Identity", [n.output[0]], [old], name=f"fuzz_identity_{idx}"))
    return f"Identity after {n.op_type} {n.name!r}"


def m_ir_version(model, rng):
    old = model.ir_version
    model.ir_version = rng.choice([v for v in range(7, onnx.IR_VERSION + 1) if v != old])
    return f"ir_version {old}->{model.ir_version}"


# invalid ones
def m_bad_dims(model, rng):
    g = model.graph
    vis = [vi for vi in [*g.input, *g.output, *g.value_info]
           if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")
           and vi.type.tensor_type.shape.dim]
    inits = [t for t in g.initializer if t.dims]
    if vis and (not inits or rng.random() < 0.6):
        vi = rng.choice(vis)
        dims = vi.type.tensor_type.shape.dim
        d = dims[rng.randrange(len(dims))]
        value = rng.choice([0, -3, 7, 2 ** 40])
        d.dim_value = value
        return f"dim of {vi.name!r} set to {value}"
    if inits:
        t = rng.choice(inits)
        t.dims[rng.randrange(len(t.dims))] += rng.choice([1, -1, 5])
        return f"initializer {t.name!r} dims {list(t.dims)} (data unchanged)"
    return None


def m_dangling(model, rng):
    nodes = [(g, n) for g, n in _all_nodes(model) if any(n.input)]
    if not nodes:
        return None
    _, n = rng.choice(nodes)
    i = rng.choice([i for i, x in enumerate(n.input) if x])
    n.input[i] = "fuzz_dangling"
    return f"input {i} of {n.op_type} {n.name!r} dangling"


def m_unknown_op(model, rng):
    nodes = _all_nodes(model)
    if not nodes:
        return None
    _, n = rng.choice(nodes)
    old = n.op_type
    n.op_type = rng.choice(["FuzzNoSuchOp", old + "X", old.lower()])
    return f"op {old} {n.name!r} -> {n.op_type}"


def m_shuffle_nodes(model, rng):
    g = model.graph
    if len(g.node) < 2:
        return None
    i, j = rng.sample(range(len(g.node)), 2)
    a, b = onnx.NodeProto(), onnx.NodeProto()
    a.CopyFrom(g.node[i])
    b.CopyFrom(g.node[j])
    g.node[i].CopyFrom(b)
    g.node[j].CopyFrom(a)
    return f"swapped nodes {i} and {j}"


def m_drop_initializer(model, rng):
    g = model.graph
    if not g.initializer:
        return None
    i = rng.randrange(len(g.initializer))
    name = g.initializer[i].name
    del g.initializer[i]
    return f"dropped initializer {name!r}"


# (name, function, preserves what the model computes, weight)
MUTATIONS = [
    ("opset", m_opset, False, 3),
    ("drop_value_info", m_drop_value_info, True, 2),
    ("reorder_value_info", m_reorder_value_info, True, 1),
    ("rename_values", m_rename_values, True, 2),
    ("rename_nodes", m_rename_nodes, True, 1),
    ("flip_attribute", m_flip_attribute, False, 3),
    ("duplicate", m_duplicate, True, 3),
    ("identity", m_identity, True, 1),
    ("ir_version", m_ir_version, True, 1),
    ("bad_dims", m_bad_dims, False, 1),
    ("dangling", m_dangling, False, 1),
    ("unknown_op", m_unknown_op, False, 1),
    ("shuffle_nodes", m_shuffle_nodes, False, 1),
    ("drop_initializer", m_drop_initializer, False, 1),
]


def mutate(source: Source, rng: random.Random):
    model = onnx.ModelProto()
    model.CopyFrom(source.model)
    for _ in range(8):
        name, fn, preserving, _ = rng.choices(MUTATIONS, weights=[m[3] for m in MUTATIONS])[0]
        outputs = len(model.graph.output)
        what = fn(model, rng)
        if what is not None:  # a new graph output: the source's reference outputs no longer apply
            return model, name, what, preserving and len(model.graph.output) == outputs
    return model, "none", "unchanged", True


def pick_command(rng: random.Random, path: str, out: str) -> tuple[str, list[str]]:
    kind, extra = rng.choice(COMMANDS)
    if kind == "convert-opset":
        return kind, ["convert", path, "--opset", str(rng.randint(7, LATEST)), "-o", out]
    if kind.startswith("convert"):
        return kind, ["convert", path, *extra, "-o", out]
    if kind == "check":
        return kind, ["check", path]
    return kind, [kind, path, "-o", out]


# ------------------------------------------------------------------------------------------ a run

def _ok(fn) -> bool:
    try:
        fn()
    except Exception:  # noqa: BLE001 - any refusal
        return False
    return True


class Run:
    def __init__(self, number, source, mutation, what, preserving, kind, argv):
        self.number, self.source, self.mutation, self.what = number, source, mutation, what
        self.preserving, self.kind, self.argv = preserving, kind, argv
        self.rc = None
        self.finding = None
        self.note = ""
        self.seconds = 0.0


def judge(run: Run, model_path: str, workdir: str) -> None:
    from rewriter import cli

    before = set(os.listdir(workdir))
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(run.argv)
    except SystemExit as e:  # argparse-level exits are allowed to be 0 or 2
        rc = e.code if isinstance(e.code, int) else 2
    except BaseException as e:  # noqa: BLE001 - the finding
        if isinstance(e, KeyboardInterrupt):
            raise
        run.finding = ("traceback", "".join(traceback.format_exception(e))[-3000:])
        return
    run.rc = rc
    text = err.getvalue()
    if rc not in (0, 1, 2):
        run.finding = ("exit status", f"exit {rc}: {text[-500:]}")
        return
    if "Traceback" in text:
        run.finding = ("traceback", text[-3000:])
        return
    out_path = run.argv[run.argv.index("-o") + 1] if "-o" in run.argv else None
    after = set(os.listdir(workdir))
    if rc != 0:
        lines = text.splitlines()
        errors = [ln for ln in lines if ln.startswith("error:")]
        if rc == 2 and (len(errors) != 1 or not lines[-1].startswith("error:")):
            run.finding = ("error lines", f"{len(errors)} error: line(s), last line {lines[-1:]!r}")
        elif after - before:
            run.finding = ("file left behind", f"exit {rc}, new files {sorted(after - before)}")
        run.note = errors[-1][:200] if errors else ""
        return
    if out_path is None:
        return
    if not os.path.exists(out_path):
        run.note = "exit 0, nothing written: " + " ".join((out.getvalue() + text).split())[:200]
        return
    # the output against the mutated input, each of the input's checks made only when needed
    if not _ok(lambda: onnx.checker.check_model(out_path, full_check=True)):
        if _ok(lambda: onnx.checker.check_model(model_path, full_check=True)):
            try:
                onnx.checker.check_model(out_path, full_check=True)
            except Exception as e:  # noqa: BLE001
                run.finding = ("invalid output", one_line(e))
                return
    dtype = run.kind == "convert-dtype"
    got_loads, got, got_err = run_ort(out_path, run.source.sample)
    ref = None
    if run.preserving:
        _, ref, _ = run.source.reference()
    if not got_loads:
        in_loads, _, _ = run_ort(model_path, None)
        if in_loads:
            run.finding = ("ORT refuses output", got_err)
        return
    if got is None and not got_err.startswith("run:"):
        return  # no sample
    if not run.preserving or ref is None:
        in_loads, ref, in_err = run_ort(model_path, run.source.sample)
        if ref is None:
            run.note = "input does not run: numerics skipped"
            return
    if got is None:
        run.finding = ("output does not run", got_err)
        return
    if any(n.op_type in RANDOM_OPS for _, n in _all_nodes(onnx.load(model_path, load_external_data=False))):
        run.note = "random ops: numerics skipped"
        return
    why = compare(ref, got, dtype)
    if why and run.preserving and run.kind != "convert-dtype":
        # the mutation may have changed what ORT computes (ulps from another kernel order): compare with the input
        _, ref2, _ = run_ort(model_path, run.source.sample)
        if ref2 is not None and compare(ref2, got, dtype) is None:
            why = None
    if why:
        run.finding = ("numeric mismatch", why)


# ------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", nargs="+", metavar="CORPUS_DIR")
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--findings", default="fuzz_findings", metavar="DIR")
    p.add_argument("--json", default=None, metavar="OUT")
    p.add_argument("--max-mb", type=float, default=20)
    p.add_argument("--replay", type=int, action="append", default=None, metavar="N",
                   help="run only run number N of this seed (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per run")
    args = p.parse_args(argv)
    for d in args.corpus:
        if not os.path.isdir(d):
            print(f"error: {d} is not a directory", file=sys.stderr)
            return 2
    sources, skipped = find_sources(args.corpus, int(args.max_mb * 1024 * 1024))
    if not sources:
        print("error: no .onnx file below the corpus directories", file=sys.stderr)
        return 2
    weights = pick_weights(sources)
    print(f"fuzz_real: {len(sources)} models (skipped {len(skipped)} over {args.max_mb:g} MB), seed {args.seed}, "
          f"{args.seconds:g} s", flush=True)
    import onnxruntime  # noqa: F401 - imported before the clock starts, as the CLI's own imports
    from rewriter import cli  # noqa: F401

    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    started = time.perf_counter()
    numbers = args.replay if args.replay else iter(int, 1)  # replay: only those; else 0, 1, 2, ...
    runs: list[Run] = []
    per_command = defaultdict(Counter)
    per_mutation = Counter()
    counter = 0
    scratch = tempfile.mkdtemp(prefix="fuzz_real_")
    try:
        for number in numbers:
            if args.replay is None:
                number = counter
                counter += 1
                if time.perf_counter() - started >= args.seconds:
                    break
            rng = random.Random(f"{args.seed}:{number}")
            source = rng.choices(sources, weights=weights)[0]
            t0 = time.perf_counter()
            try:
                model, mutation, what, preserving = mutate(source, rng)
            except Exception as e:  # noqa: BLE001 - a bug of this tool; say so, go on
                print(f"fuzz_real: mutation failed on {source.name}: {one_line(e)}", file=sys.stderr)
                continue
            workdir = os.path.join(scratch, str(number))
            os.makedirs(workdir)
            model_path = os.path.join(workdir, "m.onnx")
            with open(model_path, "wb") as f:
                f.write(model.SerializeToString())
            kind, command = pick_command(rng, model_path, os.path.join(workdir, "out.onnx"))
            run = Run(number, source, mutation, what, preserving, kind, command)
            judge(run, model_path, workdir)
            run.seconds = time.perf_counter() - t0
            runs.append(run)
            per_mutation[mutation] += 1
            outcome = "finding" if run.finding else f"exit {run.rc}"
            per_command[kind][outcome] += 1
            if args.verbose:
                print(f"  #{number} {source.name} [{what}] {kind} -> {outcome} {run.seconds:.2f}s {run.note}",
                      flush=True)
            if run.finding:
                report_finding(run, model_path, args)
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - started
    return summary(runs, per_command, per_mutation, elapsed, args)


def report_finding(run: Run, model_path: str, args) -> None:
    os.makedirs(args.findings, exist_ok=True)
    stem = f"seed{args.seed}_run{run.number}_{run.source.name}_{run.mutation}"
    saved = os.path.join(args.findings, stem + ".onnx")
    shutil.copyfile(model_path, saved)
    argv = [saved if a == model_path else (os.path.join(args.findings, stem + ".out.onnx") if a.endswith("out.onnx")
            else a) for a in run.argv]
    info = {"source": run.source.path, "sample": run.source.sample_path, "mutation": run.mutation,
            "what": run.what, "seed": args.seed, "run": run.number, "command": run.argv[0], "argv": argv,
            "exit": run.rc, "finding": run.finding[0], "detail": run.finding[1]}
    with open(os.path.join(args.findings, stem + ".json"), "w") as f:
        json.dump(info, f, indent=1)
    corpus = " ".join(args.corpus)
    print(f"FINDING {run.finding[0]}: {run.source.name} [{run.what}] {' '.join(run.argv[:1] + run.argv[2:])}\n"
          f"  {run.finding[1].strip().splitlines()[-1] if run.finding[1].strip() else ''}\n"
          f"  reproduce: python -m rewriter {' '.join(argv)}\n"
          f"  replay:    python tools/fuzz_real.py {corpus} --seed {args.seed} --replay {run.number} "
          f"--max-mb {args.max_mb:g}", flush=True)


def summary(runs, per_command, per_mutation, elapsed, args) -> int:
    findings = [r for r in runs if r.finding]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\nruns: {len(runs)} in {elapsed:.0f} s ({len(runs) / elapsed * 60:.0f} runs/min), "
          f"models: {len({r.source.name for r in runs})}, load average: "
          f"{' '.join(f'{x:.2f}' for x in load) if load else '?'}")
    print("outcomes per command:")
    for kind in sorted(per_command):
        c = per_command[kind]
        print(f"  {kind:15s} " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items())))
    print("mutations: " + ", ".join(f"{k}: {v}" for k, v in per_mutation.most_common()))
    slow = sorted(runs, key=lambda r: -r.seconds)[:3]
    print("slowest: " + ", ".join(f"{r.source.name} {r.kind} {r.seconds:.1f}s" for r in slow))
    kinds = Counter(r.finding[0] for r in findings)
    print(f"findings: {len(findings)}" + (f" ({', '.join(f'{k}: {v}' for k, v in kinds.items())}), saved under "
                                          f"{args.findings}" if findings else ""))
    distinct = defaultdict(list)  # one line per (source, command, kind of finding): the same bug seen again
    for r in findings:
        distinct[(r.source.name, " ".join(a for a in r.argv[:1] + r.argv[2:] if a != "-o" and not a.endswith("out.onnx")),
                  r.finding[0])].append(r)
    for (name, command, kind), rs in sorted(distinct.items()):
        detail = rs[0].finding[1].strip().splitlines()[-1] if rs[0].finding[1].strip() else ""
        print(f"  {kind}: {name}: {command} x{len(rs)} (runs {', '.join(str(r.number) for r in rs[:5])}"
              f"{', ...' if len(rs) > 5 else ''}): {detail[:160]}")
    if args.json:
        doc = {"seed": args.seed, "seconds": elapsed, "runs": len(runs), "runs_per_min": len(runs) / elapsed * 60,
               "load_average": list(load) if load else None,
               "outcomes": {k: dict(v) for k, v in per_command.items()}, "mutations": dict(per_mutation),
               "findings": [{"source": r.source.path, "mutation": r.mutation, "what": r.what, "run": r.number,
                             "argv": r.argv, "finding": r.finding[0], "detail": r.finding[1]} for r in findings]}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
