"""Convert 50,000-node models between opsets 13 and 18: `rewriter convert` vs onnx's C++ converter.

Two models, each converted 13 -> 18 by both tools as whole processes, file to file, in the
same run, interleaved (so machine noise hits both alike):

- ``reduceprod``: blocks of (Relu, Add, Sigmoid, ReduceProd);
- ``mixed``: blocks of (Add, ReduceMean, Squeeze, Unsqueeze, ReduceMax): every block needs
  real conversions of ops other than ReduceProd (ReduceMean/ReduceMax axes attribute ->
  input at 18), next to the Squeeze/Unsqueeze that take axes as inputs.

Then each model's rewriter output is converted back down 18 -> 13 by rewriter alone:
onnx's converter fails on these models going down ("No Adapter From Version $14 for Add" /
"... for Relu": it has no 14 -> 13 adapters), so there is nothing to compare it with (the line
says so).

Prints, per model and side: median and range of the runs, the ratio of the medians, and the
bar (rewriter <= 1.2x the C++ converter upward).

    python bench/bench_convert.py [--repeat 5] [--nodes 50000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BAR = 1.2

ONNX_CONVERTER = (
    "import sys, onnx\n"
    "from onnx import version_converter\n"
    "onnx.save(version_converter.convert_version(onnx.load(sys.argv[1]), int(sys.argv[3])), sys.argv[2])\n"
)


def build_reduceprod(path: str, nodes: int) -> int:
    """nodes/4 x (Relu, Add, Sigmoid, ReduceProd); returns the number of ReduceProd nodes."""
    blocks = nodes // 4
    out, prev = [], "x"
    for i in range(blocks):
        out += [
            helper.make_node("Relu", [prev], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("Add", [f"r{i}", "bias"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Sigmoid", [f"a{i}"], [f"s{i}"], name=f"sigmoid{i}"),
            helper.make_node("ReduceProd", [f"s{i}"], [f"p{i}"], name=f"prod{i}", axes=[1], keepdims=1),
        ]
        prev = f"p{i}"
    _save(path, out, prev, [4, 1], [numpy_helper.from_array(np.zeros([1], dtype=np.float32), "bias")])
    return blocks


def build_mixed(path: str, nodes: int) -> int:
    """nodes/5 x (Add, ReduceMean, Squeeze, Unsqueeze, ReduceMax); returns the Reduce* count."""
    blocks = nodes // 5
    out, prev = [], "x"
    for i in range(blocks):
        out += [
            helper.make_node("Add", [prev, "bias"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("ReduceMean", [f"a{i}"], [f"m{i}"], name=f"mean{i}", axes=[1], keepdims=1),
            helper.make_node("Squeeze", [f"m{i}", "axis1"], [f"q{i}"], name=f"squeeze{i}"),
            helper.make_node("Unsqueeze", [f"q{i}", "axis1"], [f"u{i}"], name=f"unsqueeze{i}"),
            helper.make_node("ReduceMax", [f"u{i}"], [f"x{i}"], name=f"max{i}", axes=[1], keepdims=1),
        ]
        prev = f"x{i}"
    _save(path, out, prev, [4, 1], [numpy_helper.from_array(np.full([8], 0.5, dtype=np.float32), "bias"),
                                    numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")])
    return 2 * blocks


def _save(path, nodes, last, shape, inits) -> None:
    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def ours(src: str, dst: str, opset: int) -> list[str]:
    return [sys.executable, "-m", "rewriter", "convert", src, "--opset", str(opset), "-o", dst, "-q"]


def theirs(src: str, dst: str, opset: int) -> list[str]:
    return [sys.executable, "-c", ONNX_CONVERTER, src, dst, str(opset)]


def stats(times: list[float]) -> str:
    return f"median {statistics.median(times):.3f} s (range {min(times):.3f}-{max(times):.3f})"


def converted_reduces(path: str) -> tuple[int, int]:
    """(Reduce* nodes with axes as an input, Reduce* nodes with an axes attribute) in a model."""
    model = onnx.load(path, load_external_data=False)
    reduces = [n for n in model.graph.node if n.op_type.startswith("Reduce")]
    return (sum(len(n.input) == 2 for n in reduces), sum(any(a.name == "axes" for a in n.attribute) for n in reduces))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=50000)
    args = parser.parse_args()
    failed = False
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores, load average {load:.2f} at start; python {sys.version.split()[0]}, "
          f"onnx {onnx.__version__}")
    # as pip installs it: bytecode compiled (an editable install, or PYTHONDONTWRITEBYTECODE,
    # would make every run compile the package again, which onnx's installed wheel never does)
    package = subprocess.run([sys.executable, "-c", "import os, rewriter; print(os.path.dirname(rewriter.__file__))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in (("reduceprod", build_reduceprod), ("mixed", build_mixed)):
            src = os.path.join(tmp, f"{name}13.onnx")
            reduces = build(src, args.nodes)
            up_ours, up_theirs, down_ours = os.path.join(tmp, f"{name}_ours18.onnx"), \
                os.path.join(tmp, f"{name}_theirs18.onnx"), os.path.join(tmp, f"{name}_ours13.onnx")
            t_ours, t_theirs, t_down = [], [], []
            for _ in range(args.repeat):  # interleaved
                t_theirs.append(timed(theirs(src, up_theirs, 18)))
                t_ours.append(timed(ours(src, up_ours, 18)))
                t_down.append(timed(ours(up_ours, down_ours, 13)))
            ratio = statistics.median(t_ours) / statistics.median(t_theirs)
            met = ratio <= BAR
            failed |= not met
            as_input, _ = converted_reduces(up_ours)
            _, as_attr = converted_reduces(down_ours)
            print(f"model {name}: {args.nodes} nodes ({reduces} Reduce* nodes to convert), {args.repeat} interleaved runs")
            print(f"  13 -> 18 onnx C++ converter (load, convert_version, save): {stats(t_theirs)}")
            print(f"  13 -> 18 rewriter convert:                                 {stats(t_ours)}")
            print(f"  ratio of medians rewriter / onnx converter: {ratio:.2f}x (bar: <= {BAR:.2f}x) "
                  f"{'MET' if met else 'NOT MET'}")
            print(f"  18 -> 13 rewriter convert alone (onnx's converter fails: no 14 -> 13 adapter for Add/Relu): "
                  f"{stats(t_down)}")
            print(f"  Reduce* with axes as input after 13->18: {as_input}/{reduces}; "
                  f"with the axes attribute again after 18->13: {as_attr}/{reduces}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
