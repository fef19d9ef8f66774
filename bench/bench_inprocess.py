"""In-process time of the optimizer on real models: one call, after the imports, in a fresh process.

This is the time a Python user's first ``optimize`` call takes (and the share of a whole
``rewriter optimize`` process that is the optimizer's own work): each measurement is a new
process that imports everything, loads the model, then times ``rewriter.optimize_model`` on the
ModelProto alone (no load, no save). The baseline, measured interleaved in the same run, is
``onnxslim.slim`` on the same ModelProto in the bench venv's python (also its first call in a
fresh process). Prints per model the node count, median and range of each side, and the ratio
of the medians. The issue's bar: at most 0.5 s for a ~1,000-node model on this machine.

    python bench/bench_inprocess.py --models /work/corpus/optbench /work/corpus/pypi \
        /work/corpus/torch [--min-nodes 800] [--repeat 5] [--bench-venv /work/venvs/bench]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import statistics
import subprocess
import sys

_OURS = r"""
import sys, time, onnx
import rewriter, rewriter.optimize.pipeline, onnxscript, onnx_ir, onnxruntime  # imports not timed
model = onnx.load(sys.argv[1])
t = time.perf_counter()
rewriter.optimize_model(model)
print(time.perf_counter() - t)
"""

_THEIRS = r"""
import sys, time, onnx
import onnxslim
model = onnx.load(sys.argv[1])
t = time.perf_counter()
onnxslim.slim(model)
print(time.perf_counter() - t)
"""


def _nodes(path: str) -> int:
    import onnx

    model = onnx.load(path, load_external_data=False)

    def count(graph) -> int:
        return sum(1 + sum(count(a.g) if a.HasField("g") else sum(count(g) for g in a.graphs)
                           for a in n.attribute) for n in graph.node)

    return count(model.graph) + sum(len(f.node) for f in model.functions)


def _time(python: str, script: str, path: str) -> float:
    done = subprocess.run([python, "-c", script, path], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{python} on {path} failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", required=True, metavar="DIR")
    ap.add_argument("--min-nodes", type=int, default=800, help="only models with at least this many nodes")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bench-venv", default="/work/venvs/bench", help="venv holding onnxslim")
    args = ap.parse_args(argv)
    theirs = os.path.join(args.bench_venv, "bin", "python")
    paths = sorted(p for d in args.models for p in glob.glob(os.path.join(d, "*.onnx"))
                   if os.path.getsize(p) > 0 and _nodes(p) >= args.min_nodes)
    if not paths:
        raise SystemExit(f"no model with at least {args.min_nodes} nodes in {' '.join(args.models)}")
    ours: dict[str, list[float]] = {p: [] for p in paths}
    slim: dict[str, list[float]] = {p: [] for p in paths}
    for rep in range(args.repeat):  # interleaved: machine noise hits both sides alike
        for p in paths:
            first, second = ((ours, _OURS, sys.executable), (slim, _THEIRS, theirs))[:: 1 if rep % 2 else -1]
            for times, script, python in (first, second):
                times[p].append(_time(python, script, p))
    print(f"{'model':40s} {'nodes':>6s} {'rewriter s':>22s} {'onnxslim s':>22s} {'ratio':>6s}")
    for p in paths:
        a, b = ours[p], slim[p]
        print(f"{os.path.basename(p)[:-5]:40s} {_nodes(p):6d} "
              f"{statistics.median(a):8.3f} [{min(a):.3f}-{max(a):.3f}] "
              f"{statistics.median(b):8.3f} [{min(b):.3f}-{max(b):.3f}] "
              f"{statistics.median(a) / statistics.median(b):5.2f}x")
    print(f"({args.repeat} interleaved fresh processes per model and tool; the optimize call alone; "
          f"load average {os.getloadavg()[0]:.2f}; {datetime.date.today()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
