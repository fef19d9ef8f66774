#!/usr/bin/env python
"""Convert every model of the scikit-learn / LightGBM / XGBoost corpus to each other
ai.onnx.ml opset (1..5) and, separately, its default-domain opset down to 13, 11, 9 and 7;
run each result in ONNX Runtime on the model's sample input and compare with the source.

    python tools/corpus/ml_opsets_report.py [--corpus /work/corpus/ml]

Prints the counts (converted and matching, refused, mismatching) and every refusal's reason.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def _run(model, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _same(a, b) -> bool:
    if isinstance(a, list):  # ZipMap: a list of dicts
        return len(a) == len(b) and all(
            x.keys() == y.keys() and all(abs(x[k] - y[k]) <= 1e-5 for k in x) if isinstance(x, dict) else _same(x, y)
            for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc":
        return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    return a.shape == b.shape and bool((a == b).all())


def main(argv=None) -> int:
    import onnx

    from rewriter.convert import convert_model
    from rewriter.convert.ml_opsets import ml_opset
    from rewriter.graph import traversal

    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/work/corpus/ml")
    args = ap.parse_args(argv)
    counts = {"ai.onnx.ml": collections.Counter(), "default domain down": collections.Counter()}
    reasons = collections.Counter()
    for path in sorted(glob.glob(os.path.join(args.corpus, "*.onnx"))):
        model = onnx.load(path)
        feeds = dict(np.load(path[:-5] + ".npz", allow_pickle=True))
        reference = _run(model, feeds)
        src_ml, src = ml_opset(model.opset_import), traversal.opset_version(model.opset_import)
        jobs = [("ai.onnx.ml", None, t) for t in range(1, 6) if src_ml is not None and t != src_ml]
        jobs += [("default domain down", t, None) for t in (13, 11, 9, 7) if src is not None and t < src]
        for kind, opset, ml in jobs:
            try:
                result, _ = convert_model(model, opset, ml_opset=ml)
            except Exception as e:  # noqa: BLE001 - a refusal is a finding
                counts[kind]["refused"] += 1
                text = " ".join(str(e).split())
                reasons[text[text.find(": ", text.find("block it")) + 2:][:150] if "block it" in text else text[:150]] += 1
                continue
            ok = all(_same(a, b) for a, b in zip(reference, _run(result, feeds)))
            counts[kind]["converted and matching" if ok else "MISMATCH"] += 1
    for kind, c in counts.items():
        print(f"{kind}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for reason, n in reasons.most_common():
        print(f"  {n} x {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
