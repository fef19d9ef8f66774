"""Check `rewriter convert --dtype float16 --target onnxruntime==X` against real old ORT releases.

    python tools/half_target_check.py [--release 1.15=/work/venvs/ort115 ...]
                                      [--corpus DIR ...] [--workdir DIR] [--jobs N]
                                      [--max-mb 100] [--only SUBSTRING ...]

For each release R (a MAJOR.MINOR and a venv whose python has that onnxruntime) and each
MODEL.onnx (with MODEL.npz beside it: one array per graph input) in the corpus folders:

1. convert with the project's python:
       python -m rewriter convert MODEL.onnx --dtype float16 --target onnxruntime==R -o OUT -q
   (cwd is the work dir, PYTHONPATH holds the project, so nothing lands in the project);
2. in R's venv (a subprocess running this same file in --worker mode, which imports only
   numpy and onnxruntime): load the float32 SOURCE and OUT in an InferenceSession with the
   CPUExecutionProvider and default options, run both on the sample;
3. compare every float output of OUT with the SOURCE's output in the same release by
   relative L2 error ||a-b||/||a|| (a = source).  NaN/inf in OUT where the source is
   finite, or a shape mismatch, is a failure (error = inf).  When the source itself does not
   load or run in R (opset/IR too new), the reference is the source run in the project's
   own onnxruntime, and the row says so.

Per-model table and a per-release summary go to stdout; every row, with full error texts,
goes to WORKDIR/results.json.

The venvs: `python -m venv /work/venvs/ort115 && /work/venvs/ort115/bin/pip install
onnxruntime==1.15.1 "numpy<2"` (likewise ort117 with 1.17.3, ort120 with 1.20.1).
"""

from __future__ import annotations

import json
import os
import sys


# --------------------------------------------------------------------------- worker
# Runs in an old-release venv: numpy and onnxruntime only.

def _worker(model: str, sample: str, out_npz: str) -> None:
    import numpy as np

    def emit(obj):
        sys.stdout.write("\n" + json.dumps(obj) + "\n")
        sys.stdout.flush()

    import onnxruntime as ort

    info = {"ort": ort.__version__}
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1  # the machine is shared: one core per job
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        emit({**info, "ok": False, "stage": "load", "error": f"{type(exc).__name__}: {exc}"})
        return
    try:
        z = np.load(sample, allow_pickle=False)
        keys = list(z.keys())
        names = [i.name for i in sess.get_inputs()]
        if set(keys) >= set(names):
            feed = {n: z[n] for n in names}
        elif len(keys) == len(names):
            feed = {n: z[k] for n, k in zip(names, keys)}
        else:
            raise ValueError(f"sample keys {keys} do not match inputs {names}")
        onames = [o.name for o in sess.get_outputs()]
        res = sess.run(None, feed)
    except Exception as exc:  # noqa: BLE001
        emit({**info, "ok": False, "stage": "run", "error": f"{type(exc).__name__}: {exc}"})
        return
    arrays, kinds = {}, {}
    for i, (n, v) in enumerate(zip(onames, res)):
        key = f"o{i}"
        try:
            a = np.asarray(v)
            if a.dtype == object:
                raise TypeError("object")
            arrays[key] = a
            kinds[n] = key
        except Exception:  # noqa: BLE001
            kinds[n] = None
    np.savez(out_npz, **arrays)
    emit({**info, "ok": True, "outputs": onames, "keys": kinds})


# --------------------------------------------------------------------------- driver

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)
DEFAULT_RELEASES = ["1.15=/work/venvs/ort115", "1.17=/work/venvs/ort117", "1.20=/work/venvs/ort120"]
DEFAULT_CORPUS = ["/work/corpus/fp16", "/work/corpus/fp16_trained"]
RTOL = 1e-2


def _last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def _run_in(python: str, model: str, sample: str, out_npz: str, timeout: float) -> dict:
    import subprocess

    cmd = [python, os.path.abspath(__file__), "--worker", model, sample, out_npz]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return {"ok": False, "stage": "timeout", "error": f"timed out after {timeout}s"}
    obj = _last_json(p.stdout)
    if obj is None:
        tail = (p.stderr.strip().splitlines() or [""])[-1]
        return {"ok": False, "stage": "crash", "error": f"exit {p.returncode}: {tail}"}
    return obj


def _outputs(res: dict, npz: str):
    import numpy as np

    z = np.load(npz)
    return {n: (z[k] if k is not None else None) for n, k in res["keys"].items()}


def _compare(ref: dict, got: dict):
    """Per float output: relative L2 error (inf for failures) and notes."""
    import numpy as np

    errs, notes = {}, []
    for name, a in ref.items():
        if a is None or a.dtype.kind != "f":
            if a is not None and name in got and got[name] is not None:
                b = got[name]
                if a.shape != b.shape or not np.array_equal(a, b):
                    notes.append(f"non-float output {name} differs")
            continue
        b = got.get(name)
        if b is None:
            errs[name] = float("inf")
            notes.append(f"{name}: missing")
            continue
        if b.dtype != a.dtype:
            notes.append(f"{name}: dtype {b.dtype} (source {a.dtype})")
        if a.shape != b.shape:
            errs[name] = float("inf")
            notes.append(f"{name}: shape {list(b.shape)} vs source {list(a.shape)}")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        fin = np.isfinite(a64)
        if not np.all(np.isfinite(b64[fin])):
            errs[name] = float("inf")
            notes.append(f"{name}: {int((~np.isfinite(b64[fin])).sum())} NaN/inf where source finite")
            continue
        if not np.array_equal(np.isfinite(b64), fin):
            notes.append(f"{name}: nonfinite pattern differs from source")
        d = np.linalg.norm((a64 - b64)[fin])
        na = np.linalg.norm(a64[fin])
        errs[name] = float(d / na) if na > 0 else (0.0 if d == 0 else float("inf"))
    return errs, notes


def _file_size(path: str) -> int:
    """The .onnx plus the external-data files it names."""
    import onnx

    total = os.path.getsize(path)
    m = onnx.load(path, load_external_data=False)
    locs = set()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from rewriter.io.tensors import all_tensors

    for t, _ in all_tensors(m):
        for e in t.external_data:
            if e.key == "location":
                locs.add(e.value)
    for loc in locs:
        f = os.path.join(os.path.dirname(path), loc)
        if os.path.exists(f):
            total += os.path.getsize(f)
    return total


def main(argv=None) -> int:
    import argparse
    import subprocess
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", help="VERSION=VENV (default: 1.15, 1.17, 1.20 in /work/venvs)")
    ap.add_argument("--corpus", action="append", help="folder of MODEL.onnx + MODEL.npz")
    ap.add_argument("--workdir", default="/work/half_target_check")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-mb", type=float, default=100.0)
    ap.add_argument("--only", action="append", help="only models whose name contains this")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args(argv)

    releases = []
    for spec in args.release or DEFAULT_RELEASES:
        ver, venv = spec.split("=", 1)
        releases.append((ver, os.path.join(venv, "bin", "python")))
    models = []
    for d in args.corpus or DEFAULT_CORPUS:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".onnx"):
                continue
            path = os.path.join(d, f)
            name = f[:-5]
            sample = os.path.join(d, name + ".npz")
            if args.only and not any(s in name for s in args.only):
                continue
            if not os.path.exists(sample):
                print(f"skip {path}: no sample", file=sys.stderr)
                continue
            if os.path.getsize(path) > args.max_mb * 1e6:
                print(f"skip {path}: over {args.max_mb} MB", file=sys.stderr)
                continue
            models.append((os.path.basename(d), name, path, sample))

    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": PROJECT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    ref_locks: dict = {}
    ref_guard = threading.Lock()

    def own_reference(group, name, path, sample):
        """The source run in the project's own onnxruntime (fallback reference)."""
        key = f"{group}/{name}"
        with ref_guard:
            lock = ref_locks.setdefault(key, threading.Lock())
        with lock:
            d = os.path.join(work, "own", group)
            os.makedirs(d, exist_ok=True)
            npz = os.path.join(d, name + ".out.npz")
            js = os.path.join(d, name + ".json")
            if os.path.exists(js):
                with open(js) as fh:
                    return json.load(fh), npz
            res = _run_in(sys.executable, path, sample, npz, args.timeout)
            with open(js, "w") as fh:
                json.dump(res, fh)
            return res, npz

    def task(rel, py, group, name, path, sample):
        row = {"release": rel, "group": group, "model": name}
        d = os.path.join(work, "ort" + rel.replace(".", ""), group)
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, name + ".onnx")
        for f in os.listdir(d):  # stale results of an earlier run
            if f.startswith(name + ".") or f == name + ".onnx":
                os.remove(os.path.join(d, f))
        cmd = [sys.executable, "-m", "rewriter", "convert", path, "--dtype", "float16",
               "--target", f"onnxruntime=={rel}", "-o", out, "-q"]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work,
                               timeout=args.timeout)
            rc, stderr, stdout = p.returncode, p.stderr, p.stdout
        except subprocess.TimeoutExpired:
            rc, stderr, stdout = -999, f"timed out after {args.timeout}s", ""
        row["convert_seconds"] = round(time.time() - t0, 1)
        row["convert_rc"] = rc
        row["convert_stdout"] = stdout.strip()
        row["convert_stderr"] = stderr.strip()
        row["convert_msg"] = (stderr.strip().splitlines() or [""])[0]
        row["converted"] = rc == 0 and os.path.exists(out)
        src_npz = os.path.join(d, name + ".src.npz")
        src = _run_in(py, path, sample, src_npz, args.timeout)
        row["source_loads"] = src.get("ok") or src.get("stage") == "run"
        row["source_runs"] = bool(src.get("ok"))
        row["source_error"] = None if src.get("ok") else f"{src.get('stage')}: {src.get('error')}"
        if not row["converted"]:
            return row
        row["size_ratio"] = round(_file_size(out) / _file_size(path), 3)
        out_npz = os.path.join(d, name + ".out.npz")
        res = _run_in(py, out, sample, out_npz, args.timeout)
        row["loads"] = bool(res.get("ok") or res.get("stage") == "run")
        row["runs"] = bool(res.get("ok"))
        row["error"] = None if res.get("ok") else f"{res.get('stage')}: {res.get('error')}"
        if not row["runs"]:
            return row
        if src.get("ok"):
            ref, row["reference"] = _outputs(src, src_npz), f"source in ORT {rel}"
        else:
            own, own_npz = own_reference(group, name, path, sample)
            if not own.get("ok"):
                row["reference"] = "none (source fails in the project's ORT too)"
                return row
            ref, row["reference"] = _outputs(own, own_npz), f"source in ORT {own.get('ort')} (project's)"
        errs, notes = _compare(ref, _outputs(res, out_npz))
        row["errors"] = errs
        row["notes"] = notes
        row["worst"] = max(errs.values()) if errs else None
        row["within"] = row["worst"] is not None and row["worst"] <= RTOL
        for f in (src_npz, out_npz):
            try:
                os.remove(f)
            except OSError:
                pass
        return row

    tasks = [(rel, py, *m) for rel, py in releases for m in models]
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as ex:
        futs = [ex.submit(task, *t) for t in tasks]
        for i, f in enumerate(futs, 1):
            try:
                r = f.result()
            except Exception as exc:  # noqa: BLE001
                t = tasks[i - 1]
                r = {"release": t[0], "group": t[2], "model": t[3], "harness_error": repr(exc)}
            rows.append(r)
            print(f"[{i}/{len(tasks)}] {r['release']} {r['group']}/{r['model']}: "
                  f"{_status(r)}", file=sys.stderr, flush=True)

    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump(rows, fh, indent=1)

    # table
    hdr = f"{'release':7} {'model':52} {'conv':4} {'srcld':5} {'load':4} {'run':3} {'worst err':>10} {'size':>5}  status"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        w = r.get("worst")
        ws = "-" if w is None else f"{w:.3g}"
        print(f"{r['release']:7} {(r['group'] + '/' + r['model'])[:52]:52} "
              f"{_yn(r.get('converted')):4} {_yn(r.get('source_loads')):5} {_yn(r.get('loads')):4} "
              f"{_yn(r.get('runs')):3} {ws:>10} {r.get('size_ratio', '-'):>5}  {_status(r)}")
    print()
    for rel, _ in releases:
        rs = [r for r in rows if r["release"] == rel]
        conv = [r for r in rs if r.get("converted")]
        refused = [r for r in rs if not r.get("converted")]
        loads = [r for r in conv if r.get("loads")]
        runs = [r for r in conv if r.get("runs")]
        within = [r for r in runs if r.get("within")]
        worst = [r for r in runs if r.get("worst") is not None]
        wr = max(worst, key=lambda r: r["worst"]) if worst else None
        ratios = [r["size_ratio"] for r in conv if "size_ratio" in r]
        print(f"onnxruntime {rel}: {len(rs)} models; converted {len(conv)}, refused {len(refused)}, "
              f"source loads in {rel}: {sum(1 for r in rs if r.get('source_loads'))}; "
              f"result loads {len(loads)}/{len(conv)}, runs {len(runs)}/{len(conv)}, "
              f"within {RTOL:g} {len(within)}/{len(runs)}; "
              + (f"worst {wr['worst']:.3g} ({wr['model']})" if wr else "worst -")
              + (f"; size ratio median {sorted(ratios)[len(ratios) // 2]:.3f}" if ratios else ""))
        for r in refused:
            print(f"    refused {r['model']}: rc {r.get('convert_rc')}: {r.get('convert_msg')}")
        for r in conv:
            if not r.get("runs"):
                print(f"    BUG {r['model']}: {r.get('error')}")
            elif not r.get("within"):
                print(f"    over {RTOL:g} {r['model']}: {r.get('errors')} {r.get('notes')}")
    return 0


def _yn(v):
    return "-" if v is None else ("y" if v else "N")


def _status(r):
    if "harness_error" in r:
        return "HARNESS " + r["harness_error"]
    if not r.get("converted"):
        return f"refused rc={r.get('convert_rc')}: {r.get('convert_msg')}"[:160]
    if not r.get("runs"):
        return f"BUG {r.get('error')}"[:200]
    if r.get("worst") is None:
        return "no float output compared" + (f" ({r.get('reference')})" if r.get("reference") else "")
    s = "ok" if r.get("within") else "OVER 1e-2"
    if r.get("reference", "").endswith("(project's)"):
        s += " [ref: project's ORT]"
    if r.get("notes"):
        s += " " + "; ".join(r["notes"])[:120]
    return s


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        _worker(*sys.argv[2:5])
        sys.exit(0)
    sys.exit(main())
