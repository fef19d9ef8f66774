"""Benchmark rewriter.kernels.reduce_prod against numpy.prod (and np.max).

    python bench/bench_kernel.py [--reps N] [--quick] [--busy] [--case SUBSTRING]

Each case runs the kernel, numpy.prod and np.max on the same array, interleaved, N times
(default 7), and prints the median time of each side with its range [min-max], the
throughput ratios (numpy.prod time / kernel time, np.max time / kernel time) as median
[min-max] over the interleaved runs, and whether each bar holds (judged on the median).
Kernel results are checked bit for bit against an exact Python-int oracle: 24 sampled
outputs per case (for reduce-all cases, whose single output has millions of factors,
the kernel's reduce-all of the 256 x 256 corner instead).

``--busy`` runs the table twice: quiet, then with a background process spinning on one
core (a second table), to show what to expect on a loaded machine.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import platform
import statistics
import time

import ml_dtypes
import numpy as np

from rewriter.kernels import NATIVE_AVAILABLE, reduce_prod_checked

# (dtype, shape, axes, min ratio vs np.max or None, min ratio vs numpy.prod or None)
CASES = [
    (np.float32, (4096, 16384), [0], 0.6, None),
    (np.float32, (4096, 16384), [1], 0.6, 2.0),
    (np.float32, (4096, 16384), None, 0.6, 2.0),
    (np.float64, (4096, 8192), [0], None, 0.8),
    (np.float64, (4096, 8192), [1], None, 0.8),
    (np.float64, (4096, 8192), None, None, 0.8),
    (np.float16, (2048, 8192), [0], None, 5.0),
    (np.float16, (2048, 8192), [1], None, 5.0),
    (ml_dtypes.bfloat16, (2048, 8192), [0], None, 5.0),
    (ml_dtypes.bfloat16, (2048, 8192), [1], None, 5.0),
    (np.int64, (4096, 4096), [0], None, 0.8),
    (np.int64, (4096, 4096), [1], None, 0.8),
    (np.int64, (4096, 4096), None, None, 0.8),
]

#: dtype -> (precision, emin, emax)
FMT = {np.dtype(np.float64): (53, -1022, 1023), np.dtype(np.float32): (24, -126, 127),
       np.dtype(np.float16): (11, -14, 15), np.dtype(ml_dtypes.bfloat16): (8, -126, 127)}


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    isa = "none (no native extension)"
    if NATIVE_AVAILABLE:
        from rewriter.kernels import _native

        isa = _native.ISA
    return f"{model}, {cores} cores available, kernel ISA {isa}, numpy {np.__version__}"


def exact_float(vals, dt) -> float:
    """Correctly rounded product of float values, with Python ints only."""
    p, emin, emax = FMT[np.dtype(dt)]
    vals = [float(v) for v in vals]
    sign = -1.0 if sum(math.copysign(1.0, v) < 0 for v in vals) % 2 else 1.0
    if any(math.isnan(v) for v in vals) or (any(math.isinf(v) for v in vals) and 0.0 in vals):
        return math.nan
    if any(math.isinf(v) for v in vals):
        return sign * math.inf
    if 0.0 in vals:
        return sign * 0.0
    nums, k = [], 0
    for v in vals:
        n, d = abs(v).as_integer_ratio()
        nums.append(n)
        k += d.bit_length() - 1
    while len(nums) > 1:  # balanced product tree
        nums = [a * b for a, b in zip(nums[0::2], nums[1::2])] + nums[len(nums) - len(nums) % 2:]
    num = nums[0]
    q = max(num.bit_length() - 1 - k, emin) - (p - 1)
    sh = k + q
    if sh <= 0:
        r = num << -sh
    else:
        r, rem = num >> sh, num & ((1 << sh) - 1)
        if 2 * rem > (1 << sh) or (2 * rem == (1 << sh) and r & 1):
            r += 1
    return sign * (math.inf if r.bit_length() + q > emax + 1 else math.ldexp(r, q))


def check_exact(x, axes, result, rng, samples=24) -> int:
    """Number of sampled outputs that differ from the exact oracle (0 expected)."""
    ax = tuple(range(x.ndim)) if axes is None else tuple(axes)
    res = result.reshape([1 if i in ax else d for i, d in enumerate(x.shape)])
    kept = [i for i in range(x.ndim) if i not in ax]
    bad = 0
    nout = math.prod(x.shape[i] for i in kept)
    for o in (range(nout) if nout <= samples else rng.choice(nout, samples, replace=False)):
        idx = np.unravel_index(int(o), [x.shape[i] for i in kept])
        sel = [slice(None)] * x.ndim
        for i, j in zip(kept, idx):
            sel[i] = j
        vals = x[tuple(sel)].ravel()
        got = res[tuple(0 if i in ax else s for i, s in enumerate(sel))]
        if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
            want = np.array(exact_float(vals.astype(np.float64), x.dtype)).astype(x.dtype)
            ok = (np.isnan(float(got)) and np.isnan(float(want))) or got.tobytes() == want.tobytes()
        else:
            bits = x.dtype.itemsize * 8
            w = math.prod(int(v) for v in vals.tolist()) % (1 << bits)
            ok = int(got) % (1 << bits) == w
        bad += not ok
    return bad


def make(dtype, shape, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, size=shape).astype(dtype)
    # 2^r and 2^-r in every 2 x 2 block: row, column and whole products stay near 1, so
    # numpy.prod never meets subnormals or inf (which would make it unfairly slow or fast)
    r = rng.uniform(-0.5, 0.5, size=(shape[0] // 2, shape[1] // 2))
    x = np.empty(shape)
    x[0::2, 0::2], x[1::2, 1::2], x[0::2, 1::2], x[1::2, 0::2] = r, r, -r, -r
    return np.exp2(x).astype(np.float32).astype(dtype)


def fmt_range(vals, scale=1e3, unit="ms") -> str:
    return f"{statistics.median(vals) * scale:7.1f}{unit} [{min(vals) * scale:.1f}-{max(vals) * scale:.1f}]"


def run_table(args, cases, label) -> bool:
    rng = np.random.default_rng(0)
    print(f"\n{label}")
    print(f"{'case':36} {'kernel':>22} {'numpy.prod':>22} {'vs prod':>17} {'vs max':>17} exact  bars")
    allmet = True
    for dtype, shape, axes, bar_max, bar_prod in cases:
        if args.quick:
            shape = tuple(max(1, d // 8) for d in shape)
        x = make(dtype, shape, rng)
        ax = None if axes is None else tuple(axes)
        tk, tp, tm = [], [], []
        res = None
        for _ in range(args.reps):  # interleaved: each repetition runs the three
            t0 = time.perf_counter()
            res, _ = reduce_prod_checked(x, axes)
            tk.append(time.perf_counter() - t0)
            with np.errstate(all="ignore"):
                t0 = time.perf_counter()
                np.prod(x, axis=ax, dtype=x.dtype)
                tp.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                np.max(x, axis=ax)
                tm.append(time.perf_counter() - t0)
        rp = [p / k for p, k in zip(tp, tk)]
        rm = [m / k for m, k in zip(tm, tk)]
        if axes is None:  # one output of millions of factors: check a 256 x 256 corner instead
            corner = x[:256, :256]
            bad = check_exact(corner, None, reduce_prod_checked(corner)[0], rng)
        else:
            bad = check_exact(x, axes, res, rng)
        bars = []
        for name, bar, r in (("vs prod", bar_prod, rp), ("vs max", bar_max, rm)):
            if bar is not None:
                ok = statistics.median(r) >= bar
                bars.append(f"{name}>={bar}: {'MET' if ok else 'NOT MET'}")
                allmet &= ok or args.quick
        allmet &= bad == 0
        name = f"{np.dtype(dtype).name} {shape} axes={axes}"
        print(f"{name:36} {fmt_range(tk):>22} {fmt_range(tp):>22} "
              f"{statistics.median(rp):5.2f} [{min(rp):.2f}-{max(rp):.2f}] "
              f"{statistics.median(rm):5.2f} [{min(rm):.2f}-{max(rm):.2f}] "
              f"{'ok' if bad == 0 else f'{bad} BAD':5}  {'; '.join(bars)}")
    print("all bars met" if allmet else "some bars NOT met")
    return allmet


def _spin(stop):
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="interleaved repetitions per case (default 7)")
    ap.add_argument("--quick", action="store_true", help="smaller arrays (bars not judged)")
    ap.add_argument("--busy", action="store_true", help="also run the table with one core kept busy")
    ap.add_argument("--case", default="", help="only cases whose name contains this text")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"native extension: {NATIVE_AVAILABLE}; threads: {os.environ.get('REWRITER_KERNEL_THREADS', 'all available')}")
    print(f"{args.reps} interleaved repetitions per case; times: median [min-max]; ratios: median [min-max] "
          "of the per-repetition ratios; bars judged on the median")
    cases = [c for c in CASES if args.case in f"{np.dtype(c[0]).name} {c[1]} axes={c[2]}"]
    ok = run_table(args, cases, "quiet machine (nothing started by this script)")
    if args.busy:
        ctx = mp.get_context("spawn")
        stop = ctx.Event()
        proc = ctx.Process(target=_spin, args=(stop,), daemon=True)
        proc.start()
        try:
            time.sleep(0.5)
            run_table(args, cases, "one core busy (a spinning background process started by this script)")
        finally:
            stop.set()
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
