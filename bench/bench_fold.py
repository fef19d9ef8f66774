"""Fold a 1 GiB float32 initializer: `rewriter fold` vs onnxscript's optimizer, whole processes.

The model file holds one (16384, 16384) float32 initializer inline in the protobuf,
reduced by one ReduceProd (axes [1], keepdims 0). Each tool runs as a subprocess, file to
file, in the same run; wall time and peak RSS (``os.wait4``'s rusage of that child) are
measured per run, the tools interleaved over --repeat runs (default 3): median wall time
and range, largest peak RSS. Bars (on the medians): rewriter at least 2x faster than the
baseline, and its peak RSS at most 1.5x the model file's size. Both results are compared
with the exact, correctly rounded products (a Python-int oracle) on --check sampled rows.

    python bench/bench_fold.py [--side 16384] [--repeat 3] [--check 256] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ONNXSCRIPT_OPTIMIZER = (
    "import sys, onnx_ir as ir, onnxscript.optimizer\n"
    "model = ir.load(sys.argv[1])\n"
    "model = onnxscript.optimizer.optimize(model, input_size_limit=1 << 40, output_size_limit=1 << 40)\n"
    "ir.save(model, sys.argv[2])\n"
)


def data(side: int) -> np.ndarray:
    """Values near 1 so that every row's product is a finite, normal float32."""
    rng = np.random.default_rng(0)
    return (1.0 + (rng.random((side, side), dtype=np.float32) - 0.5) * np.float32(2e-3)).astype(np.float32)


def build(path: str, values: np.ndarray) -> None:
    side = values.shape[0]
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["weights"], ["y"], name="prod", axes=[1], keepdims=0)],
        "bench", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [side])],
        [numpy_helper.from_array(values, "weights")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


# A small launcher runs each tool: a child's peak RSS must not include this process's
# memory (a vfork+exec child's ru_maxrss inherits the parent's high-water mark).
LAUNCHER = (
    "import json, resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - start\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    json.dump([done.returncode, wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,\n"
    "               done.stderr.decode(errors='replace')], f)\n"
)


def measure(cmd: list[str], workdir: str) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of one child process."""
    report = os.path.join(workdir, "measure.json")
    subprocess.run([sys.executable, "-c", LAUNCHER, report, *cmd], check=True)
    with open(report) as f:
        returncode, wall, maxrss_kib, err = json.load(f)
    if returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({returncode}):\n{err}")
    return wall, maxrss_kib * 1024


def folded_value(path: str) -> np.ndarray:
    model = onnx.load(path)
    assert not [n for n in model.graph.node if n.op_type == "ReduceProd"], f"{path}: not folded"
    by_name = {t.name: t for t in model.graph.initializer}
    by_name.update({n.output[0]: n.attribute[0].t for n in model.graph.node if n.op_type == "Constant"})
    return numpy_helper.to_array(by_name["y"])


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


def exact_row_product(row: np.ndarray) -> np.float32:
    """The exact product of positive normal float32 values, rounded once to float32
    (nearest, ties to even), with Python ints only (the results here stay normal)."""
    nums, k = [], 0
    for v in row.astype(np.float64).tolist():
        n, d = v.as_integer_ratio()
        nums.append(n)
        k += d.bit_length() - 1
    while len(nums) > 1:
        nums = [a * b for a, b in zip(nums[0::2], nums[1::2])] + nums[len(nums) - len(nums) % 2:]
    num = nums[0]
    sh = num.bit_length() - 24  # keep 24 bits
    r, rem = num >> sh, num & ((1 << sh) - 1)
    if 2 * rem > (1 << sh) or (2 * rem == (1 << sh) and r & 1):
        r += 1
    return np.float32(math.ldexp(r, sh - k))


def machine() -> str:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores available"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16384, help="the initializer is side x side float32")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per tool (median wall time, max RSS)")
    parser.add_argument("--check", type=int, default=256, help="rows compared with the exact oracle")
    parser.add_argument("--workdir", help="where to put the model files (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the model files")
    args = parser.parse_args()

    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_fold-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, f"reduce_{args.side}.onnx")
    values = data(args.side)
    rows = np.random.default_rng(1).choice(args.side, min(args.check, args.side), replace=False)
    expected = np.array([exact_row_product(values[r]) for r in rows], dtype=np.float32)
    if not os.path.exists(src):
        build(src, values)
    del values
    size = os.path.getsize(src)
    print(f"model: {src}, {size / 2**30:.3f} GiB, one ReduceProd over a ({args.side}, {args.side}) float32 initializer")

    tools = {
        "rewriter fold": lambda out: [sys.executable, "-m", "rewriter", "fold", src, "-o", out],
        "onnxscript.optimizer.optimize": lambda out: [sys.executable, "-c", ONNXSCRIPT_OPTIMIZER, src, out],
    }
    print(f"machine: {machine()}; {args.repeat} interleaved runs per tool")
    runs = {name: [] for name in tools}
    values_out = {}
    try:
        for _ in range(args.repeat):
            for name, cmd in tools.items():
                out = os.path.join(workdir, name.split()[0].split(".")[0] + "_out.onnx")
                runs[name].append(measure(cmd(out), workdir))
                values_out[name] = folded_value(out)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    med = {}
    for name in tools:
        walls = [w for w, _ in runs[name]]
        rss = max(r for _, r in runs[name])
        med[name] = (statistics.median(walls), rss)
        print(f"{name:32s} wall median {med[name][0]:7.2f} s [{min(walls):.2f}-{max(walls):.2f}]   "
              f"peak RSS {rss / 2**30:6.3f} GiB ({rss / size:.2f}x file)")
    ours, base = med["rewriter fold"], med["onnxscript.optimizer.optimize"]
    ratios = [b[0] / o[0] for o, b in zip(runs["rewriter fold"], runs["onnxscript.optimizer.optimize"])]
    speedup = base[0] / ours[0]
    print(f"speed-up vs onnxscript (median times): {speedup:.2f}x, per-run range [{min(ratios):.2f}-{max(ratios):.2f}] "
          f"(bar >= 2x: {'met' if speedup >= 2 else 'NOT met'})")
    print(f"rewriter peak RSS / file size: {ours[1] / size:.2f} (bar <= 1.5: {'met' if ours[1] <= 1.5 * size else 'NOT met'})")
    for name in tools:
        got = values_out[name][rows]
        diff = int(np.sum(got.view(np.int32) != expected.view(np.int32)))
        print(f"{name}: {diff} of {len(rows)} sampled rows differ from the exact product, max {ulps(got, expected)} ulp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
