#!/usr/bin/env python
"""Run every model of a corpus on its sample input and compare with the
recorded outputs.

    /work/venvs/ml/bin/python tools/corpus/check_corpus.py /work/corpus/ml
    /work/venvs/torch/bin/python tools/corpus/check_corpus.py /work/corpus/torch

With --models DIR, the .onnx files are taken from DIR instead (same names),
e.g. the rewriter's output for the corpus, and compared with the original
models' recorded outputs.  Needs numpy and onnxruntime (either venv has them).
Exits 1 if any model fails.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--models", help="folder holding the .onnx files to run (default: the corpus)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-4)
    args = ap.parse_args(argv)
    man = json.load(open(os.path.join(args.corpus, "manifest.json")))
    bad = 0
    for e in man["models"]:
        path = os.path.join(args.models or args.corpus, os.path.basename(e["file"]))
        if not os.path.exists(path):
            print(f"MISSING {e['name']}")
            bad += 1
            continue
        feeds = dict(np.load(os.path.join(args.corpus, e["sample"]), allow_pickle=False))
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            outs = dict(zip(names, sess.run(None, feeds)))
        except Exception as ex:
            print(f"FAIL    {e['name']}: {str(ex).splitlines()[0][:200]}")
            bad += 1
            continue
        exp = dict(np.load(os.path.join(args.corpus, e["expected"]), allow_pickle=False))
        problems = []
        for k, want in exp.items():
            got = outs.get(k)
            if got is None:
                problems.append(f"no output {k}")
                continue
            got = np.asarray(got)
            if want.dtype.kind in "US":
                ok = np.array_equal(got.astype(str), want)
            else:
                ok = got.shape == want.shape and np.allclose(got, want, rtol=args.rtol, atol=args.atol)
            if not ok:
                problems.append(f"{k} differs")
        for k, want in (e.get("sequence_outputs") or {}).items():
            got = outs.get(k)
            if got is None or len(got) != len(want) or any(
                    not np.allclose([g[kk] for kk in sorted(g, key=str)],
                                    [w[str(kk)] for kk in sorted(g, key=str)], rtol=args.rtol, atol=args.atol)
                    for g, w in zip(got, want)):
                problems.append(f"{k} differs")
        if problems:
            print(f"DIFF    {e['name']}: {'; '.join(problems)}")
            bad += 1
        else:
            print(f"ok      {e['name']}")
    n = len(man["models"])
    print(f"{n - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
