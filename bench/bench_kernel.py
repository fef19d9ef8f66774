"""Benchmark rewriter.kernels.reduce_prod against numpy.prod and np.max.

    python bench/bench_kernel.py [--reps N] [--quick]

For each case prints the min-of-N wall time of the kernel, of numpy.prod and of np.max
on the same array, the throughput ratio vs np.max (np.max time / kernel time), the
speedup vs numpy.prod (numpy.prod time / kernel time), and whether each bar is met.
"""

from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np

from rewriter.kernels import NATIVE_AVAILABLE, reduce_prod_checked


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


# (dtype, shape, axes, min ratio vs np.max or None, min speedup vs numpy.prod or None)
CASES = [
    (np.float32, (4096, 16384), [0], 0.6, None),
    (np.float32, (4096, 16384), [1], 0.6, 2.0),
    (np.float32, (4096, 16384), None, 0.6, 2.0),
    (np.float16, (2048, 8192), [0], None, 5.0),
    (np.float16, (2048, 8192), [1], None, 5.0),
    (ml_dtypes.bfloat16, (2048, 8192), [0], None, 5.0),
    (ml_dtypes.bfloat16, (2048, 8192), [1], None, 5.0),
    (np.int64, (4096, 4096), [0], None, 0.8),
    (np.int64, (4096, 4096), [1], None, 0.8),
    (np.int64, (4096, 4096), None, None, 0.8),
    (np.float64, (4096, 4096), [1], None, None),
]


def make(dtype, shape, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, size=shape).astype(dtype)
    # values around 1 so numpy.prod stays finite for a fair comparison
    return rng.uniform(0.5, 2.0, size=shape).astype(np.float32).astype(dtype)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller arrays (no bars)")
    args = ap.parse_args()
    print(f"native extension: {NATIVE_AVAILABLE}")
    rng = np.random.default_rng(0)
    allmet = True
    hdr = f"{'case':38} {'kernel':>9} {'np.prod':>9} {'np.max':>9} {'vs max':>7} {'vs prod':>8}  bars"
    print(hdr)
    for dtype, shape, axes, bar_max, bar_prod in CASES:
        if args.quick:
            shape = tuple(max(1, d // 8) for d in shape)
        x = make(dtype, shape, rng)
        ax = None if axes is None else tuple(axes)
        tk = best(lambda: reduce_prod_checked(x, axes), args.reps)
        tp = best(lambda: np.prod(x, axis=ax, dtype=x.dtype), args.reps)
        tm = best(lambda: np.max(x, axis=ax), args.reps)
        rmax, rprod = tm / tk, tp / tk
        bars = []
        if bar_max is not None:
            ok = rmax >= bar_max
            bars.append(f"vs max>={bar_max}: {'MET' if ok else 'NOT MET'}")
            allmet &= ok or args.quick
        if bar_prod is not None:
            ok = rprod >= bar_prod
            bars.append(f"vs prod>={bar_prod}: {'MET' if ok else 'NOT MET'}")
            allmet &= ok or args.quick
        name = f"{np.dtype(dtype).name} {shape} axes={axes}"
        print(f"{name:38} {tk*1e3:8.1f}ms {tp*1e3:8.1f}ms {tm*1e3:8.1f}ms {rmax:7.2f} {rprod:8.2f}  {'; '.join(bars)}")
    print("all bars met" if allmet else "some bars NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
