#!/usr/bin/env python
"""Convert every torch export of the corpus for TensorRT 8.5, 8.6, 10.0 and 10.16 (the operator
lists of onnx-tensorrt's release branches), check that nothing in the result is left that the
list says the release lacks, and compare the result with the source in ONNX Runtime (TensorRT
itself needs a GPU).

    python tools/corpus/tensorrt_report.py [--corpus /work/corpus/torch]
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

RELEASES = ["8.5", "8.6", "10.0", "10.16"]


def main(argv=None) -> int:
    import onnx
    import onnxruntime as ort

    from rewriter.convert import convert_for
    from rewriter.targets import blockers, parse_target

    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/work/corpus/torch")
    args = ap.parse_args(argv)
    counts = collections.defaultdict(collections.Counter)
    refusals = collections.Counter()
    for path in sorted(glob.glob(os.path.join(args.corpus, "*.onnx"))):
        model = onnx.load(path)
        feeds = dict(np.load(path[:-5] + ".npz"))
        reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
        for release in RELEASES:
            target = parse_target(f"tensorrt=={release}")
            c = counts[release]
            c["models"] += 1
            c["nothing blocking as they were"] += not blockers(model, target)
            try:
                result, report = convert_for(model, runtime=target)
            except Exception as e:  # noqa: BLE001 - a refusal is a finding
                c["refused"] += 1
                refusals[(release, " ".join(str(e).split())[:160])] += 1
                continue
            c["converted, nothing left blocking" if not blockers(result, target) else "converted, STILL BLOCKED"] += 1
            c["with an op expanded"] += bool(report.expanded)
            out = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
            same = all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(reference, out))
            c["match in ONNX Runtime" if same else "MISMATCH"] += 1
    for release, c in counts.items():
        print(f"tensorrt {release}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    for (release, why), n in refusals.most_common():
        print(f"  {release}: {n} x {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
