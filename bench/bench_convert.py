"""Convert a 50,000-node opset-13 model to 18: `rewriter convert` vs onnx's C++ converter.

Both run as whole processes, file to file, in the same run; prints both times and the
ratio (bar: rewriter at most 1.5x the C++ converter's time).

    python bench/bench_convert.py [--repeat 3] [--blocks 12500]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ONNX_CONVERTER = (
    "import sys, onnx\n"
    "from onnx import version_converter\n"
    "onnx.save(version_converter.convert_version(onnx.load(sys.argv[1]), int(sys.argv[3])), sys.argv[2])\n"
)


def build(path: str, blocks: int) -> None:
    """blocks x (Relu, Add, Sigmoid, ReduceProd): 4 * blocks nodes."""
    nodes, prev = [], "x"
    for i in range(blocks):
        nodes += [
            helper.make_node("Relu", [prev], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("Add", [f"r{i}", "bias"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Sigmoid", [f"a{i}"], [f"s{i}"], name=f"sigmoid{i}"),
            helper.make_node("ReduceProd", [f"s{i}"], [f"p{i}"], name=f"prod{i}", axes=[1], keepdims=1),
        ]
        prev = f"p{i}"
    graph = helper.make_graph(
        nodes, "bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, 1])],
        [numpy_helper.from_array(np.zeros([1], dtype=np.float32), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=12500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "model13.onnx")
        build(src, args.blocks)
        ours_cmd = [sys.executable, "-m", "rewriter", "convert", src, "--opset", "18",
                    "-o", os.path.join(tmp, "ours.onnx")]
        theirs_cmd = [sys.executable, "-c", ONNX_CONVERTER, src, os.path.join(tmp, "theirs.onnx"), "18"]
        ours, theirs = [], []
        for _ in range(args.repeat):  # interleaved, so machine noise hits both alike
            theirs.append(timed(theirs_cmd))
            ours.append(timed(ours_cmd))
        result = onnx.load(os.path.join(tmp, "ours.onnx"))
        prods = sum(n.op_type == "ReduceProd" and len(n.input) == 2 for n in result.graph.node)
    best_ours, best_theirs = min(ours), min(theirs)
    print(f"model: {4 * args.blocks} nodes ({args.blocks} ReduceProd), opset 13 -> 18, best of {args.repeat}")
    print(f"onnx C++ converter (load, convert_version, save): {best_theirs:.3f} s")
    print(f"rewriter convert:                                 {best_ours:.3f} s")
    print(f"ratio rewriter / onnx converter: {best_ours / best_theirs:.2f}x (bar: <= 1.50x) "
          f"{'MET' if best_ours <= 1.5 * best_theirs else 'NOT MET'}")
    print(f"ReduceProd nodes with axes as input in rewriter's output: {prods}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
