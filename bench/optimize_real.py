"""Real-model mode of bench_optimize.py: each tool as a user runs it, one whole process per model.

    rewriter optimize IN -o OUT          (the console script of the project's python)
    onnxslim IN OUT                      (console script of --bench-venv)
    onnxsim IN OUT                       (console script of --bench-venv)
    python -c "onnxscript.optimizer.optimize(onnx.load(IN))" IN OUT   (the project's python)

Repetitions are interleaved (rep, model, tool in a rotated order); the wall time is the whole
process (start-up, imports, load, optimize, save) and the CPU time is the child's user+sys.
On the first repetition each result is checked: onnx.checker full_check, loads in ONNX Runtime,
outputs equal to the source's on the model's sample input (<stem>.npz beside it, else random);
its nodes (every scope), bytes and op-type histogram are recorded, and `rewriter optimize` is run
once more on rewriter's own result (idempotence). Then ONNX Runtime latency of the source and of
every valid result: default graph optimizations, one intra-op and one inter-op thread, the
sessions run interleaved in a rotated order, median and range; session creation time likewise.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import onnx

_ONNXSCRIPT = ("import sys, onnx, onnxscript.optimizer\n"
               "m = onnxscript.optimizer.optimize(onnx.load(sys.argv[1]))\n"
               "onnx.save(m, sys.argv[2])\n")


def commands(bench_venv: str, rewriter_src: str | None = None) -> dict:
    """tool -> argv template with {src} and {dst}. With ``rewriter_src`` (a folder holding a
    ``rewriter`` package, e.g. a ``git archive`` of one commit) rewriter runs as
    ``python -m rewriter`` from there, so edits others make to the checkout meanwhile do not
    leak into the run."""
    here = os.path.dirname(sys.executable)
    venv = os.path.join(bench_venv, "bin")
    rewriter = [sys.executable, "-m", "rewriter"] if rewriter_src else [os.path.join(here, "rewriter")]
    return {"rewriter": [*rewriter, "optimize", "{src}", "-o", "{dst}"],
            "onnxslim": [os.path.join(venv, "onnxslim"), "{src}", "{dst}"],
            "onnxsim": [os.path.join(venv, "onnxsim"), "{src}", "{dst}"],
            "onnxscript": [sys.executable, "-c", _ONNXSCRIPT, "{src}", "{dst}"]}


def find_models(dirs, only=None, skip=None) -> list:
    """(name, path, sample npz or None) for every *.onnx directly in each dir."""
    found = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(os.path.abspath(d), "*.onnx"))):
            stem = os.path.splitext(os.path.basename(path))[0]
            if only and not any(s in stem for s in only):
                continue
            if skip and any(s in stem for s in skip):
                continue
            sample = os.path.join(d, stem + ".npz")
            found.append((stem, path, sample if os.path.exists(sample) else None))
    return found


def walk(g):
    """Every node of a graph and of its subgraphs."""
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.HasField("g"):
                yield from walk(a.g)
            for x in a.graphs:
                yield from walk(x)


def all_nodes(m: onnx.ModelProto):
    yield from walk(m.graph)
    for f in m.functions:
        yield from walk(f)


def histogram(m: onnx.ModelProto) -> dict:
    return dict(Counter((n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                        for n in all_nodes(m)))


def _dims(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]


def interface(m: onnx.ModelProto) -> dict:
    """What a user of the file sees besides the nodes: I/O, overridable inputs, metadata."""
    inits = {t.name for t in m.graph.initializer}
    return {"inputs": [(i.name, i.type.tensor_type.elem_type, _dims(i)) for i in m.graph.input if i.name not in inits],
            "outputs": [(o.name, o.type.tensor_type.elem_type, _dims(o)) for o in m.graph.output],
            "overridable": sorted(i.name for i in m.graph.input if i.name in inits),
            "producer": f"{m.producer_name} {m.producer_version}".strip(), "doc": len(m.doc_string),
            "graph_doc": len(m.graph.doc_string), "metadata_props": len(m.metadata_props),
            "node_docs": sum(1 for n in all_nodes(m) if n.doc_string),
            "value_info": len(m.graph.value_info), "functions": len(m.functions),
            "opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import}, "ir": m.ir_version}


def feeds_for(m: onnx.ModelProto, sample) -> dict:
    if sample:
        with np.load(sample, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    rng = np.random.default_rng(1)
    inits = {t.name for t in m.graph.initializer}
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        feeds[vi.name] = (rng.random(dims) + 0.5).astype(dtype)
    return feeds


def _session(path_or_bytes, threads=1):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.log_severity_level = 3
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    return ort.InferenceSession(path_or_bytes, o, providers=["CPUExecutionProvider"])


def _same(g, w) -> tuple:
    """(equal within tolerance, max abs diff) for one output."""
    if isinstance(w, list) or isinstance(g, list):
        return g == w, 0.0
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape or g.dtype != w.dtype:
        return False, float("inf")
    if w.dtype.kind in "fc":
        if w.size == 0:
            return True, 0.0
        diff = float(np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
        scale = max(1.0, float(np.nanmax(np.abs(w))) if np.isfinite(w).any() else 1.0)
        nan_same = bool(np.array_equal(np.isnan(g), np.isnan(w)))
        return nan_same and bool(np.allclose(g, w, rtol=1e-3, atol=1e-4 * scale, equal_nan=True)), diff
    return bool(np.array_equal(g, w)), 0.0 if np.array_equal(g, w) else float("inf")


def check(src_outs, path, feeds) -> dict:
    """Validity and numerics of one result against the source's outputs."""
    r = {}
    try:
        onnx.checker.check_model(path, full_check=True)
        r["checker"] = "ok"
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        r["checker"] = " ".join(str(e).split())[:160]
    try:
        got = _session(path).run(None, feeds)
        results = [_same(g, w) for g, w in zip(got, src_outs)]
        r["numerics"] = "ok" if len(got) == len(src_outs) and all(ok for ok, _ in results) else "different outputs"
        r["max_abs_diff"] = max([d for _, d in results] or [0.0])
    except Exception as e:  # noqa: BLE001
        r["numerics"] = "ort: " + " ".join(str(e).split())[:160]
    r["valid"] = r["checker"] == "ok" and r["numerics"] == "ok"
    return r


def latency(paths: dict, feeds, runs: int) -> dict:
    """label -> {load: [s], run: [s]}; sessions created and run interleaved, rotated each round."""
    labels = list(paths)
    out = {k: {"load": [], "run": []} for k in labels}
    sessions = {}
    for rnd in range(3):
        for k in labels[rnd % len(labels):] + labels[:rnd % len(labels)]:
            t = time.perf_counter()
            s = _session(paths[k])
            out[k]["load"].append(time.perf_counter() - t)
            sessions[k] = s
    for k in labels:
        for _ in range(2):
            sessions[k].run(None, feeds)
    rnd, start = 0, time.perf_counter()
    # at least `runs` rounds; more (up to 10x) while a round is short, so that fast models get
    # about 1 s of runs per session
    while rnd < runs or (rnd < 10 * runs and time.perf_counter() - start < len(labels) * 1.0):
        for k in labels[rnd % len(labels):] + labels[:rnd % len(labels)]:
            t = time.perf_counter()
            sessions[k].run(None, feeds)
            out[k]["run"].append(time.perf_counter() - t)
        rnd += 1
    return out


_ENV = dict(os.environ)
_CWD = ["/"]


def run_tool(argv, timeout=900) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    try:
        # cwd: `python -m` puts the working directory first on sys.path, so a run started in a
        # checkout would import that checkout's rewriter instead of --rewriter-src
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_ENV, cwd=_CWD[0])
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout}s"}
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r = {"wall": wall, "cpu": cpu, "rss_mb": after.ru_maxrss / 1024}
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines() or ["failed"]
        r["error"] = f"exit {done.returncode}: {tail[-1][:160]}"
    return r


def _describe(path) -> dict:
    m = onnx.load(path)
    return {"nodes": sum(1 for _ in all_nodes(m)), "bytes": os.path.getsize(path), "ops": histogram(m),
            "interface": interface(m)}


def bench(models, tools, cmds, reps, runs, out_dir, log=print, save=None) -> dict:
    """The whole run; returns {model: {...}} (see module docstring). ``save(results, done)`` is
    called after each model of the first repetition and after each repetition, so that a run
    stopped early keeps what it measured."""
    results = {}
    for name, path, sample in models:
        m = onnx.load(path)
        results[name] = {"source": {**_describe(path), "path": path}, "tools": {t: {"wall": [], "cpu": []} for t in tools},
                         "sample": sample}
        del m
    for rep in range(reps):
        for i, (name, path, sample) in enumerate(models):
            res = results[name]
            k = (rep + i) % len(tools)
            for tool in tools[k:] + tools[:k]:
                dst = os.path.join(out_dir, f"{name}.{tool}.onnx")
                argv = [a.format(src=path, dst=dst) for a in cmds[tool]]
                r = run_tool(argv)
                tr = res["tools"][tool]
                if "error" in r:
                    tr["error"] = r["error"]
                    continue
                tr["wall"].append(r["wall"])
                tr["cpu"].append(r["cpu"])
                tr["rss_mb"] = max(tr.get("rss_mb", 0), r["rss_mb"])
                if rep == 0:
                    tr.update(_describe(dst))
            if rep == 0:
                _first_rep_checks(name, path, sample, res, tools, cmds, out_dir, runs)
                log(_progress(name, res, tools))
                if save:
                    save(results, f"repetition 1 of {reps}, {i + 1} of {len(models)} models")
        log(f"repetition {rep + 1} of {reps} done")
        if save:
            save(results, f"{rep + 1} of {reps} repetitions")
    return results


def _first_rep_checks(name, path, sample, res, tools, cmds, out_dir, runs) -> None:
    src = onnx.load(path)
    feeds = feeds_for(src, sample)
    del src
    try:
        src_outs = _session(path).run(None, feeds)
    except Exception as e:  # noqa: BLE001
        res["source"]["error"] = " ".join(str(e).split())[:160]
        return
    valid = {"source": path}
    for tool in tools:
        tr = res["tools"][tool]
        dst = os.path.join(out_dir, f"{name}.{tool}.onnx")
        if "nodes" not in tr:
            continue
        tr.update(check(src_outs, dst, feeds))
        if tr["valid"]:
            valid[tool] = dst
    if "rewriter" in tools and "nodes" in res["tools"]["rewriter"]:
        first = os.path.join(out_dir, f"{name}.rewriter.onnx")
        again = os.path.join(out_dir, f"{name}.rewriter2.onnx")
        r = run_tool([a.format(src=first, dst=again) for a in cmds["rewriter"]])
        if "error" in r:
            res["rewriter_again"] = {"error": r["error"]}
        else:
            res["rewriter_again"] = {**_describe(again), **check(src_outs, again, feeds), "wall": r["wall"]}
    try:
        lat = latency(valid, feeds, runs)
    except Exception as e:  # noqa: BLE001
        res["latency_error"] = " ".join(str(e).split())[:160]
        return
    for label, v in lat.items():
        target = res["source"] if label == "source" else res["tools"][label]
        target["ort_run"], target["ort_load"] = v["run"], v["load"]


def _progress(name, res, tools) -> str:
    parts = [f"{name}: {res['source']['nodes']}"]
    for t in tools:
        tr = res["tools"][t]
        mark = "" if tr.get("valid") else "!"
        parts.append(f"{t} {tr.get('nodes', 'err')}{mark}")
    again = res.get("rewriter_again", {})
    if "nodes" in again and again["nodes"] != res["tools"].get("rewriter", {}).get("nodes"):
        parts.append(f"rewriter x2 {again['nodes']}")
    return ", ".join(parts)


def med(values):
    return statistics.median(values) if values else float("nan")


def report(results, tools, reps, runs) -> str:
    """The human table: per model nodes, bytes, validity; totals; wins; times; ORT ratios."""
    lines = [f"{len(results)} models x {len(tools)} tools, {reps} interleaved repetitions of each whole process; "
             f"ORT latency: {runs} interleaved runs per session, 1 thread, default graph optimizations"]
    head = f"{'model':<40} {'in':>5}" + "".join(f" {t:>10}" for t in tools) + f" {'rw x2':>6}  notes"
    lines += [head, "-" * len(head)]
    totals = Counter()
    fewer = Counter()
    base_rw = Counter()
    for name, res in results.items():
        src = res["source"]["nodes"]
        row = f"{name:<40} {src:>5}"
        notes = []
        rw = res["tools"].get("rewriter", {})
        for t in tools:
            tr = res["tools"][t]
            if "nodes" not in tr:
                row += f" {'error':>10}"
                notes.append(f"{t}: {tr.get('error', '?')[:60]}")
                continue
            mark = "" if tr.get("valid") else "!"
            row += f" {str(tr['nodes']) + mark:>10}"
            if not tr.get("valid"):
                notes.append(f"{t}: {tr.get('checker') if tr.get('checker') != 'ok' else tr.get('numerics')}"[:70])
            if tr["bytes"] > res["source"]["bytes"]:
                notes.append(f"{t} grows {res['source']['bytes']}->{tr['bytes']} B")
        again = res.get("rewriter_again", {})
        row += f" {again.get('nodes', '-'):>6}"
        if "nodes" in again and "nodes" in rw and again["nodes"] != rw["nodes"]:
            notes.append(f"not idempotent {rw['nodes']}->{again['nodes']}")
        lines.append(row + ("  " + "; ".join(notes) if notes else ""))
        if all("nodes" in res["tools"][t] and res["tools"][t].get("valid") for t in tools):
            totals["in"] += src
            for t in tools:
                totals[t] += res["tools"][t]["nodes"]
        if "nodes" in rw and rw.get("valid"):
            for t in tools:
                tr = res["tools"][t]
                if t != "rewriter" and tr.get("valid"):
                    base_rw[t] += 1
                    if tr["nodes"] < rw["nodes"]:
                        fewer[t] += 1
                    elif tr["nodes"] > rw["nodes"]:
                        fewer[t + ">"] += 1
    lines.append("-" * len(head))
    if totals["in"]:
        lines.append("totals over models where every tool gave a valid result: in " + str(totals["in"]) + ", " + ", ".join(
            f"{t} {totals[t]} (-{(1 - totals[t] / totals['in']) * 100:.1f}%)" for t in tools))
    for t in tools:
        if t != "rewriter":
            lines.append(f"{t} leaves fewer nodes than rewriter on {fewer[t]} models, more on {fewer[t + '>']}, "
                         f"of {base_rw[t]} where both are valid")
    invalid = {t: sum(1 for r in results.values() if "nodes" in r["tools"][t] and not r["tools"][t].get("valid"))
               for t in tools}
    errors = {t: sum(1 for r in results.values() if "nodes" not in r["tools"][t]) for t in tools}
    lines.append("invalid or different results: " + ", ".join(f"{t} {invalid[t]}" for t in tools)
                 + "; failed runs: " + ", ".join(f"{t} {errors[t]}" for t in tools))
    for key, what in (("wall", "whole-process wall time"), ("cpu", "whole-process CPU time (user+sys)")):
        per = {t: [med(r["tools"][t][key]) for r in results.values() if r["tools"][t][key]] for t in tools}
        lines.append(f"median over models of the per-model median {what} (s): "
                     + ", ".join(f"{t} {med(v):.2f}" for t, v in per.items()))
        if "onnxslim" in tools and "rewriter" in tools:
            ratios = [med(r["tools"]["rewriter"][key]) / med(r["tools"]["onnxslim"][key]) for r in results.values()
                      if r["tools"]["rewriter"][key] and r["tools"]["onnxslim"][key]]
            slower = sum(1 for x in ratios if x > 1)
            lines.append(f"  rewriter / onnxslim per model: median {med(ratios):.2f}x, range "
                         f"{min(ratios):.2f}-{max(ratios):.2f}x; rewriter slower on {slower} of {len(ratios)}")
    for key, what in (("ort_run", "ORT run latency"), ("ort_load", "ORT session creation")):
        lines.append(f"{what}, result / source per model (median of interleaved runs):")
        for t in tools:
            ratios = sorted((med(r["tools"][t][key]) / med(r["source"][key]), n) for n, r in results.items()
                            if r["tools"][t].get(key) and r["source"].get(key))
            if ratios:
                vals = [x for x, _ in ratios]
                lines.append(f"  {t:<11} median {med(vals):.3f}x, range {vals[0]:.3f}x ({ratios[0][1]}) - "
                             f"{vals[-1]:.3f}x ({ratios[-1][1]}); > 1.05x on {sum(1 for x in vals if x > 1.05)} "
                             f"of {len(vals)}")
    return "\n".join(lines)


def latency_table(results, tools) -> str:
    lines = [f"{'model':<40} {'source ms':>16}" + "".join(f" {t + ' x':>14}" for t in tools)]
    for name, r in results.items():
        if not r["source"].get("ort_run"):
            continue
        s = r["source"]["ort_run"]
        row = f"{name:<40} {med(s) * 1e3:>7.2f} [{min(s) * 1e3:.1f}-{max(s) * 1e3:.1f}]"
        for t in tools:
            v = r["tools"][t].get("ort_run")
            row += f" {med(v) / med(s):>14.3f}" if v else f" {'-':>14}"
        lines.append(row)
    return "\n".join(lines)


def _versions(bench_venv) -> dict:
    code = "import importlib.metadata as m, sys\nfor p in sys.argv[1:]:\n    try: print(p, m.version(p))\n    except Exception: pass"
    out = {}
    for py, pkgs in ((sys.executable, ["onnx", "onnxruntime", "onnxscript", "onnx-ir"]),
                     (os.path.join(bench_venv, "bin", "python"), ["onnxslim", "onnxsim"])):
        try:
            done = subprocess.run([py, "-c", code, *pkgs], capture_output=True, text=True, timeout=60)
            out.update(line.split(" ", 1) for line in done.stdout.splitlines())
        except OSError:
            pass
    return out


def markdown(results, tools) -> str:
    """Per model nodes in / each tool (bold: fewest among valid results; '!' invalid or
    different), whole-process wall median, ORT latency ratio vs the source."""
    head = "| model | nodes in | " + " | ".join(tools) + " | " + " | ".join(f"{t} s" for t in tools) + \
        " | " + " | ".join(f"{t} ORT x" for t in tools) + " |"
    lines = [head, "|" + "---|" * (2 + 3 * len(tools))]
    for name, r in results.items():
        valid = [r["tools"][t]["nodes"] for t in tools if r["tools"][t].get("valid")]
        best = min(valid) if valid else None
        cells = []
        for t in tools:
            tr = r["tools"][t]
            if "nodes" not in tr:
                cells.append("error")
                continue
            c = str(tr["nodes"]) + ("" if tr.get("valid") else "!")
            cells.append(f"**{c}**" if tr.get("valid") and tr["nodes"] == best else c)
        secs = [f"{med(r['tools'][t]['wall']):.2f}" if r["tools"][t]["wall"] else "-" for t in tools]
        src = r["source"].get("ort_run")
        lat = [f"{med(r['tools'][t]['ort_run']) / med(src):.2f}" if src and r["tools"][t].get("ort_run") else "-"
               for t in tools]
        lines.append(f"| {name} | {r['source']['nodes']} | " + " | ".join(cells) + " | " + " | ".join(secs)
                     + " | " + " | ".join(lat) + " |")
    return "\n".join(lines)


def from_json(path, markdown_too=False) -> int:
    """Print the report of a saved (possibly partial) --json-out file."""
    data = json.load(open(path))
    meta, results = data["meta"], data["results"]
    tools = meta["tools"]
    done = {n: r for n, r in results.items() if all("nodes" in r["tools"][t] or "error" in r["tools"][t] for t in tools)}
    print(f"from {path}: {meta.get('done', '?')}; {len(done)} of {len(results)} models measured")
    print(report(done, tools, meta.get("reps", "?"), meta.get("runs", "?")))
    print()
    print(latency_table(done, tools))
    if markdown_too:
        print()
        print(markdown(done, tools))
    return 0


def main(args) -> int:
    """Entry from bench_optimize.py --models DIR ..."""
    tools = [t for t in args.tools.split(",")]
    cmds = commands(args.bench_venv, args.rewriter_src)
    if args.rewriter_src:
        _ENV["PYTHONPATH"] = os.path.abspath(args.rewriter_src)
    for t in tools:
        if not os.path.exists(cmds[t][0]):
            raise SystemExit(f"{t}: {cmds[t][0]} not found (install it in {args.bench_venv})")
    models = find_models(args.models, args.only, args.skip)
    out_dir = os.path.abspath(args.keep or os.path.join("/tmp", f"bench_optimize_{os.getpid()}"))
    os.makedirs(out_dir, exist_ok=True)
    _CWD[0] = out_dir
    log = (lambda s: print(s, file=sys.stderr, flush=True))
    load0 = os.getloadavg()
    t0 = time.time()
    log(f"{len(models)} models; load average at start {load0[0]:.2f}; results in {out_dir}")
    def save(results, done):
        if args.json_out:
            with open(args.json_out + ".partial", "w") as f:
                json.dump({"meta": {"done": done, "argv": sys.argv, "tools": tools}, "results": results}, f)
            os.replace(args.json_out + ".partial", args.json_out)

    results = bench(models, tools, cmds, args.reps, args.runs, out_dir, log, save)
    meta = {"done": "all", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)), "seconds": time.time() - t0,
            "load_start": load0, "load_end": os.getloadavg(), "argv": sys.argv, "tools": tools,
            "commands": cmds, "reps": args.reps, "runs": args.runs, "rewriter_src": args.rewriter_src,
            "versions": _versions(args.bench_venv)}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"bench_optimize --models {' '.join(args.models)}  ({meta['date']}, {meta['seconds'] / 60:.1f} min, "
          f"load average {load0[0]:.2f} -> {meta['load_end'][0]:.2f})")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
          + (f"; rewriter from {args.rewriter_src}" if args.rewriter_src else ""))
    print(report(results, tools, args.reps, args.runs))
    print()
    print(latency_table(results, tools))
    return 0
