"""Fold a 1 GiB float32 initializer: `rewriter fold` vs onnxscript's optimizer, whole processes.

The model file holds one (16384, 16384) float32 initializer inline in the protobuf,
reduced by one ReduceProd (axes [1], keepdims 0). Each tool runs as a subprocess, file to
file, in the same run; wall time and peak RSS (``os.wait4``'s rusage of that child) are
measured per run. Bars: rewriter at least 2x faster than the baseline, and its peak RSS at
most 1.5x the model file's size. The two results are compared with each other and with a
float64 product rounded to float32.

    python bench/bench_fold.py [--side 16384] [--repeat 1] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16384, help="the initializer is side x side float32")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool (best wall time, max RSS)")
    parser.add_argument("--workdir", help="where to put the model files (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the model files")
    args = parser.parse_args()

    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_fold-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, f"reduce_{args.side}.onnx")
    values = data(args.side)
    expected = np.prod(values.astype(np.float64), axis=1).astype(np.float32)
    if not os.path.exists(src):
        build(src, values)
    del values
    size = os.path.getsize(src)
    print(f"model: {src}, {size / 2**30:.3f} GiB, one ReduceProd over a ({args.side}, {args.side}) float32 initializer")

    tools = {
        "rewriter fold": lambda out: [sys.executable, "-m", "rewriter", "fold", src, "-o", out],
        "onnxscript.optimizer.optimize": lambda out: [sys.executable, "-c", ONNXSCRIPT_OPTIMIZER, src, out],
    }
    results = {}
    try:
        for name, cmd in tools.items():
            out = os.path.join(workdir, name.split()[0].split(".")[0] + "_out.onnx")
            runs = [measure(cmd(out), workdir) for _ in range(args.repeat)]
            results[name] = (min(w for w, _ in runs), max(r for _, r in runs), folded_value(out))
            wall, rss, _ = results[name]
            print(f"{name:32s} wall {wall:7.2f} s   peak RSS {rss / 2**30:6.3f} GiB ({rss / size:.2f}x file)")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    ours, base = results["rewriter fold"], results["onnxscript.optimizer.optimize"]
    speedup = base[0] / ours[0]
    print(f"speed-up vs onnxscript: {speedup:.2f}x (bar >= 2x: {'met' if speedup >= 2 else 'NOT met'})")
    print(f"rewriter peak RSS / file size: {ours[1] / size:.2f} (bar <= 1.5: {'met' if ours[1] <= 1.5 * size else 'NOT met'})")
    print(f"max ulp difference: rewriter vs float64 product {ulps(ours[2], expected)}, "
          f"onnxscript vs float64 product {ulps(base[2], expected)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
