"""Lowered ``ai.onnx.ml`` / ``com.microsoft`` models against the originals (issue 42's bar), per model:

- the ops lowered (``rewriter.convert.lower_ops.lower_ops``; a ZipMap whose maps are a graph output
  becomes its probabilities' tensor, compared with the original's maps stacked in the label order
  the result's metadata records; where a node reads the maps, every other op, and the row says
  "ZipMap kept"),
- onnx.checker full_check of the result ("ok-vi": passes once the input's own value_info is
  dropped, which declares shapes its values contradict),
- the match with ONNX Runtime's run of the original on the sample (worst relative L2 over float
  outputs, labels and other exact outputs equal; "bit" when every output is bit-identical),
- the lowered size against the original's, and ONNX Runtime's latency of both (one thread, default
  graph optimizations; ``--runs`` interleaved runs of one then the other: median and range, ratio
  of the medians),
- the lowered model in OpenVINO 2026.4 and tract 0.23 (tools/runtime_run_<runtime>.py in the venvs
  tools/runtime_venvs.py makes) against ONNX Runtime's run of the original: "ok" (labels equal,
  relative L2 <= 1e-5, 2e-3 for float16 outputs: their models compute in half on both sides),
  "DIFF" with the error, or "refused" with the runtime's first words,
- Hummingbird (hummingbird-ml's PyTorch backend reading the original ONNX file, run by
  tools/corpus/hummingbird_run.py in ``--hummingbird-python``'s venv) where it accepts the model:
  its predict/predict_proba against the original's outputs, or "refused".

    python bench/bench_lowering.py [--corpus DIR ...] [--only SUBSTR ...] [--runs 21] [--json FILE]
        [--no-runtimes] [--hummingbird-python /work/venvs/hummingbird/bin/python]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "tools" / "corpus")]

import runtime_venvs  # noqa: E402  tools/
from lowering_report import compare, in_label_order  # noqa: E402  tools/corpus/

CORPORA = ["/work/corpus/ml", "/work/corpus/contrib", "/work/corpus/quant"]
RUNTIMES = [("openvino", "2026.4"), ("tract", "0.23")]
TOLERANCE, HALF_TOLERANCE = 1e-5, 2e-3
ZIPMAP = ("ai.onnx.ml", "ZipMap")


def discover(corpora: list[str], only: list[str]) -> list[Path]:
    """Models with a sample whose nodes include an ai.onnx.ml / com.microsoft op (any scope)."""
    import onnx

    from rewriter.graph import traversal

    found = []
    for folder in corpora:
        for path in sorted(Path(folder).glob("*.onnx")):
            if not path.with_suffix(".npz").exists() or (only and not any(s in path.name for s in only)):
                continue
            model = onnx.load(str(path), load_external_data=False)
            if any(n.domain in ("ai.onnx.ml", "com.microsoft") for n in traversal.all_nodes(model.graph)):
                found.append(path)
    return found


def lower(model):
    """(lowered, report, note): every op with a lowering, else every op but ZipMap."""
    from rewriter.convert.lower_ops import lower_ops
    from rewriter.convert.lowering import LoweringBlocked, lowerable_ops

    try:
        return (*lower_ops(model), "")
    except LoweringBlocked as e:
        if not any(b.op == "ZipMap" for b in e.blockers):
            raise
        return (*lower_ops(model, lowerable_ops() - {ZIPMAP}), "ZipMap kept")


def checker(model) -> str:
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        return "ok"
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        bare = onnx.ModelProto()
        bare.CopyFrom(model)
        del bare.graph.value_info[:]
        try:
            onnx.checker.check_model(bare, full_check=True)
            return "ok-vi"
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            return "FAIL: " + str(e).strip().splitlines()[0][:60]


def session(data: bytes):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def latency(first, second, feeds: dict, runs: int) -> tuple[list, list]:
    """Seconds per run of each session, interleaved (the order alternates), after one warm-up each."""
    times = ([], [])
    for s in (first, second):
        s.run(None, feeds)
    for i in range(runs):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            s = (first, second)[k]
            t0 = time.perf_counter()
            s.run(None, feeds)
            times[k].append(time.perf_counter() - t0)
    return times


def judged(want: list, got: list) -> tuple[bool, dict]:
    c = compare(want, got)
    half = any(np.asarray(w).dtype == np.float16 for w in want if not isinstance(w, list))
    return c["labels_equal"] and c["rel_l2"] <= (HALF_TOLERANCE if half else TOLERANCE), c


def measure(path: Path, runs: int, folder: Path) -> dict:
    """One model: lowering, checker, ONNX Runtime's match, size and latency; the lowered file and its
    inputs written to ``folder`` for the runtimes."""
    import onnx

    from rewriter.errors import RewriterError

    model = onnx.load(str(path))
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    with np.load(path.with_suffix(".npz"), allow_pickle=True) as data:
        feeds = {k: (data[k].astype(object) if data[k].dtype.kind == "U" else data[k]) for k in names}
    row = {"model": path.stem, "corpus": path.parent.name}
    try:
        lowered, report, note = lower(model)
    except RewriterError as e:
        return dict(row, status="blocked", reason=str(e)[:200])
    orig_bytes, low_bytes = model.SerializeToString(), lowered.SerializeToString()
    first, second = session(orig_bytes), session(low_bytes)
    want = in_label_order(first.run(None, feeds), lowered)  # (ZipMap's maps as the lowered tensor)
    ok, c = judged(want, second.run(None, feeds))
    t0, t1 = latency(first, second, feeds, runs)
    ops = collections.Counter({f"{o}": n for (d, o), n in report.lowered.items()})
    row.update(status="lowered", note=note, ops=dict(ops), checker=checker(lowered), match=ok, **c,
               bytes=(len(orig_bytes), len(low_bytes)), ort_ms=[[1e3 * min(t), 1e3 * statistics.median(t),
                                                                  1e3 * max(t)] for t in (t0, t1)])
    (folder / f"{path.stem}.onnx").write_bytes(named_dims(lowered).SerializeToString())
    np.savez(folder / f"{path.stem}.in.npz", **{k: (v.astype(str) if v.dtype == object else v)
                                               for k, v in feeds.items()})
    np.savez(folder / f"{path.stem}.want.npz", **{f"o{i}": (w.astype(str) if w.dtype == object else w)
                                                 for i, w in enumerate(want) if isinstance(w, np.ndarray)})
    row["outputs"] = [o.name for o in lowered.graph.output]
    return row


NOISE = ("RuntimeError: Exception from", "Exception from", "Check 'false' failed", "FrontEnd API failed with OpConv",
         "Model wasn't fully converted", "Failed operations detailed log")


def _first_words(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip() and not ln.strip().startswith(NOISE)]
    return (lines[0] if lines else str(text))[:90]


def named_dims(model):
    """A copy whose graph inputs' anonymous dims (neither value nor name) are named: tract refuses
    them; the meaning (an unknown dim) is the same."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for i, v in enumerate(copy.graph.input):
        for j, d in enumerate(v.type.tensor_type.shape.dim if v.type.HasField("tensor_type") else []):
            if not d.HasField("dim_value") and not d.dim_param:
                d.dim_param = f"unk_{i}_{j}"
    return copy


def _want(folder: Path, row: dict) -> list:
    with np.load(folder / f"{row['model']}.want.npz", allow_pickle=True) as d:
        return [d[f"o{i}"] for i in range(len(d.files))]


def run_runtime(runtime: str, release: str, rows: list[dict], folder: Path, timeout: float) -> None:
    """Each lowered model in the release (its runner, one batch, restarted after a crash or a hang)."""
    import runtime_probe

    python = runtime_venvs.venv_python(runtime, release)
    key = f"{runtime} {release}"
    if python is None:
        for row in rows:
            row[key] = "no venv"
        return
    lines = [{"id": r["model"], "model": str(folder / f"{r['model']}.onnx"),
              "inputs": str(folder / f"{r['model']}.in.npz"),
              "outputs": str(folder / f"{r['model']}.{runtime}.npz"), "want": r["outputs"]} for r in rows]
    results, _ = runtime_probe.run_batch(python, runtime_venvs.runner(runtime), lines, folder, timeout,
                                         log=lambda *a: None)
    crashed = [line for line in lines if results.get(line["id"], {}).get("stage") == "crash"]
    for line in crashed:  # once more, alone: a crash can come from the cases run before it in the process
        again, _ = runtime_probe.run_batch(python, runtime_venvs.runner(runtime), [line], folder, timeout,
                                           log=lambda *a: None)
        results[line["id"]] = dict(again.get(line["id"], {}), retried=True)
    for row in rows:
        res = results.get(row["model"]) or {"ok": False, "error": "no result"}
        if not res.get("ok"):
            row[key] = f"refused ({res.get('stage', '?')}): {_first_words(res.get('error', ''))}"
            continue
        with np.load(folder / f"{row['model']}.{runtime}.npz", allow_pickle=True) as d:
            got = [d[n] if n in d.files else d[d.files[i]] for i, n in enumerate(row["outputs"][:len(d.files)])]
        want = _want(folder, row)
        got = [g.astype(str) if g.dtype.kind in "OUS" else g for g in got]
        ok, c = judged([w.astype(str) if w.dtype.kind in "OUS" else w for w in want], got)
        row[key] = ("ok" if ok else f"DIFF rel L2 {c['rel_l2']:.1e}, labels {'=' if c['labels_equal'] else '!='}") + \
            (" (alone, after a crash in the batch)" if res.get("retried") else "")


def run_hummingbird(python: str, rows: list[dict], paths: dict, folder: Path, timeout: float) -> None:
    """Hummingbird on each original ONNX-ML model (one process, its own venv)."""
    cases = folder / "hummingbird.jsonl"
    cases.write_text("".join(json.dumps({"id": r["model"], "model": str(paths[r["model"]]),
                                         "inputs": str(folder / f"{r['model']}.in.npz"),
                                         "outputs": str(folder / f"{r['model']}.hb.npz")}) + "\n" for r in rows))
    try:
        done = subprocess.run(["nice", python, str(ROOT / "tools" / "corpus" / "hummingbird_run.py"), str(cases)],
                              capture_output=True, text=True, timeout=timeout)
        results = {o["id"]: o for o in (json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{"))
                   if "id" in o}
    except (OSError, subprocess.TimeoutExpired) as e:
        results = {r["model"]: {"ok": False, "error": f"hummingbird_run: {e}"} for r in rows}
    for row in rows:
        res = results.get(row["model"]) or {"ok": False, "error": "no result (crashed)"}
        if not res["ok"]:
            row["hummingbird"] = f"refused: {_first_words(res['error'])}"
            continue
        with np.load(folder / f"{row['model']}.hb.npz", allow_pickle=True) as d:
            got = [d["label"], d["proba"]] if res["kind"] == "classifier" else [d["value"]]
        row["hummingbird"] = _hb_verdict(_want(folder, row), got)


def _hb_verdict(want: list, got: list) -> str:
    """Hummingbird's outputs against the original's: labels, then scores (same shape or not)."""
    parts, ok = [], True
    for w, g in zip(want, got):
        if g.size == w.size:
            g = g.reshape(w.shape)
        if g.shape != w.shape:
            parts.append(f"scores {list(g.shape)} vs {list(w.shape)}")
            ok = False
            continue
        good, c = judged([w], [g])
        ok &= good
        if not good:
            parts.append("labels !=" if not c["labels_equal"] else f"rel L2 {c['rel_l2']:.1e}")
    return "ok" if ok else "DIFF " + ", ".join(parts)


def _ms(t: list) -> str:
    return f"{t[1]:.3g} [{t[0]:.3g}-{t[2]:.3g}]"


def print_table(rows: list[dict], runtimes: list[str]) -> None:
    cols = ["model", "ops lowered", "checker", "match vs ORT", "KB orig->lowered", "ORT ms orig", "ORT ms lowered",
            "ratio", *runtimes, "Hummingbird"]
    print(" | ".join(cols))
    for r in rows:
        if r["status"] != "lowered":
            print(f"{r['model']} | BLOCKED: {r['reason'][:120]}")
            continue
        ops = ", ".join(f"{o} x{n}" if n > 1 else o for o, n in sorted(r["ops"].items()))
        match = ("bit" if r["bit_identical"] else f"{r['rel_l2']:.1e}") + ("" if r["labels_equal"] else " LABELS!=") + \
            ("" if r["match"] else " MISMATCH") + (f" ({r['note']})" if r["note"] else "")
        size = f"{r['bytes'][0] / 1024:.0f}->{r['bytes'][1] / 1024:.0f}"
        ratio = r["ort_ms"][1][1] / r["ort_ms"][0][1]
        print(" | ".join([r["model"], ops, r["checker"], match, size, _ms(r["ort_ms"][0]), _ms(r["ort_ms"][1]),
                          f"{ratio:.2f}", *(r.get(k, "-") for k in runtimes), r.get("hummingbird", "-")]))


def print_totals(rows: list[dict], runtimes: list[str]) -> None:
    done = [r for r in rows if r["status"] == "lowered"]
    full = [r for r in done if not r["note"]]
    print(f"\nmodels: {len(rows)}; lowered: {len(done)} (every op: {len(full)}, all but ZipMap: "
          f"{len(done) - len(full)}); "
          f"checker ok: {sum(r['checker'].startswith('ok') for r in done)}; match ORT: {sum(r['match'] for r in done)} "
          f"(bit-identical: {sum(r['bit_identical'] for r in done)}); blocked: {len(rows) - len(done)}")
    for key in [*runtimes, "hummingbird"]:
        values = collections.Counter(r.get(key, "-").split(" ")[0].rstrip(":") for r in full)
        print(f"{key} (models lowered fully): " + ", ".join(f"{k} {n}" for k, n in values.most_common()))
    ratios = [r["ort_ms"][1][1] / r["ort_ms"][0][1] for r in done]
    if ratios:
        print(f"ORT latency lowered/original (median per model): median {statistics.median(ratios):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", nargs="*", default=CORPORA)
    p.add_argument("--only", nargs="*", default=[], help="model name substrings")
    p.add_argument("--runs", type=int, default=21, help="interleaved ONNX Runtime runs per model")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--no-runtimes", action="store_true")
    p.add_argument("--hummingbird-python", default="/work/venvs/hummingbird/bin/python")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    import onnxruntime

    paths = {path.stem: path for path in discover(args.corpus, args.only)}
    print(f"bench_lowering {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; onnxruntime "
          f"{onnxruntime.__version__}; {len(paths)} models", flush=True)
    runtimes = [] if args.no_runtimes else [f"{rt} {rel}" for rt, rel in RUNTIMES]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = [measure(path, args.runs, folder) for path in paths.values()]
        done = [r for r in rows if r["status"] == "lowered"]
        for rt, rel in ([] if args.no_runtimes else RUNTIMES):
            run_runtime(rt, rel, done, folder, args.timeout)
        if args.hummingbird_python and os.path.exists(args.hummingbird_python):
            run_hummingbird(args.hummingbird_python, [r for r in done if r["corpus"] == "ml"], paths, folder,
                            args.timeout * 10)
    print_table(rows, runtimes)
    print_totals(rows, runtimes)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
