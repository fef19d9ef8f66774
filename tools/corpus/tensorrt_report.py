#!/usr/bin/env python
"""Convert every torch export of the corpus for TensorRT 8.5, 8.6, 10.0 and 10.16 (the operator
lists of onnx-tensorrt's release branches), check that nothing in the result is left that the
list says the release lacks, and compare the result with the source in ONNX Runtime (TensorRT
itself needs a GPU).

    python tools/corpus/tensorrt_report.py
"""
import glob, os, collections, json, numpy as np, onnx, onnxruntime as ort
from rewriter.convert import convert_for
from rewriter.targets import parse_target, blockers
res = collections.defaultdict(collections.Counter); why = collections.Counter()
for path in sorted(glob.glob("/work/corpus/torch/*.onnx")):
    m = onnx.load(path); feeds = dict(np.load(path[:-5]+".npz"))
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for rel in ["8.5", "8.6", "10.0", "10.16"]:
        t = parse_target(f"tensorrt=={rel}")
        res[rel]["as is ok"] += not blockers(m, t)
        try:
            r, rep = convert_for(m, runtime=t)
        except Exception as e:
            res[rel]["refused"] += 1; s=str(e); why[(rel, s[s.find("block it"):][:140])] += 1; continue
        left = blockers(r, t)
        out = ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        ok = all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(ref, out))
        res[rel]["converted, nothing left blocking" if not left else "converted, still blocked"] += 1
        res[rel]["match (ORT)" if ok else "MISMATCH"] += 1
        if rep.expanded: res[rel]["with expansions"] += 1
for rel, c in res.items(): print(rel, dict(c))
for k, n in why.most_common(8): print(n, k)
