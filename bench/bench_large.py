"""Convert a model with a 2.5 GiB external initializer (sparse file) from opset 13 to 18,
or (``--dtype float16``) from float32 to float16.

Reports the wall time and peak RSS of the ``rewriter convert`` subprocess against a
baseline copy of the same data file, interleaved over several runs (median and range).
Bars (issue 5): peak RSS <= 600 MiB; median wall time <= 1.5x the median copy.

    python bench/bench_large.py [--gib 2.5] [--dir DIR] [--runs 5] [--dense] [--dtype float16|bfloat16]

With ``--dtype`` the weight is converted to half precision in chunks as it is written, and
the baseline is the least such a rewrite does: numpy reading the data file in 16 MiB chunks,
``astype`` each, writing them (a converted hole is zeros: every byte is written).

Like with like: with the default sparse source, rewriter keeps the holes in its output
(as ``cp --sparse=auto``), so the baseline copies only the data extents and keeps the
holes too (SEEK_DATA/SEEK_HOLE); with ``--dense`` every byte is real and both write it.
Both make their output durable (rewriter fsyncs before its rename; the copy is fsynced).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(directory: str, gib: float, dense: bool = False) -> str:
    n = int(gib * (1 << 30)) // 4 // 1024 * 1024
    data = os.path.join(directory, "weights.bin")
    with open(data, "wb") as f:
        if dense:  # every byte on disk, as real weights are
            chunk = np.random.default_rng(0).random(1 << 22, dtype=np.float32).tobytes()
            for _ in range(n // (1 << 22)):
                f.write(chunk)
            f.write(chunk[: (n % (1 << 22)) * 4])
        else:  # sparse: holes cost no disk
            f.truncate(n * 4)
            f.seek(n * 2)
            f.write(np.arange(1024, dtype=np.float32).tobytes())
    # 2-D like real weights (a 1-D tensor of n elements makes ONNX's shape-inference data
    # propagation, used by the check after a rewrite, build n-element shapes: see README)
    dims = [n // 1024, 1024]
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(n * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("ReduceProd", ["s"], ["y"], axes=[0], keepdims=1, name="rp"),
             helper.make_node("ReduceProd", ["c"], ["k"], axes=[1], keepdims=0, name="const_rp")]
    graph = helper.make_graph(
        nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [2])],
        [w, numpy_helper.from_array(np.array([[2, 3], [4, 5]], np.float32), "c")])
    path = os.path.join(directory, "big.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def machine() -> str:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores available"


def sparse_copy(src: str, dst: str) -> None:
    """Copy src to dst keeping its holes: only the data extents are read and written."""
    size = os.path.getsize(src)
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fdi = fi.fileno()
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fdi, pos, os.SEEK_DATA)
            except OSError:  # no data after pos
                break
            end = os.lseek(fdi, start, os.SEEK_HOLE)
            fi.seek(start)
            fo.seek(start)
            left = end - start
            while left:
                chunk = fi.read(min(left, 1 << 24))
                fo.write(chunk)
                left -= len(chunk)
            pos = end
        fo.truncate(size)


def time_copy(src: str, dst: str, sparse: bool) -> float:
    start = time.perf_counter()
    if sparse:
        sparse_copy(src, dst)
    else:
        shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)  # rewriter fsyncs what it writes: so does the baseline
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    os.unlink(dst)
    return elapsed


def time_numpy_half(src: str, dst: str, dtype: str) -> float:
    """The least a float32 -> half rewrite of the data file does: read it in 16 MiB chunks,
    ``astype`` each (ml_dtypes for bfloat16), write and fsync (the baseline for --dtype)."""
    import ml_dtypes

    target = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    start = time.perf_counter()
    with open(src, "rb") as f, open(dst, "wb") as out:
        while True:
            data = f.read(1 << 24)
            if not data:
                break
            out.write(np.frombuffer(data, np.float32).astype(target).tobytes())
        out.flush()
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - start
    os.unlink(dst)
    return elapsed


def time_convert(model: str, out: str, cwd: str, dtype: str | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one ``rewriter convert`` subprocess."""
    start = time.perf_counter()
    what = ["--dtype", dtype] if dtype else ["--opset", "18"]
    proc = subprocess.Popen([sys.executable, "-m", "rewriter", "convert", model, *what, "-o", out],
                            cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"rewriter convert failed with exit status {proc.returncode}")
    for name in (out, out + ".data"):
        if os.path.exists(name):
            os.unlink(name)
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.5, help="size of the external initializer (GiB)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs of each (median and range)")
    parser.add_argument("--dense", action="store_true",
                        help="write every byte of the data file instead of a sparse file")
    parser.add_argument("--dtype", choices=("float16", "bfloat16"), default=None,
                        help="convert the weights to this type instead of the opset to 18")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench_large_", dir=args.dir)
    try:
        model_dir = os.path.join(root, "model")
        os.mkdir(model_dir)
        model = build(model_dir, args.gib, args.dense)
        data = os.path.join(model_dir, "weights.bin")
        copies, converts = [], []
        for _ in range(args.runs):  # interleaved
            if args.dtype:
                copies.append(time_numpy_half(data, os.path.join(model_dir, "copy.bin"), args.dtype))
            else:
                copies.append(time_copy(data, os.path.join(model_dir, "copy.bin"), sparse=not args.dense))
            converts.append(time_convert(model, os.path.join(model_dir, "out.onnx"), cwd=root, dtype=args.dtype))
        walls = [c[0] for c in converts]
        copy_s, wall_s = statistics.median(copies), statistics.median(walls)
        ratios = [w / c for w, c in zip(walls, copies)]
        rss = max(c[1] for c in converts)
        kind = "dense" if args.dense else "sparse"
        base = "shutil.copyfile" if args.dense else "sparse-aware copy (holes kept)"
        if args.dtype:
            base = f"numpy: the data file read in 16 MiB chunks, astype {args.dtype}, written"
        print(f"machine: {machine()}")
        job = f"float32 -> {args.dtype}" if args.dtype else "opset 13 -> 18"
        print(f"model: {args.gib} GiB external float32 initializer ({kind} file), {job}; {args.runs} interleaved runs")
        print(f"baseline {base}: median {copy_s:.2f} s [{min(copies):.2f}-{max(copies):.2f}]")
        print(f"rewriter convert: median {wall_s:.2f} s [{min(walls):.2f}-{max(walls):.2f}], peak RSS {rss:.0f} MiB")
        print(f"ratio convert / copy: median {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] "
              f"(bar 1.5x on the medians: {'met' if wall_s <= 1.5 * copy_s else 'NOT met'})")
        print(f"peak RSS: {rss:.0f} MiB (bar 600 MiB: {'met' if rss <= 600 else 'NOT met'})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
