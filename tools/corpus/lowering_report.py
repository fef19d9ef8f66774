#!/usr/bin/env python
"""Lower the ``ai.onnx.ml`` ops of every model of a corpus to standard ONNX and compare with the original.

    python tools/corpus/lowering_report.py [--corpus /work/corpus/ml] [--reference] [--threads N] [--json]

For each model with a sample input (``<name>.npz``): ``lower_ops(model)`` (every op that has a
lowering; a ZipMap whose maps are a graph output becomes its probabilities' tensor, compared with
the original's maps stacked in the label order the result's metadata records); when that is
refused because of ZipMap (its maps read by another node), again with every op but ZipMap. The
lowered model must pass ``onnx.checker`` (full_check) and hold only standard nodes (or only ZipMap
besides them); ONNX Runtime runs original and result on the sample: float outputs must agree to
relative L2 <= 1e-5, labels and other non-float outputs exactly; ``bit`` says whether every float output is bit-identical. ``--reference`` also runs the
fully lowered model in onnx.reference (slow on big ensembles). ``--threads``: ONNX Runtime's
intra-op threads (default 1: the kernels' one-thread order; 0 = ONNX Runtime's default).
Prints one row per model, the blockers by op and reason, and the totals.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

TOLERANCE = 1e-5


def _session(model, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _rel_l2(want: np.ndarray, got: np.ndarray) -> float:
    w, g = want.astype(np.float64), got.astype(np.float64)
    finite = np.isfinite(w) & np.isfinite(g)
    if not np.array_equal(np.isnan(w), np.isnan(g)) or not np.array_equal(w[~finite & ~np.isnan(w)],
                                                                           g[~finite & ~np.isnan(g)]):
        return float("inf")
    norm = np.linalg.norm(w[finite])
    diff = np.linalg.norm(w[finite] - g[finite])
    return float(diff / norm) if norm else float(diff)


def in_label_order(want: list, lowered) -> list:
    """``want`` (ONNX Runtime's outputs of the original, in ``lowered``'s output order) with each
    sequence of maps that ``lowered`` made a tensor stacked as that tensor: one row per map, one
    float32 column per label in the order its metadata (``rewriter.zipmap.<output>``) records."""
    labels = {p.key[len("rewriter.zipmap."):]: json.loads(p.value) for p in lowered.metadata_props
              if p.key.startswith("rewriter.zipmap.")}
    names = [o.name for o in lowered.graph.output]
    return [np.asarray([[m[k] for k in labels[n]] for m in w], np.float32) if isinstance(w, list) and n in labels
            else w for w, n in zip(want, names)]


def compare(want: list, got: list) -> dict:
    """Worst relative L2 over float outputs, whether labels (and other exact outputs) agree and
    whether float outputs are bit-identical; sequences of maps compared entry by entry."""
    worst, labels, bit = 0.0, True, True
    for w, g in zip(want, got):
        if isinstance(w, list):  # ZipMap's maps
            keys_same = [sorted(a) == sorted(b) for a, b in zip(w, g)]
            labels &= all(keys_same) and len(w) == len(g)
            for a, b in zip(w, g):
                for k in a:
                    worst = max(worst, _rel_l2(np.float32([a[k]]), np.float32([b.get(k, np.nan)])))
            continue
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape:
            labels = False
        elif w.dtype.kind == "f":
            worst = max(worst, _rel_l2(w, g))
            bit &= bool(np.array_equal(w.view(np.uint8), g.astype(w.dtype).view(np.uint8)))
        else:
            labels &= bool(np.array_equal(w.astype(str) if w.dtype.kind in "OUS" else w,
                                          g.astype(str) if g.dtype.kind in "OUS" else g))
    return {"rel_l2": worst, "labels_equal": labels, "bit_identical": bit}


def _standard(model, allowed=frozenset()) -> bool:
    from rewriter.graph import traversal

    return all(n.domain in ("", "ai.onnx") or (n.domain, n.op_type) in allowed
               for s in traversal.iter_scopes(model) for n in s.body.node)


def one(path: str, threads: int, reference: bool) -> dict:
    import onnx

    from rewriter.convert.lower_ops import lower_ops
    from rewriter.convert.lowering import LoweringBlocked

    name = os.path.basename(path)[:-5]
    model = onnx.load(path)
    feeds = dict(np.load(path[:-5] + ".npz", allow_pickle=True))
    ml_ops = collections.Counter(n.op_type for n in model.graph.node if n.domain == "ai.onnx.ml")
    row = {"model": name, "ml_ops": dict(ml_ops), "status": None}
    want = _session(model, threads).run(None, feeds)
    zipmap = {("ai.onnx.ml", "ZipMap")}
    ops = {(n.domain, n.op_type) for n in model.graph.node if n.domain == "ai.onnx.ml"}
    try:
        lowered, report = lower_ops(model, ops)
        row["status"] = "lowered"
    except LoweringBlocked as e:
        row["blockers"] = [{"op": b.op, "reason": b.reason} for b in e.blockers]
        if not any(b.op == "ZipMap" for b in e.blockers):
            row["status"] = "blocked"
            return row
        try:
            lowered, report = lower_ops(model, ops - zipmap)
            row["status"] = "lowered but ZipMap"
        except LoweringBlocked as e2:
            row["status"] = "blocked"
            row["blockers"] += [{"op": b.op, "reason": b.reason} for b in e2.blockers]
            return row
    onnx.checker.check_model(lowered, full_check=True)
    row["standard_only"] = _standard(lowered, zipmap if row["status"] != "lowered" else frozenset())
    row["opset"] = report.opset
    row["nodes"] = len(lowered.graph.node)
    want = in_label_order(want, lowered)
    row.update(compare(want, _session(lowered, threads).run(None, feeds)))
    row["match"] = row["labels_equal"] and row["rel_l2"] <= TOLERANCE and row["standard_only"]
    if reference and row["status"] == "lowered":
        import onnx.reference

        strings = {k: v.astype(object) if v.dtype.kind == "U" else v for k, v in feeds.items()}
        ref = onnx.reference.ReferenceEvaluator(lowered).run(None, strings)
        r = compare(want, ref)
        row["reference"] = {"rel_l2": r["rel_l2"], "labels_equal": r["labels_equal"]}
    return row


def _print(rows: list[dict]) -> None:
    print(f"{'model':36} {'status':20} {'opset':>5} {'nodes':>6} {'rel L2':>9} {'labels':>6} {'bit':>4}")
    for r in rows:
        if r["status"] == "blocked":
            reasons = "; ".join(sorted({f"{b['op']}: {b['reason'][:70]}" for b in r["blockers"]}))
            print(f"{r['model']:36} {'blocked':20} {reasons}")
            continue
        print(f"{r['model']:36} {r['status']:20} {r['opset']:>5} {r['nodes']:>6} {r['rel_l2']:>9.1e} "
              f"{'yes' if r['labels_equal'] else 'NO':>6} {'yes' if r['bit_identical'] else 'no':>4}"
              + (f"  reference rel L2 {r['reference']['rel_l2']:.1e}, labels "
                 f"{'yes' if r['reference']['labels_equal'] else 'NO'}" if "reference" in r else ""))
    full = [r for r in rows if r["status"] == "lowered"]
    partial = [r for r in rows if r["status"] == "lowered but ZipMap"]
    print(f"\nmodels: {len(rows)}; lowered fully: {len(full)} (match onnxruntime: {sum(r['match'] for r in full)}, "
          f"bit-identical: {sum(r['bit_identical'] for r in full)}); "
          f"all but ZipMap: {len(partial)} (match: {sum(r['match'] for r in partial)}); "
          f"blocked: {sum(r['status'] == 'blocked' for r in rows)}")
    reasons = collections.Counter((b["op"], b["reason"].split(":")[0][:80])
                                  for r in rows for b in r.get("blockers", []))
    for (op, reason), n in reasons.most_common():
        print(f"  {n:3} x {op}: {reason}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="/work/corpus/ml")
    p.add_argument("--reference", action="store_true", help="also run fully lowered models in onnx.reference")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (0: its default)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    paths = sorted(p for p in glob.glob(os.path.join(args.corpus, "*.onnx")) if os.path.exists(p[:-5] + ".npz"))
    rows = [one(path, args.threads, args.reference) for path in paths]
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        _print(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
