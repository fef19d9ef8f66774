#!/usr/bin/env python
"""Convert every model of some folders to half precision and check each result: exit status of
`rewriter convert MODEL --dtype D -o OUT`, ONNX's full check and strict type inference of what
was written, and the warning or error line. For bfloat16, which ONNX Runtime's CPU provider runs
for few ops (bench/bench_precision.py judges float16 numerics), this is the bookkeeping check on
real models.

    python tools/precision_sweep.py --dtype bfloat16 CORPUS/fp16 CORPUS/fp16_trained CORPUS/quant_all

Models over --max-mb (default 100) are skipped. Prints one line per model and a summary;
exit 1 when some conversion failed or some result fails the checks.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def check(path: str) -> str:
    import onnx

    try:
        onnx.checker.check_model(path, full_check=True)
        onnx.shape_inference.infer_shapes(onnx.load(path), check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - checker and inference errors of any type
        return f"checks: {str(e).splitlines()[0][:200]}"
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--dtype", default="bfloat16", choices=["float16", "bfloat16"])
    ap.add_argument("--max-mb", type=float, default=100.0)
    args = ap.parse_args(argv)
    counts = {"ok": 0, "ok with a warning": 0, "refused": 0, "fails the checks": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.folders:
            for path in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
                if os.path.getsize(path) > args.max_mb * 1e6:
                    continue
                out = os.path.join(tmp, "out.onnx")
                run = subprocess.run([sys.executable, "-m", "rewriter", "convert", path, "--dtype", args.dtype, "-o",
                                      out, "-q"], capture_output=True, text=True, cwd=ROOT)
                said = next((x for x in run.stderr.splitlines() if x.startswith(("warning:", "error:"))), "")
                if run.returncode != 0:
                    kind = "refused"
                else:
                    problem = check(out)
                    kind = "fails the checks" if problem else ("ok with a warning" if said else "ok")
                    said = problem or said
                counts[kind] += 1
                print(f"{os.path.basename(path):55s} {kind:18s} {said[:160]}", flush=True)
                if os.path.exists(out):
                    os.remove(out)
    print(f"\n{args.dtype}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["refused"] or counts["fails the checks"] else 0


if __name__ == "__main__":
    sys.exit(main())
