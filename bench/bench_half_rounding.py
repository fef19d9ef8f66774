"""What keeping the filters' sums costs `convert --dtype`: the same conversion with the weights
rounded keeping their sums (rewriter.precision.rounding, the native kernel) and rounded to nearest
(kept_sums patched to choose nothing), interleaved, in this process, written to a file each.

    python bench/bench_half_rounding.py MODEL.onnx [MODEL.onnx ...] [--runs 5] [--dtype float16]

Prints, per model, the median and range of each side's seconds and the ratio of the medians
(sums / nearest), and the weights each side converted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _convert(path: str, dtype: str, out: str, keep_sums: bool) -> float:
    import rewriter.precision.apply as apply
    from rewriter.io import load_model, save_model
    from rewriter.precision import convert_precision_proto

    original = apply.kept_sums
    if not keep_sums:
        apply.kept_sums = lambda shape, readers: None
    try:
        t0 = time.perf_counter()
        model = load_model(path)
        result, _ = convert_precision_proto(model, dtype, base_dir=os.path.dirname(os.path.abspath(path)))
        save_model(result, out, base_dir=os.path.dirname(os.path.abspath(path)))
        return time.perf_counter() - t0
    finally:
        apply.kept_sums = original


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args()
    from rewriter.kernels import NATIVE_AVAILABLE, kernel_threads

    print(f"native kernel: {NATIVE_AVAILABLE}, threads {kernel_threads()}, {args.runs} interleaved runs, {args.dtype}")
    print("| model | MB | nearest s (median [range]) | sums s (median [range]) | ratio |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        for path in args.models:
            times = {True: [], False: []}
            _convert(path, args.dtype, os.path.join(d, "warm.onnx"), True)  # imports, caches
            for _ in range(args.runs):
                for keep in (False, True):
                    times[keep].append(_convert(path, args.dtype, os.path.join(d, f"{keep}.onnx"), keep))
            near, sums = times[False], times[True]
            mb = os.path.getsize(path) / 1e6
            print(f"| {os.path.basename(path)} | {mb:.1f} | {statistics.median(near):.3f} [{min(near):.3f}-{max(near):.3f}] "
                  f"| {statistics.median(sums):.3f} [{min(sums):.3f}-{max(sums):.3f}] "
                  f"| {statistics.median(sums) / statistics.median(near):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
