#!/usr/bin/env python
"""Convert every model of the corpora for each ONNX Runtime release and run it there.

    python tools/corpus/targets_report.py [--corpus /work/corpus/torch ...] [--release 1.15 ...] [-j 2]

For each (model, release): does the release load the model as it is; does
``convert_for(model, runtime="onnxruntime==R")`` succeed or refuse (naming what); does the
release (its venv from tools/ort_venvs.py) load and run the result on the model's sample
input; and do the outputs match the current onnxruntime on the source (rtol 1e-4, atol 1e-5;
integers and strings exactly). Prints one row per release and every failure.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

RELEASES = ["1.15", "1.17", "1.18", "1.20", "1.32"]


def _same(a: dict, b: dict) -> str | None:
    for k, want in a.items():
        got = b.get(k)
        if got is None:
            return f"no output {k}"
        want, got = np.asarray(want), np.asarray(got)
        if want.dtype.kind in "USO" or got.dtype.kind in "USO":
            if not np.array_equal(want.astype(str), got.astype(str)):
                return f"{k} differs"
        elif want.dtype.kind in "fc":
            if want.shape != got.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True):
                diff = np.max(np.abs(got.astype(np.float64) - want)) if want.shape == got.shape else "shape"
                return f"{k} differs ({diff})"
        elif want.shape != got.shape or not np.array_equal(want, got):
            return f"{k} differs"
    return None


def one(path: str, sample: str, release: str) -> dict:
    import onnx
    import onnxruntime as ort

    from rewriter.convert import convert_for
    from tests import old_ort

    model = onnx.load(path)
    feeds = dict(np.load(sample, allow_pickle=True))
    row = {"model": os.path.basename(path), "release": release}
    row["loads_as_is"] = old_ort.loads(release, path)[0]
    try:
        result, _ = convert_for(model, runtime=f"onnxruntime=={release}")
    except Exception as e:  # noqa: BLE001 - a refusal is a finding
        row["converted"], row["why"] = False, " ".join(str(e).split())[:300]
        return row
    row["converted"] = True
    there = old_ort.run(release, result, feeds)
    row["loads"] = there["ok"] or there["stage"] == "run"
    row["runs"] = there["ok"]
    if not there["ok"]:
        row["why"] = (there.get("error") or "")[:300]
        return row
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = old_ort.encode(names, session.run(None, feeds))
    row["mismatch"] = _same(expected, there["outputs"])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", action="append", default=None)
    ap.add_argument("--release", action="append", default=None)
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write every row to this file")
    args = ap.parse_args(argv)
    corpora = args.corpus or ["/work/corpus/torch", "/work/corpus/ml"]
    work = []
    for corpus in corpora:
        manifest = json.load(open(os.path.join(corpus, "manifest.json")))
        for e in manifest["models"]:
            for release in args.release or RELEASES:
                work.append((os.path.join(corpus, os.path.basename(e["file"])), os.path.join(corpus, e["sample"]),
                             release))
    rows = []
    with concurrent.futures.ProcessPoolExecutor(args.j) as pool:
        for row in pool.map(one, *zip(*work)):
            rows.append(row)
    table = collections.defaultdict(collections.Counter)
    for r in rows:
        t = table[r["release"]]
        t["models"] += 1
        t["loads as is"] += r["loads_as_is"]
        t["converted"] += r["converted"]
        t["refused"] += not r["converted"]
        t["loads there"] += bool(r.get("loads"))
        t["matches"] += bool(r.get("runs")) and not r.get("mismatch")
        t["MISMATCH"] += bool(r.get("mismatch"))
    cols = ["models", "loads as is", "converted", "refused", "loads there", "matches", "MISMATCH"]
    print(f"{'release':8}" + "".join(f"{c:>13}" for c in cols))
    for release in args.release or RELEASES:
        print(f"{release:8}" + "".join(f"{table[release][c]:>13}" for c in cols))
    for r in rows:
        if not r["converted"] or not r.get("runs") or r.get("mismatch"):
            print(f"  {r['release']} {r['model']}: {r.get('mismatch') or r.get('why')}")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
