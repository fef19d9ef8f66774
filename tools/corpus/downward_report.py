#!/usr/bin/env python
"""Every model of the given corpus folders converted down to each target opset below its own,
run in ONNX Runtime on its recorded sample input (MODEL.npz beside it) and compared with the
original run the same way (graph optimizations off in both: each model as ONNX defines it).

    python tools/corpus/downward_report.py /work/corpus/torch /work/corpus/pypi ... [--targets 11,13,15,17]

Per (model, target): converted and matching, converted and differing (max abs diff beyond
rtol 1e-3 and 1e-4 of the output's largest magnitude), invalid (the checker refuses it or ONNX
Runtime cannot load it), or refused (the blocking ops named). Prints one line per pair that is
not a match, then the totals; --json FILE writes every row.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

import rewriter
from rewriter.convert.planner import ConversionBlocked


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _differs(want, got) -> float | None:
    """The max abs diff when beyond tolerance, else None."""
    worst = 0.0
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape or w.dtype != g.dtype:
            return float("inf")
        if w.dtype == object or w.dtype.kind in "USb" or w.dtype.kind in "iu":
            if not np.array_equal(w, g):
                return float("inf")
            continue
        x, y = w.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(x) & np.isfinite(y)
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return float("inf")
        if not finite.any():
            continue
        diff = np.abs(x - y)[finite]
        scale = float(np.max(np.abs(x[finite])))
        if np.any(diff > 1e-3 * np.abs(x[finite]) + 1e-4 * scale + 1e-6):
            return float(diff.max())
        worst = max(worst, float(diff.max()))
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--targets", default="11,13,15,17")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    targets = [int(t) for t in args.targets.split(",")]
    rows, totals = [], collections.Counter()
    for folder in args.folders:
        for path in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
            sample = path[:-5] + ".npz"
            if not os.path.exists(sample):
                continue
            model = onnx.load(path)
            opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
            feeds = dict(np.load(sample, allow_pickle=False))
            try:
                want = _run(model, feeds)
            except Exception as e:  # noqa: BLE001 - the original itself does not run here
                print(f"skip {path}: the original does not run: {str(e)[:100]}", flush=True)
                continue
            for target in [t for t in targets if opset is not None and t < opset]:
                row = {"model": os.path.relpath(path), "from": opset, "to": target}
                try:
                    result = rewriter.convert_opset(model, target)
                except ConversionBlocked as e:
                    row["outcome"] = "refused"
                    row["blockers"] = sorted({b.op for b in e.blockers}) or ["ir"]
                except Exception as e:  # noqa: BLE001 - any other failure is reported
                    row["outcome"], row["error"] = "error", str(e)[:200]
                else:
                    try:
                        got = _run(result, feeds)
                    except Exception as e:  # noqa: BLE001
                        row["outcome"], row["error"] = "invalid", str(e)[:200]
                    else:
                        diff = _differs(want, got)
                        row["outcome"] = "match" if diff is None else "differs"
                        if diff is not None:
                            row["max_abs_diff"] = diff
                totals[row["outcome"]] += 1
                rows.append(row)
                if row["outcome"] != "match":
                    print(json.dumps(row), flush=True)
    print(f"{sum(totals.values())} conversions: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    refused = collections.Counter(op for r in rows if r["outcome"] == "refused" for op in r["blockers"])
    if refused:
        print("refused by: " + ", ".join(f"{op} {n}" for op, n in refused.most_common()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if not (totals["differs"] or totals["invalid"] or totals["error"]) else 1


if __name__ == "__main__":
    sys.exit(main())
