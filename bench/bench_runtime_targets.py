"""Real models in the real releases of OpenVINO, tract and TVM: as they are, after
``onnxsim --target-opset 13``, and after ``rewriter convert --target X`` (issue 41's bar).

For each runtime release (default: every one of openvino 2026.4 / 2024.6, tract 0.23 and
tvm 0.27 whose venv tools/runtime_venvs.py made) and each model of the corpus folders (every
NAME.onnx with its sample input NAME.npz, real inputs) that ONNX Runtime (this python's) runs
on its sample, three columns side by side in one run:

1. the model as it is;
2. ``onnxsim M OUT --target-opset 13`` (onnxsim 0.8+ from its own venv, ``--onnxsim``);
3. ``rewriter convert M --target X -o OUT`` (exit 2 is a refusal: its message must name a node
   of the model, ``node 'NAME' (Op)`` or ``unnamed Op node #i``, which is checked).

Each result is run in the release by its runner (tools/runtime_run_<runtime>.py, ``--batch``,
in the release's venv, in a subprocess restarted after a case that crashes or hangs) on the
sample and compared with ONNX Runtime's outputs on the original: "match" (float outputs
relative L2 error <= 1e-4, float16 outputs 2^-10 and bfloat16 2^-7 (their formats' unit roundoff:
the bar's 1e-4 is for float32 outputs), integer / bool / string outputs equal, same shapes), "refused" (an
error at load or run, onnxsim failing, or rewriter's refusal) or "WRONG" (runs and computes
something else).  Per runtime it prints a table (match / refused / WRONG and the % that match,
of the models ONNX Runtime runs), every WRONG, and every refusal of column 3 with its reason
(its first line that says something: OpenVINO's "Exception from src/...:N:" location lines
are skipped).

``REWRITER_OPENVINO_PRECISION=default`` runs OpenVINO without its float32 precision hint (what a
user who sets nothing gets: bfloat16 inference on a CPU with AMX or avx512_bf16); the runs are
cached apart.

With ``--input-shape`` a fourth column converts with ``--input-shape NAME:DIMS`` taken from
the sample for every input whose shape is not static: what static shapes would add.

Work is interleaved per runtime: the three files of a model go to the runner one after the
other, the runtimes one after the other; one heavy process at a time, under ``nice``.
Converted files, ONNX Runtime's outputs and the runners' results are cached in ``--cache``
(content-addressed: model bytes, rewriter's source, the tool and runner versions), so a second
run only redoes what changed; ``--fresh`` starts from an empty cache.

    python bench/bench_runtime_targets.py [--target openvino==2026.4 ...] [--corpus DIR ...]
        [--only SUBSTR ...] [--input-shape] [--cache DIR] [--fresh] [--timeout 900] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import runtime_venvs  # tools/, numpy only

CORPORA = ["/work/corpus/optbench", "/work/corpus/torch", "/work/corpus/ml", "/work/corpus/quant",
           "/work/corpus/iniputs", "/work/corpus/contrib"]
TARGETS = ["openvino==2026.4", "openvino==2024.6", "tract==0.23", "tvm==0.27"]
COLUMNS = ["as is", "onnxsim --target-opset 13", "convert --target X"]
STATIC = "convert --target X --input-shape"  # --input-shape: a fourth column
RTOL = 1e-4  # relative L2 error of a float32 (or double) output
# a half output (the model's own type, not a runtime's choice) is judged within its format's unit
# roundoff: ONNX Runtime's own float16 run of llama_tiny_fp16 is 5.2e-4 from the same model in float32
HALF_RTOL = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
NICE = ["nice", "-n", "10"]


# ---------------------------------------------------------------- small helpers

def _sha(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        else:
            h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _source_hash() -> str:
    """rewriter's source and data as they are now (several engineers edit the tree)."""
    files = sorted(p for p in (ROOT / "rewriter").rglob("*") if p.suffix in (".py", ".json", ".c") and p.is_file())
    return _sha(*[x for p in files for x in (p.relative_to(ROOT), p)])


_NOISE = re.compile(r"^(\w+(Error|Exception): )?(Exception from \S+:\d+:?|Check '.*' failed at \S+:?|"
                    r"FrontEnd API failed with \w+:?|Loading input model|Traceback \(most recent call last\):|\[ERROR\]|error:)?\s*$")


def first_line(text: str) -> str:
    """The first line of a message that says something (OpenVINO's location lines skipped),
    continued while it ends with ":" (it announces its detail); for an OpenVINO conversion
    report, its summary first; for an error chain (tract's "Caused by:"), the last cause."""
    text = (text or "").split("Stack backtrace:")[0]
    summary = ""
    if "\nSummary:" in text:
        text, _, rest = text.partition("\nSummary:")
        summary = "; ".join(ln.strip(" -") for ln in rest.splitlines() if ln.strip(" -"))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if not _NOISE.match(ln) and not ln.startswith("File \"")] or lines or ["(no message)"]
    first = said[0]
    for ln in said[1:]:
        if not first.endswith(":") or ln.startswith("Caused by"):
            break
        first = f"{first} {ln}"
    if summary:
        first = f"{said[0].rstrip(':.')}: {summary} | {first[len(said[0]):].strip()}".rstrip(" |")
    if "Caused by:" in text:
        causes = [ln.strip() for ln in text.split("Caused by:", 1)[1].splitlines() if ln.strip()]
        last = re.sub(r"^\d+: ", "", causes[-1]) if causes else ""
        if last and last not in first:
            first = f"{first} / {last}"
    return first[:300]


def _node_names(model) -> dict[str, str]:
    """{node name: op type} over every graph, subgraph and function of the model."""
    out = {}

    def walk(nodes):
        for n in nodes:
            if n.name:
                out[n.name] = n.op_type
            for a in n.attribute:
                if a.g is not None and a.HasField("g"):
                    walk(a.g.node)
                for g in a.graphs:
                    walk(g.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    return out


_NAMED = re.compile(r"node '([^']+)' \(([\w.:]+)\)")
_UNNAMED = re.compile(r"unnamed ([\w.:]+) node #\d+")


def names_a_node(message: str, model_path: Path) -> bool:
    """Does a refusal name a node the model has (by its name and op type, or as an unnamed
    op node at an index)?"""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    nodes = _node_names(model)
    ops = {n.op_type for n in model.graph.node} | set(nodes.values())
    for name, op in _NAMED.findall(message):
        if nodes.get(name) == op.split(":")[-1] or nodes.get(name) == op:
            return True
    return any(op.split(":")[-1] in ops for op in _UNNAMED.findall(message))


# ---------------------------------------------------------------- ONNX Runtime, the reference

def _encode(name: str, value, out: dict) -> None:
    if isinstance(value, dict):  # a map: its values in key order
        out[name] = np.array([value[k] for k in sorted(value)])
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        keys = sorted({k for v in value for k in v})  # ZipMap: a sequence of maps, one row each
        out[name] = np.array([[v.get(k, np.nan) for k in keys] for v in value], dtype=np.float64)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            out[f"{name}#{i}"] = np.asarray(v)
    else:
        out[name] = np.asarray(value)


def ort_reference(model: Path, sample: Path, cache: Path, optimized: bool = True) -> dict:
    """{"ok", "error"?, "outputs": [names], "file": npz} of ONNX Runtime on the original (with
    its default graph optimizations, or none: how far apart the two are is ONNX Runtime's own
    spread, quoted beside a WRONG)."""
    import onnxruntime as ort

    key = _sha(model, sample, ort.__version__, "" if optimized else "no-graph-optimizations")
    meta, npz = cache / "ort" / f"{key}.json", cache / "ort" / f"{key}.npz"
    if meta.exists():
        return json.loads(meta.read_text())
    meta.parent.mkdir(parents=True, exist_ok=True)
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        if not optimized:
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        feeds = dict(np.load(sample, allow_pickle=True))
        names = [o.name for o in session.get_outputs()]
        values = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs() if i.name in feeds})
        out: dict = {}
        for name, value in zip(names, values):
            _encode(name, value, out)
        np.savez(npz, **{f"o{i}": v for i, v in enumerate(out.values())})
        result = {"ok": True, "outputs": list(out), "file": str(npz)}
    except Exception as e:  # noqa: BLE001 - a model ONNX Runtime does not run is left out
        result = {"ok": False, "error": first_line(f"{type(e).__name__}: {e}")}
    meta.write_text(json.dumps(result))
    return result


def _load_ref(ref: dict) -> dict:
    with np.load(ref["file"], allow_pickle=True) as data:
        return {name: data[f"o{i}"] for i, name in enumerate(ref["outputs"])}


# ---------------------------------------------------------------- the two tools

def _timed(argv: list[str], name: str, timeout: float, cwd=None) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of a tool call; past ``timeout``, a line saying so and -1."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "", f"{name}: timeout after {timeout:.0f}s", -1
    return proc.stdout, proc.stderr, proc.returncode


def onnxsim_file(exe: str, model: Path, cache: Path, version: str, timeout: float) -> dict:
    """{"ok", "file"|"reason"} of ``onnxsim M OUT --target-opset 13`` (cached)."""
    key = _sha(model, "onnxsim", version)
    out, meta = cache / "onnxsim" / f"{key}.onnx", cache / "onnxsim" / f"{key}.json"
    if meta.exists():
        return json.loads(meta.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    stdout, stderr, rc = _timed([*NICE, exe, str(model), str(out), "--target-opset", "13"], "onnxsim", timeout)
    log = stdout + stderr
    if rc == 0 and out.exists():
        result = {"ok": True, "file": str(out)}
    else:
        errors = [ln for ln in log.splitlines() if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
        result = {"ok": False, "reason": "onnxsim failed: " + first_line(errors[-1] if errors else log[-2000:])}
    result["seconds"] = round(time.monotonic() - start, 1)
    meta.write_text(json.dumps(result))
    return result


def sample_shapes(model: Path, sample: Path) -> list[str]:
    """``--input-shape NAME:DIMS`` of every graph input whose declared shape is not all static,
    from the sample."""
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    init = {i.name for i in graph.initializer}
    out = []
    with np.load(sample, allow_pickle=True) as data:
        for i in graph.input:
            dims = i.type.tensor_type.shape.dim
            static = i.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") and d.dim_value > 0
                                                                    for d in dims)
            if i.name in init or i.name not in data.files or static:
                continue
            out += ["--input-shape", f"{i.name}:{','.join(str(d) for d in data[i.name].shape)}"]
    return out


def convert_file(model: Path, target: str, cache: Path, src: str, timeout: float, extra: list[str] = ()) -> dict:
    """{"ok", "file"|"reason", "exit", "names_node"} of ``rewriter convert M --target X -o OUT``."""
    key = _sha(model, target, src, *extra)
    out, meta = cache / "convert" / f"{key}.onnx", cache / "convert" / f"{key}.json"
    if meta.exists():
        result = json.loads(meta.read_text())
        if not result["ok"] and result["exit"] in (1, 2) and "names_node" not in result:  # (cached before exit 1 was)
            result["names_node"] = names_a_node(result.get("message", ""), model)
        return result
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    stdout, stderr, rc = _timed([*NICE, sys.executable, "-m", "rewriter", "convert", str(model), "--target", target,
                                 "-o", str(out), "-q", *extra], "rewriter convert", timeout, cwd=ROOT)
    log = stderr + stdout
    if rc == 0 and out.exists():
        result = {"ok": True, "file": str(out), "exit": 0}
    else:
        result = {"ok": False, "exit": rc, "message": log.strip()[-4000:],
                  "reason": f"rewriter exit {rc}: " + first_line(log)}
        if rc in (1, 2):  # refused (2) or its result refused by the last checks (1): either must name the node
            result["names_node"] = names_a_node(log, model)
    result["seconds"] = round(time.monotonic() - start, 1)
    meta.write_text(json.dumps(result))
    return result


# ---------------------------------------------------------------- the runners

def run_batch(python: Path, runtime: str, cases: list[dict], timeout: float, log) -> dict:
    """{case id: result line} of the runner over ``cases``; a case that crashes the runner or
    runs past ``timeout`` gets {"ok": False, "stage": ..., "error": ...} and the runner is
    restarted after it."""
    results: dict = {}
    pending = list(cases)
    while pending:
        with tempfile.TemporaryDirectory() as tmp:
            _one_pass(python, runtime, pending, timeout, log, Path(tmp), results)
        pending = [c for c in pending if c["id"] not in results]
    return results


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _one_pass(python: Path, runtime: str, pending: list[dict], timeout: float, log, tmp: Path, results: dict) -> None:
    """One runner process over ``pending`` until it ends, crashes or hangs (then killed)."""
    env = {**os.environ, "REWRITER_RUNTIME_THREADS": os.environ.get("REWRITER_RUNTIME_THREADS", "1")}
    jsonl = tmp / "cases.jsonl"
    jsonl.write_text("".join(json.dumps(c) + "\n" for c in pending))
    with open(tmp / "stderr", "w+", encoding="utf-8") as err:
        proc = subprocess.Popen([*NICE, str(python), str(runtime_venvs.runner(runtime)), "--batch", str(jsonl)],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=tmp)  # (onnx2tf leaves scratch files in its working directory)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        current = None
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                proc.wait()
                victim = current or next(c["id"] for c in pending if c["id"] not in results)
                results[victim] = {"ok": False, "stage": "timeout", "error": f"no result in {timeout:.0f}s"}
                return
            if line is None:
                break
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "start" in obj:
                current = obj["start"]
                log(f"  {runtime}: {current}")
            elif "id" in obj:
                results[obj["id"]] = obj
                current = None
        rc = proc.wait()
        err.seek(0)
        tail = err.read()
    if all(c["id"] in results for c in pending):
        return
    stages = re.findall(r"^stage:(\w+)$", tail, re.MULTILINE)
    fatal = re.findall(r"^(Fatal Python error: .*)$", tail, re.MULTILINE)
    why = f"the runner died (exit {rc}) at stage {stages[-1] if stages else '?'}: " + (
        fatal[0] if fatal else
        first_line("\n".join(ln for ln in tail.splitlines()[-20:] if not ln.startswith("stage:"))))
    if current is not None:
        results[current] = {"ok": False, "stage": "crash", "error": why}
    else:  # it died between cases or before the first: nothing more will run
        for c in pending:
            results.setdefault(c["id"], {"ok": False, "stage": "crash", "error": why})


def _runtime_version(python: Path, runtime: str) -> str:
    code = {"openvino": "import openvino as ov; print(ov.get_version())", "tract": "import tract; print(tract.version())",
            "tvm": "import tvm; print(tvm.__version__)",
            "litert": "import importlib.metadata as m; print('onnx2tf', m.version('onnx2tf'), 'ai-edge-litert', "
                      "m.version('ai-edge-litert'))"}[runtime]
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "?"


# ---------------------------------------------------------------- comparison

def compare(ref: dict, got: dict, order: list[str], rtol: float = RTOL) -> str | None:
    """None when ``got`` (the runner's outputs, in its ``order``) matches ONNX Runtime's ``ref``
    (float outputs within ``rtol``, relative L2), else what differs."""
    for i, (name, want) in enumerate(ref.items()):
        value = got.get(name)
        if value is None and i < len(order) and order[i] not in ref:
            value = got.get(order[i])  # renamed by the runtime: by position
        if value is None:
            return f"no output {name!r} (got {order})"
        want, value = np.asarray(want), np.asarray(value)
        if want.dtype.kind in "USO" or value.dtype.kind in "USO":
            if want.shape != value.shape or not np.array_equal(want.astype(str), value.astype(str)):
                return f"{name!r}: strings differ"
            continue
        if want.shape != value.shape:
            return f"{name!r}: shape {list(value.shape)}, ONNX Runtime {list(want.shape)}"
        if want.dtype.kind in "fc":
            if value.dtype.kind not in "fcbiu":
                return f"{name!r}: type {value.dtype}, ONNX Runtime {want.dtype}"
            w, v = want.astype(np.float64), value.astype(np.float64)
            bad = np.isnan(w) != np.isnan(v)
            if bad.any():
                return f"{name!r}: NaN at {int(bad.sum())} places ONNX Runtime has none or vice versa"
            inf = np.isinf(w) | np.isinf(v)
            if (w[inf] != v[inf]).any():
                return f"{name!r}: infinities differ"
            fin = np.isfinite(w)
            diff, norm = np.linalg.norm(w[fin] - v[fin]), np.linalg.norm(w[fin])
            rel = diff / norm if norm else (0.0 if diff == 0 else np.inf)
            tol = max(HALF_RTOL.get(str(want.dtype), RTOL), rtol)
            if rel > tol and not (norm == 0 and np.max(np.abs(v[fin]), initial=0) <= 1e-6):
                return f"{name!r}: relative L2 {rel:.3g}"
        elif not np.array_equal(want.astype(np.int64) if want.dtype.kind == "b" else want,
                                value.astype(np.int64) if value.dtype.kind == "b" else value):
            return f"{name!r}: {int(np.sum(want != value))} of {want.size} integer elements differ"
    return None


# ---------------------------------------------------------------- main

def in_label_order(ref: dict, converted: str) -> dict:
    """``ref`` with each ZipMap output that ``converted`` made a tensor (its labels in metadata
    ``rewriter.zipmap.<output>``) in that tensor's column order (``_encode`` sorts the keys)."""
    import onnx

    props = onnx.load(converted, load_external_data=False).metadata_props
    labels = {p.key[len("rewriter.zipmap."):]: json.loads(p.value) for p in props if p.key.startswith("rewriter.zipmap.")}
    return {name: want[:, [sorted(labels[name]).index(k) for k in labels[name]]] if name in labels else want
            for name, want in ref.items()}


def discover(corpora: list[str], only: list[str]) -> list[tuple[str, Path, Path]]:
    out = []
    for folder in corpora:
        for model in sorted(Path(folder).glob("*.onnx")):
            sample = model.with_suffix(".npz")
            name = f"{Path(folder).name}/{model.stem}"
            if sample.exists() and (not only or any(s in name for s in only)):
                out.append((name, model, sample))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", help=f"RUNTIME==RELEASE (default: {', '.join(TARGETS)})")
    ap.add_argument("--corpus", action="append", help=f"folders of NAME.onnx + NAME.npz (default: {' '.join(CORPORA)})")
    ap.add_argument("--only", action="append", default=[], help="only models whose FOLDER/NAME contains this")
    ap.add_argument("--onnxsim", default=None, help="the onnxsim executable (default: /work/venvs/onnxsim's, else PATH's)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "rewriter-bench-runtime-targets"))
    ap.add_argument("--fresh", action="store_true", help="empty the cache first")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool call and per runner case")
    ap.add_argument("--json", default=None, help="also write every cell to this file")
    ap.add_argument("--input-shape", action="store_true",
                    help="a fourth column: convert --target X with --input-shape NAME:DIMS of the sample for every "
                         "input whose shape is not static (the same file as column 3 when all are)")
    args = ap.parse_args(argv)

    cache = Path(args.cache)
    if args.fresh and cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    import onnx
    import onnxruntime as ort

    targets = []
    for t in args.target or TARGETS:
        runtime, release = runtime_venvs.parse(t)
        python = runtime_venvs.venv_python(runtime, release)
        if python is None:
            print(f"{t}: no venv (python tools/runtime_venvs.py {t}): skipped")
            continue
        targets.append((f"{runtime}=={release}", runtime, python))

    exe = args.onnxsim or next((p for p in ["/work/venvs/onnxsim/bin/onnxsim", shutil.which("onnxsim")]
                                if p and os.path.exists(p)), None)
    sim_version = None
    if exe:
        pip = Path(exe).with_name("python")
        proc = subprocess.run([str(pip if pip.exists() else sys.executable), "-c",
                               "import onnxsim; print(onnxsim.__version__)"], capture_output=True, text=True, check=False)
        sim_version = proc.stdout.strip() or None
    columns = COLUMNS if sim_version else [COLUMNS[0], COLUMNS[2]]
    if args.input_shape:
        columns = [*columns, STATIC]

    models = discover(args.corpus or CORPORA, args.only)
    src = _source_hash()
    print(f"date {datetime.date.today().isoformat()}; rewriter {_git_rev()} (source {src[:12]}); onnx {onnx.__version__};"
          f" onnxruntime {ort.__version__}; onnxsim {sim_version or 'absent: its column dropped'}")
    for _, runtime, python in targets:
        print(f"{runtime}: {_runtime_version(python, runtime)} ({python.parent.parent})")
    print(f"{len(models)} models with a sample in {', '.join(args.corpus or CORPORA)}")

    # ONNX Runtime on every original, and onnxsim once per model: the same for every runtime
    refs, sims, excluded = {}, {}, []
    for i, (name, model, sample) in enumerate(models):
        log(f"[{i + 1}/{len(models)}] ONNX Runtime / onnxsim: {name}")
        ref = ort_reference(model, sample, cache)
        if not ref["ok"]:
            excluded.append((name, ref["error"]))
            continue
        refs[name] = ref
        if sim_version:
            sims[name] = onnxsim_file(exe, model, cache, sim_version, args.timeout)
    runs = [(n, m, s) for n, m, s in models if n in refs]
    print(f"ONNX Runtime runs {len(runs)} of them" + (f"; not: {', '.join(n for n, _ in excluded)}" if excluded else ""))
    for name, why in excluded:
        print(f"  ONNX Runtime does not run {name}: {why}")
    print()

    digests = {name: _sha(model) for name, model, _ in runs}  # a runner must leave the models as they are
    cells = []
    for target, runtime, python in targets:
        # column 3 for this target, then every file of every model in one runner batch, the
        # three of a model one after the other
        files: dict = {}
        for i, (name, model, sample) in enumerate(runs):
            log(f"[{i + 1}/{len(runs)}] rewriter convert --target {target}: {name}")
            conv = convert_file(model, target, cache, src, args.timeout)
            sim = sims.get(name, {"ok": False, "reason": "no onnxsim"})
            per = {COLUMNS[0]: {"ok": True, "file": str(model)}, COLUMNS[1]: sim, COLUMNS[2]: conv}
            if args.input_shape:
                shapes = sample_shapes(model, sample)
                per[STATIC] = convert_file(model, target, cache, src, args.timeout, shapes) if shapes else conv
            files[name] = {c: per[c] for c in columns}
        cases, results, rt_key = [], {}, _sha(runtime_venvs.runner(runtime), ROOT / "tools" / "runtime_run_common.py",
                                              _runtime_version(python, runtime),
                                              os.environ.get("REWRITER_OPENVINO_PRECISION", "f32"))
        for name, model, sample in runs:
            for col, made in files[name].items():
                if not made["ok"]:
                    continue
                key = _sha(Path(made["file"]), sample, rt_key)
                meta = cache / "runs" / runtime / f"{key}.json"
                if meta.exists():
                    results[(name, col)] = json.loads(meta.read_text())
                    continue
                meta.parent.mkdir(parents=True, exist_ok=True)
                m = onnx.load(made["file"], load_external_data=False)
                cases.append({"id": f"{name}|{col}", "model": made["file"], "inputs": str(sample),
                              "outputs": str(meta.with_suffix(".npz")), "want": [o.name for o in m.graph.output],
                              "meta": str(meta)})
        log(f"{target}: {len(cases)} runs ({len(results)} cached)")
        done = run_batch(python, runtime, cases, args.timeout, log)
        for case in cases:
            result = done[case["id"]]
            result["npz"] = case["outputs"]
            Path(case["meta"]).write_text(json.dumps(result))
            name, col = case["id"].split("|")
            results[(name, col)] = result

        for name, model, sample in runs:
            ref = _load_ref(refs[name])
            for col, made in files[name].items():
                cell = {"runtime": target, "model": name, "column": col}
                if not made["ok"]:
                    cell.update(verdict="refused", reason=made["reason"], by="tool")
                    if "names_node" in made:
                        cell["names_node"] = made["names_node"]
                else:
                    r = results[(name, col)]
                    if not r.get("ok"):
                        cell.update(verdict="refused", by="runtime",
                                    reason=f"{r.get('stage')}: {first_line(r.get('error', ''))}")
                    else:
                        with np.load(r["npz"], allow_pickle=True) as data:
                            got = {k: data[k] for k in data.files}
                        cell.update(judge(model, sample, cache, ref, got, r, made["file"]))
                cells.append(cell)
        report(target, runtime, python, len(runs), columns, [c for c in cells if c["runtime"] == target])
        sys.stdout.flush()
        changed = [name for name, model, _ in runs if _sha(model) != digests[name]]
        if changed:
            raise SystemExit(f"{target}'s runs changed the models they were given: {', '.join(changed)}")
    if args.json:
        Path(args.json).write_text(json.dumps(cells, indent=1))
    return 0


def judge(model: Path, sample: Path, cache: Path, ref: dict, got: dict, result: dict, converted: str) -> dict:
    """The cell's verdict on a result that ran. "match" when it is within the bar of ONNX
    Runtime's result with its default graph optimizations, or of its result without them (the
    ops as the spec writes them: on quantized models its two results differ, ppocr_mobile_cls_qdq
    by 5.6e-3), or within ONNX Runtime's own spread when its two results are further apart than
    the bar (then no runtime can be held closer); ``match_to`` says which, when not the first.
    Else "WRONG", with how far it is from each and ONNX Runtime's own spread."""
    order = result.get("outputs") or list(got)
    want = in_label_order(ref, converted)  # (ZipMap's maps made a tensor)
    diff = compare(want, got, order)
    if diff is None:
        return {"verdict": "match", "reason": None}
    plain = ort_reference(model, sample, cache, optimized=False)
    if not plain["ok"]:
        return {"verdict": "WRONG", "reason": f"{diff}; ONNX Runtime without graph optimizations fails: {plain['error']}"}
    plain = in_label_order(_load_ref(plain), converted)
    to_plain = compare(plain, got, order)
    if to_plain is None:
        return {"verdict": "match", "reason": None, "match_to": "ONNX Runtime without graph optimizations"}
    spread = own_spread(want, plain)
    if spread > RTOL and compare(want, got, order, spread) is None and compare(plain, got, order, spread) is None:
        return {"verdict": "match", "reason": f"{diff}; to ONNX Runtime without graph optimizations: {_short(to_plain)}",
                "match_to": f"within ONNX Runtime's own spread ({spread:.3g})"}
    exact = _exact_int8_reference(model, sample, cache)
    if exact is not None and compare(in_label_order(exact, converted), got, order) is None:
        return {"verdict": "match", "reason": f"{diff}; to ONNX Runtime without graph optimizations: {_short(to_plain)}",
                "match_to": "ONNX Runtime's exact uint8 x int8 sums (this CPU's saturate)"}
    own = compare(want, plain, list(plain)) or "within 1e-4"
    return {"verdict": "WRONG", "reason": f"{diff}; to ONNX Runtime without graph optimizations: {_short(to_plain)}; "
                                          f"ONNX Runtime's own spread: {_short(own)}"}


def _exact_int8_reference(model: Path, sample: Path, cache: Path) -> dict | None:
    """ONNX Runtime's result (default options) on the copy of ``model`` whose int8 weights of uint8 x int8
    ops are read as uint8 (tests/convert/support/exact_int8.py: the same integers), when this CPU's ONNX
    Runtime saturates uint8 x int8 pair sums (AVX2 without VNNI: docs/lowering.md) and the model has such
    weights: the op's definition, which ONNX Runtime computes on a CPU with VNNI. None otherwise."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.convert.support.exact_int8 import saturates, shifted

    if not saturates():
        return None
    path = cache / "exact_int8" / f"{_sha(model)}.onnx"
    if not path.exists():
        import onnx

        source = onnx.load(str(model))
        copy = shifted(source)
        if copy is source:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(copy, str(path))
    ref = ort_reference(path, sample, cache)
    return _load_ref(ref) if ref["ok"] else None


def own_spread(a: dict, b: dict) -> float:
    """The largest relative L2 between ONNX Runtime's two results over their float outputs (0
    when a non-float output differs: integers and strings are held equal, never widened)."""
    worst = 0.0
    for name, x in a.items():
        x, y = np.asarray(x), np.asarray(b.get(name))
        if x.dtype.kind not in "fc":
            if x.shape != y.shape or not np.array_equal(x, y):
                return 0.0
            continue
        if x.shape != y.shape:
            return 0.0
        fin = np.isfinite(x) & np.isfinite(y)
        if (np.isnan(x) != np.isnan(y)).any() or (x[~fin] != y[~fin]).any():
            return 0.0
        norm = np.linalg.norm(x[fin].astype(np.float64))
        diff = np.linalg.norm(x[fin].astype(np.float64) - y[fin].astype(np.float64))
        worst = max(worst, diff / norm if norm else (0.0 if diff == 0 else np.inf))
    return float(worst)


def _short(diff: str) -> str:
    return diff.split(": ", 1)[1] if diff.startswith("'") and ": " in diff else diff


def _git_rev() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() or "?"


def report(target: str, runtime: str, python: Path, n: int, columns: list[str], cells: list[dict]) -> None:
    col3 = f"convert --target {target}"
    label = {c: (col3 if c == COLUMNS[2] else f"{col3} --input-shape (the sample's)" if c == STATIC else c)
             for c in columns}
    width = max(len(v) for v in label.values()) + 2
    print(f"{target} ({_runtime_version(python, runtime)}): {n} models ONNX Runtime runs")
    print(f"| {'column':{width}}| match | of them: unoptimized / spread | refused | WRONG | match % |")
    print(f"|{'-' * (width + 1)}|------:|------------------------------:|--------:|------:|--------:|")
    for c in columns:
        mine = [x for x in cells if x["column"] == c]
        k = {v: sum(x["verdict"] == v for x in mine) for v in ("match", "refused", "WRONG")}
        plain = sum(x.get("match_to", "").startswith("ONNX Runtime without") for x in mine)
        spread = sum(x.get("match_to", "").startswith("within") for x in mine)
        pct = 100.0 * k["match"] / n if n else 0.0
        print(f"| {label[c]:{width}}| {k['match']:5} | {f'{plain} / {spread}':>29} | {k['refused']:7} | {k['WRONG']:5} |"
              f" {pct:6.1f}% |")
    others = [x for x in cells if x.get("match_to")]
    print(f"matched not ONNX Runtime's default result but its result without graph optimizations, or within its own"
          f" spread ({len(others)}):")
    for x in others:
        print(f"  [{label[x['column']]}] {x['model']}: {x['match_to']}" + (f"; {x['reason']}" if x.get("reason") else ""))
    wrong = [x for x in cells if x["verdict"] == "WRONG"]
    print(f"WRONG ({len(wrong)}):")
    for x in wrong:
        print(f"  [{label[x['column']]}] {x['model']}: {x['reason']}")
    refused = [x for x in cells if x["column"] == COLUMNS[2] and x["verdict"] == "refused"]
    print(f"refused after {col3} ({len(refused)}; models with the same reason together, tract's node numbers as #N):")
    groups: dict = {}
    for x in refused:
        if x["by"] == "tool":
            named = "names a node" if x.get("names_node") else "NAMES NO NODE"
            why = f"rewriter refuses ({named}): {x['reason']}"
        else:
            why = f"converted, but {runtime} refuses it: {x['reason']}"
        groups.setdefault(re.sub(r"node #\d+", "node #N", why), []).append(x["model"])
    for why, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(names):3} x {why}")
        print(f"        {', '.join(names)}")
    print()


if __name__ == "__main__":
    sys.exit(main())
