"""Which of ONNX Runtime's own graph fusions fire on the source and on each tool's result?

ORT's default session optimizations (ORT_ENABLE_ALL, CPU) fuse LayerNorm, SkipLayerNorm, Gelu,
BiasGelu, Attention, MatMul+Add (FusedMatMul/Gemm), Conv+activation (FusedConv), ... into
com.microsoft / fused ops; an optimizer that rewrites those subgraphs into a form ORT does not
recognize makes the result slower to run even with fewer nodes. This saves the graph ORT
runs (``optimized_model_filepath``) for the source and every result that bench_optimize.py
--models ... --keep DIR left, and prints the op histogram of those graphs where they differ.

    python bench/ort_fusions.py --keep DIR [--models NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter

import onnx


def ort_graph(path: str) -> Counter:
    """Op histogram (domain-qualified for non-default domains) of the graph ORT runs."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "opt.onnx")
        o = ort.SessionOptions()
        o.log_severity_level = 3
        o.intra_op_num_threads = 1
        o.optimized_model_filepath = out
        ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
        m = onnx.load(out, load_external_data=False)
    return Counter((n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in m.graph.node)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", required=True)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--tools", default="rewriter,onnxslim,onnxsim,onnxscript")
    ap.add_argument("--json", help="bench_optimize's --json-out file (default DIR/bench.json)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    res = json.load(open(args.json or os.path.join(args.keep, "bench.json")))["results"]
    tools = args.tools.split(",")
    report = {}
    for name, r in res.items():
        if args.models and name not in args.models:
            continue
        paths = {"source": r["source"]["path"]}
        paths.update({t: os.path.join(args.keep, f"{name}.{t}.onnx") for t in tools if r["tools"].get(t, {}).get("valid")})
        graphs = {}
        for label, p in paths.items():
            try:
                graphs[label] = ort_graph(p)
            except Exception as e:  # noqa: BLE001
                graphs[label] = Counter({f"error: {str(e)[:60]}": 1})
        report[name] = {k: dict(v) for k, v in graphs.items()}
        fused = {k: sum(c for op, c in v.items() if "::" in op or op.startswith("Fused")) for k, v in graphs.items()}
        total = {k: sum(v.values()) for k, v in graphs.items()}
        line = ", ".join(f"{k} {total[k]} nodes ({fused[k]} contrib/fused)" for k in graphs)
        print(f"{name}: ORT runs {line}")
        ops = sorted({op for v in graphs.values() for op in v if "::" in op or op.startswith("Fused")})
        differing = [op for op in ops if len({graphs[k].get(op, 0) for k in graphs}) > 1]
        for op in differing:
            print(f"    {op:<40} " + "  ".join(f"{k} {graphs[k].get(op, 0)}" for k in graphs))
        for k in graphs:
            if k != "source" and total[k] > total["source"]:
                d = graphs[k] - graphs["source"]
                e = graphs["source"] - graphs[k]
                print(f"    ORT graph of {k} has more nodes than the source's: +{dict(d.most_common(8))} "
                      f"-{dict(e.most_common(8))}")
    if args.json_out:
        json.dump(report, open(args.json_out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
