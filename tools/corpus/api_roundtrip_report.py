#!/usr/bin/env python3
"""The Python API's results on real models, saved the way users save them.

For each model of the given corpus folders (``<name>.onnx`` with its sample ``<name>.npz``, as
``tools/corpus/`` writes them; the oracle is ONNX Runtime's run of the source file), each public
function that returns a model is called on the file's path (and on a copy stored as external data
with ``--external``); the result is saved with plain ``onnx.save`` in another directory, loaded by
ONNX Runtime from there and run on the sample. A row per (model, function, layout): ``ok`` (runs,
float outputs within the tolerance: relative L2 1e-4, 1e-2 for half precision; integer outputs
equal), ``refused`` (a RewriterError: the message's head), ``LEAK`` (a private key in the
result), ``BROKEN`` (onnx.save or ONNX Runtime fails on the result), ``DIFFERS``.

    python tools/corpus/api_roundtrip_report.py /work/corpus/optbench /work/corpus/torch --external
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort

import rewriter

FUNCTIONS = {
    "convert_opset(17)": (lambda p: rewriter.convert_opset(p, 17), 1e-4),
    "convert_precision(float16)": (lambda p: rewriter.convert_precision(p, "float16"), 1e-2),
    "optimize_model": (lambda p: rewriter.optimize_model(p), 1e-4),
    "fold_reduce_prod": (lambda p: rewriter.fold_reduce_prod(p), 1e-4),
}


def _compare(got: list, want: dict, names: list[str], tol: float) -> str | None:
    for name, g in zip(names, got):
        if name not in want:
            continue
        w = want[name]
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"{name}: shape {g.shape} vs {w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            g, w = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(w)
            if not np.array_equal(np.isfinite(g), finite):
                return f"{name}: non-finite values differ"
            norm = np.linalg.norm(w[finite])
            err = np.linalg.norm(g[finite] - w[finite]) / (norm if norm else 1.0)
            if err > tol:
                return f"{name}: relative L2 {err:.2e}"
        elif not np.array_equal(g, w):
            return f"{name}: values differ"
    return None


def _row(path: str, feeds: dict, want: dict, call, tol: float, out_dir: str) -> str:
    try:
        result = call(path)
    except rewriter.RewriterError as e:
        return "refused: " + str(e).split(";")[0][:100]
    if b"__rewriter" in result.SerializeToString():
        return "LEAK"
    saved = os.path.join(out_dir, "result.onnx")
    try:
        onnx.save(result, saved)
        session = ort.InferenceSession(saved, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        got = session.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - reported
        return "BROKEN: " + " ".join(str(e).split())[:100]
    problem = _compare(got, want, names, tol)
    return f"DIFFERS: {problem}" if problem else "ok"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--external", action="store_true", help="also a copy of each model stored as external data")
    args = ap.parse_args(argv)
    counts: Counter = Counter()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rewriter {rewriter.__version__}, "
          f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    for folder in args.folders:
        for path in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
            name = os.path.splitext(os.path.basename(path))[0]
            sample = os.path.join(folder, name + ".npz")
            if not os.path.exists(sample):
                continue
            feeds = dict(np.load(sample))
            source = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            want = dict(zip([o.name for o in source.get_outputs()], source.run(None, feeds)))
            with tempfile.TemporaryDirectory() as tmp:
                layouts = [("file", path)]
                if args.external:
                    ext = os.path.join(tmp, "src", os.path.basename(path))
                    os.makedirs(os.path.dirname(ext))
                    onnx.save(onnx.load(path), ext, save_as_external_data=True, location="data.bin", size_threshold=1024)
                    layouts.append(("external", ext))
                out_dir = os.path.join(tmp, "out")
                os.makedirs(out_dir)
                for layout, src in layouts:
                    for fname, (call, tol) in FUNCTIONS.items():
                        row = _row(src, feeds, want, call, tol, out_dir)
                        counts[(fname, row.split(":")[0])] += 1
                        print(f"{os.path.basename(folder)}/{name}\t{layout}\t{fname}\t{row}", flush=True)
    print("\n| function | " + " | ".join(k for k in ("ok", "refused", "DIFFERS", "BROKEN", "LEAK")) + " |")
    print("|---|---|---|---|---|---|")
    for fname in FUNCTIONS:
        print(f"| {fname} | " + " | ".join(str(counts[(fname, k)]) for k in ("ok", "refused", "DIFFERS", "BROKEN", "LEAK")) + " |")
    return 1 if any(counts[(f, k)] for f in FUNCTIONS for k in ("BROKEN", "LEAK")) else 0


if __name__ == "__main__":
    sys.exit(main())
