"""Benchmark `rewriter optimize` against onnxscript's optimizer, onnxsim and onnxslim.

Models: export-like ONNX graphs generated here (torch legacy-export style shape chains and
Constant nodes, a CNN with BatchNormalization, an attention block, If on a constant
condition, an MLP with Min/Max clamps and repeated subexpressions, a model-local function).
Each tool runs every model in its own fresh process (so peak RSS is the tool's), several
interleaved repetitions; the figures are the median and the range over repetitions.

Per model and tool: nodes after (every scope), node reduction, output size, wall time of the
optimization call (model in memory -> model in memory; imports excluded), peak RSS of the
process, and whether the result is valid (onnx.checker full_check, loads in ONNX Runtime) and
computes the same outputs as the original on random inputs (ONNX Runtime, rtol 1e-4).

    python bench/bench_optimize.py [--reps 5] [--tools rewriter,onnxscript,onnxsim,onnxslim]

With ``--models DIR ...`` it benches the real models in those folders instead (bench/optimize_real.py):
each tool as a user runs it (``rewriter optimize IN -o OUT``, ``onnxslim IN OUT``, ``onnxsim IN OUT``,
``onnxscript.optimizer.optimize`` in a small script), whole-process wall and CPU time, validity,
numerics on the sample input, a second ``rewriter optimize`` of its own result, and ONNX Runtime
latency of the source and of every result (one thread, interleaved runs). onnxslim and onnxsim come
from a separate venv (``--bench-venv``, default /work/venvs/bench: ``pip install onnxslim onnxsim
onnxruntime onnx``), so the project's python stays clean.

    python bench/bench_optimize.py --models /work/corpus/torch /work/corpus/pypi --reps 3 --runs 15 \
        [--only SUBSTR ...] [--skip SUBSTR ...] [--keep DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

TOOLS = ("rewriter", "onnxscript", "onnxsim", "onnxslim")
_RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- models

def _w(name, *shape, scale=0.1):
    return nh.from_array((_RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _const(out, array):
    return h.make_node("Constant", [], [out], value=nh.from_array(np.asarray(array), out + "_value"))


def _model(nodes, inputs, outputs, inits=(), opset=13, functions=(), extra_opsets=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *extra_opsets], functions=list(functions))
    m.ir_version = 8
    m.producer_name = "pytorch"
    m.doc_string = "bench model"
    onnx.checker.check_model(m, full_check=True)
    return m


def legacy_cnn() -> onnx.ModelProto:
    """Conv+BN+Relu blocks, flatten through Shape/Gather/Unsqueeze/Concat/Reshape (static batch), Gemm."""
    nodes, inits, x = [], [], "x"
    c_in = 3
    for i, c_out in enumerate((8, 16, 16)):
        inits += [_w(f"w{i}", c_out, c_in, 3, 3), _w(f"b{i}", c_out)]
        inits += [nh.from_array((_RNG.random(c_out) + 0.5).astype(np.float32), f"s{i}"), _w(f"bb{i}", c_out),
                  _w(f"m{i}", c_out), nh.from_array((_RNG.random(c_out) + 0.5).astype(np.float32), f"v{i}")]
        nodes += [h.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  h.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"bb{i}", f"m{i}", f"v{i}"], [f"n{i}"],
                              name=f"bn{i}"),
                  h.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        x, c_in = f"r{i}", c_out
    nodes += [h.make_node("Shape", [x], ["sh"]), _const("i0", np.array(0, np.int64)),
              h.make_node("Gather", ["sh", "i0"], ["g0"], axis=0), _const("ax0", np.array([0], np.int64)),
              h.make_node("Unsqueeze", ["g0", "ax0"], ["u0"]), _const("minus1", np.array([-1], np.int64)),
              h.make_node("Concat", ["u0", "minus1"], ["cat"], axis=0),
              h.make_node("Reshape", [x, "cat"], ["flat"]),
              h.make_node("Identity", ["flat"], ["flat_id"])]
    inits += [_w("fc_w", 10, 16 * 8 * 8), _w("fc_b", 10)]
    nodes += [h.make_node("Gemm", ["flat_id", "fc_w", "fc_b"], ["y"], name="fc", transB=1)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 8, 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, [2, 10])], inits)


def attention(dynamic: bool = False) -> onnx.ModelProto:
    """One self-attention block as a legacy export writes it: LayerNorm decomposed, Q/K/V
    MatMul+Add, head split through shape chains, scale from Sqrt(Constant), softmax.
    ``dynamic``: batch and sequence are symbolic (B, S), the output reshape computed too."""
    B, S, D, H = 2, 16, 32, 4
    nodes, inits = [], []
    # LayerNorm, decomposed
    inits += [nh.from_array(np.ones(D, np.float32), "ln_g"), nh.from_array(np.zeros(D, np.float32), "ln_b")]
    nodes += [h.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]), h.make_node("Sub", ["x", "mu"], ["xc"]),
              _const("two", np.array(2.0, np.float32)), h.make_node("Pow", ["xc", "two"], ["sq"]),
              h.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]), _const("eps", np.array(1e-5, np.float32)),
              h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
              h.make_node("Div", ["xc", "sd"], ["xn"]), h.make_node("Mul", ["xn", "ln_g"], ["xg"]),
              h.make_node("Add", ["xg", "ln_b"], ["h0"])]
    for p in "qkv":
        inits += [_w(f"W{p}", D, D), _w(f"B{p}", D)]
        nodes += [h.make_node("MatMul", ["h0", f"W{p}"], [f"{p}0"]), h.make_node("Add", [f"{p}0", f"B{p}"], [f"{p}1"])]
        # legacy-export head split: shape from Shape/Gather/Unsqueeze/Concat
        nodes += [h.make_node("Shape", [f"{p}1"], [f"{p}_sh"]),
                  _const(f"{p}_i0", np.array(0, np.int64)), h.make_node("Gather", [f"{p}_sh", f"{p}_i0"], [f"{p}_b"], axis=0),
                  _const(f"{p}_i1", np.array(1, np.int64)), h.make_node("Gather", [f"{p}_sh", f"{p}_i1"], [f"{p}_s"], axis=0),
                  _const(f"{p}_a", np.array([0], np.int64)),
                  h.make_node("Unsqueeze", [f"{p}_b", f"{p}_a"], [f"{p}_bu"]),
                  h.make_node("Unsqueeze", [f"{p}_s", f"{p}_a"], [f"{p}_su"]),
                  _const(f"{p}_hd", np.array([H, D // H], np.int64)),
                  h.make_node("Concat", [f"{p}_bu", f"{p}_su", f"{p}_hd"], [f"{p}_shape"], axis=0),
                  h.make_node("Reshape", [f"{p}1", f"{p}_shape"], [f"{p}2"]),
                  h.make_node("Transpose", [f"{p}2"], [f"{p}3"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [_const("dh", np.array(D // H, np.float32)), h.make_node("Sqrt", ["dh"], ["scale"]),
              h.make_node("MatMul", ["q3", "k3"], ["qk"]), h.make_node("Div", ["qk", "scale"], ["qks"]),
              h.make_node("Softmax", ["qks"], ["att"], axis=-1), h.make_node("MatMul", ["att", "v3"], ["ctx"]),
              h.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              ]
    if dynamic:
        nodes += [_const("dD", np.array([D], np.int64)),
                  h.make_node("Concat", ["q_bu", "q_su", "dD"], ["out_shape"], axis=0)]
    else:
        nodes += [_const("out_shape", np.array([B, S, D], np.int64))]
    nodes += [h.make_node("Reshape", ["ctx_t", "out_shape"], ["ctx_r"])]
    inits += [_w("Wo", D, D), _w("Bo", D)]
    nodes += [h.make_node("MatMul", ["ctx_r", "Wo"], ["o0"]), h.make_node("Add", ["o0", "Bo"], ["o1"]),
              h.make_node("Add", ["o1", "x"], ["y"])]
    dims = ["B", "S", D] if dynamic else [B, S, D]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, dims)],
                  [h.make_tensor_value_info("y", T.FLOAT, dims)], inits)


def dynamic_cnn() -> onnx.ModelProto:
    """Legacy export with a symbolic batch: Conv/Relu, flatten through Shape/Gather/Unsqueeze/
    Concat/Reshape, a channel count from Shape/Gather/Cast."""
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Shape", ["r"], ["s"]), _const("i0", np.array(0, np.int64)),
             h.make_node("Gather", ["s", "i0"], ["b"], axis=0), _const("ax", np.array([0], np.int64)),
             h.make_node("Unsqueeze", ["b", "ax"], ["bu"]), _const("minus1", np.array([-1], np.int64)),
             h.make_node("Concat", ["bu", "minus1"], ["shape"], axis=0), h.make_node("Reshape", ["r", "shape"], ["flat"]),
             h.make_node("Shape", ["r"], ["s2"]), _const("i1", np.array(1, np.int64)),
             h.make_node("Gather", ["s2", "i1"], ["ch"], axis=0), h.make_node("Cast", ["ch"], ["chf"], to=T.FLOAT),
             h.make_node("Div", ["flat", "chf"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 8, 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 512])], [_w("w", 8, 3, 3, 3)])


def if_constant() -> onnx.ModelProto:
    """`if self.training:` exported as If on a constant condition; each branch has constants."""
    then_g = h.make_graph([_const("t_k", np.array(0.5, np.float32)), h.make_node("Mul", ["x", "t_k"], ["t_out"])],
                          "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, [4, 8])])
    else_g = h.make_graph([_const("e_k", np.array(2.0, np.float32)), _const("e_k2", np.array(1.0, np.float32)),
                           h.make_node("Add", ["e_k", "e_k2"], ["e_k3"]),
                           h.make_node("Mul", ["x", "e_k3"], ["e_out"])],
                          "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, [4, 8])])
    nodes = [_const("flag", np.array(False)), h.make_node("Not", ["flag"], ["cond"]),
             h.make_node("If", ["cond"], ["branch"], name="training_if", then_branch=then_g, else_branch=else_g),
             _const("lo", np.array(0.0, np.float32)), _const("hi", np.array(6.0, np.float32)),
             h.make_node("Max", ["branch", "lo"], ["c0"]), h.make_node("Min", ["c0", "hi"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, [4, 8])])


def dynamo_mlp() -> onnx.ModelProto:
    """Dynamo-like MLP: 2-D MatMul+Add (-> Gemm), Cast/Identity chains on constants, repeated
    Shape subexpressions, numel via ReduceProd(Shape), Min/Max clamps."""
    nodes, inits = [], [_w("W1", 16, 32), _w("B1", 32), _w("W2", 32, 8), _w("B2", 8)]
    nodes += [_const("s_f", np.array(3.0, np.float64)), h.make_node("Cast", ["s_f"], ["s_c"], to=T.FLOAT),
              h.make_node("Identity", ["s_c"], ["s_i"]), h.make_node("Mul", ["x", "s_i"], ["xs"]),
              h.make_node("MatMul", ["xs", "W1"], ["h1"]), h.make_node("Add", ["h1", "B1"], ["h2"]),
              _const("lo", np.array(0.0, np.float32)), _const("hi", np.array(6.0, np.float32)),
              h.make_node("Max", ["h2", "lo"], ["h3"]), h.make_node("Min", ["h3", "hi"], ["h4"]),
              h.make_node("MatMul", ["h4", "W2"], ["h5"]), h.make_node("Add", ["h5", "B2"], ["h6"]),
              # two identical subexpressions (CSE) and numel of a static shape
              h.make_node("Shape", ["h6"], ["sa"]), h.make_node("Shape", ["h6"], ["sb"]),
              h.make_node("ReduceProd", ["sa"], ["numel"], keepdims=0),
              h.make_node("Cast", ["numel"], ["numel_f"], to=T.FLOAT),
              h.make_node("Relu", ["h6"], ["r1"]), h.make_node("Relu", ["h6"], ["r2"]),
              h.make_node("Add", ["r1", "r2"], ["r3"]), h.make_node("Div", ["r3", "numel_f"], ["r4"]),
              h.make_node("Reshape", ["r4", "sb"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                  [h.make_tensor_value_info("y", T.FLOAT, [4, 8])], inits)


def with_function() -> onnx.ModelProto:
    """A model-local function whose body holds a constant subexpression, called twice."""
    fn = h.make_function("local", "Scale", ["a"], ["b"],
                         [_const("k", np.array(2.0, np.float32)), _const("k1", np.array(0.5, np.float32)),
                          h.make_node("Mul", ["k", "k1"], ["kk"]), h.make_node("Identity", ["kk"], ["kk1"]),
                          h.make_node("Mul", ["a", "kk1"], ["b"])],
                         opset_imports=[h.make_opsetid("", 13)])
    nodes = [h.make_node("Scale", ["x"], ["t"], domain="local", name="call1"),
             h.make_node("Scale", ["t"], ["u"], domain="local", name="call2"),
             _const("c1", np.array([1.0], np.float32)), _const("c2", np.array([2.0], np.float32)),
             h.make_node("Add", ["c1", "c2"], ["c3"]), h.make_node("Add", ["u", "c3"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])],
                  functions=[fn], extra_opsets=[h.make_opsetid("local", 1)])


MODELS = {"legacy_cnn": legacy_cnn, "dynamic_cnn": dynamic_cnn, "attention": attention,
          "attention_dyn": lambda: attention(dynamic=True), "if_constant": if_constant,
          "dynamo_mlp": dynamo_mlp, "with_function": with_function}


# ---------------------------------------------------------------- one run (child process)

_CHILD = r'''
import json, resource, sys, time
start = time.perf_counter()
import onnx
tool, src, dst = sys.argv[1:4]
model = onnx.load(src)
if tool == "rewriter":
    from rewriter.optimize import optimize_proto
    import rewriter.optimize.pipeline, rewriter.optimize.bridge, rewriter.fold  # imported before timing, as the others
    run = lambda m: optimize_proto(m)[0]
elif tool == "onnxscript":
    import onnxscript.optimizer
    run = lambda m: onnxscript.optimizer.optimize(m)
elif tool == "onnxsim":
    import onnxsim
    def run(m):
        out, ok = onnxsim.simplify(m)
        return out
elif tool == "onnxslim":
    import onnxslim
    run = lambda m: onnxslim.slim(m)
t = time.perf_counter()
out = run(model)
seconds = time.perf_counter() - t
onnx.save(out, dst)
print(json.dumps({"seconds": seconds, "process": time.perf_counter() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def _nodes(m: onnx.ModelProto) -> int:
    def count(g):
        return sum(1 + sum(count(a.g) for a in n.attribute if a.HasField("g"))
                   + sum(count(x) for a in n.attribute for x in a.graphs) for n in g.node)
    return count(m.graph) + sum(count(f) for f in m.functions)


def _feeds(m: onnx.ModelProto) -> dict:
    rng = np.random.default_rng(1)
    feeds = {}
    for vi in m.graph.input:
        dims = [d.dim_value or 2 for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = (rng.random(dims) + 0.5).astype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    return feeds


def _check(original: onnx.ModelProto, path: str) -> str:
    """'ok', or why the result is invalid / computes something else."""
    import onnxruntime as ort

    try:
        result = onnx.load(path)
        onnx.checker.check_model(result, full_check=True)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        feeds = _feeds(original)
        got = ort.InferenceSession(result.SerializeToString(), options).run(None, feeds)
        want = ort.InferenceSession(original.SerializeToString(), options).run(None, feeds)
        for g, w in zip(got, want):
            if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-6):
                return "different outputs"
    except Exception as e:  # noqa: BLE001 - any failure makes the result invalid
        return "invalid: " + " ".join(str(e).split())[:80]
    notes = []
    added = {n.domain for n in _all(result)} - {n.domain for n in _all(original)} - {"", "ai.onnx"}
    if added:
        notes.append(f"adds {'/'.join(sorted(added))} ops")
    if len(result.functions) < len(original.functions):
        notes.append("expands functions")
    return "ok" + (f" ({'; '.join(notes)})" if notes else "")


def _all(m: onnx.ModelProto):
    def walk(g):
        for n in g.node:
            yield n
            for a in n.attribute:
                if a.HasField("g"):
                    yield from walk(a.g)
                for x in a.graphs:
                    yield from walk(x)
    yield from walk(m.graph)
    for f in m.functions:
        yield from walk(f)


def _available(tool: str) -> bool:
    import importlib.util

    return importlib.util.find_spec({"rewriter": "rewriter.optimize"}.get(tool, tool)) is not None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--models", nargs="+", metavar="DIR", help="bench the *.onnx files in these folders")
    parser.add_argument("--only", nargs="+", metavar="SUBSTR", help="with --models: names containing one of these")
    parser.add_argument("--skip", nargs="+", metavar="SUBSTR", help="with --models: skip names containing these")
    parser.add_argument("--runs", type=int, default=15, help="with --models: ORT runs per session")
    parser.add_argument("--keep", metavar="DIR", help="with --models: write the results here")
    parser.add_argument("--json-out", metavar="FILE", help="with --models: every figure as JSON")
    parser.add_argument("--bench-venv", default="/work/venvs/bench", help="venv holding onnxslim and onnxsim")
    parser.add_argument("--rewriter-src", metavar="DIR", help="with --models: run `python -m rewriter` from this "
                        "folder (e.g. `git archive HEAD rewriter | tar -x -C DIR`), not the installed one")
    parser.add_argument("--from-json", metavar="FILE", help="print the report of a saved --json-out file (also a "
                        "partial one) and exit; with --markdown also as a Markdown table")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.from_json:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import optimize_real

        return optimize_real.from_json(args.from_json, args.markdown)
    if args.models:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import optimize_real

        if args.tools == ",".join(TOOLS):
            args.tools = "rewriter,onnxslim,onnxsim,onnxscript"
        return optimize_real.main(args)
    tools = [t for t in args.tools.split(",") if _available(t)]
    missing = [t for t in args.tools.split(",") if t not in tools]
    results: dict = {}
    with tempfile.TemporaryDirectory() as d:
        sources = {}
        for name, build in MODELS.items():
            sources[name] = os.path.join(d, f"{name}.onnx")
            onnx.save(build(), sources[name])
        for rep in range(args.reps):
            for name, src in sources.items():
                order = tools[rep % len(tools):] + tools[:rep % len(tools)]  # interleaved, rotated
                for tool in order:
                    dst = os.path.join(d, f"{name}.{tool}.onnx")
                    done = subprocess.run([sys.executable, "-c", _CHILD, tool, src, dst], capture_output=True,
                                          text=True, timeout=600)
                    r = results.setdefault((name, tool), {"seconds": [], "process": [], "rss_mb": []})
                    if done.returncode != 0:
                        r["error"] = (done.stderr.strip().splitlines() or ["failed"])[-1][:100]
                        continue
                    stats = json.loads(done.stdout.strip().splitlines()[-1])
                    r["seconds"].append(stats["seconds"])
                    r["process"].append(stats["process"])
                    r["rss_mb"].append(stats["rss_mb"])
                    if rep == 0:
                        original = onnx.load(src)
                        r["before"], r["after"] = _nodes(original), _nodes(onnx.load(dst))
                        r["bytes"] = os.path.getsize(dst)
                        r["check"] = _check(original, dst)
    _print(results, tools, missing, args)
    return 0


def _span(values, fmt):
    if not values:
        return "-"
    return f"{fmt(statistics.median(values))} [{fmt(min(values))}-{fmt(max(values))}]"


def _print(results, tools, missing, args) -> None:
    if args.json:
        print(json.dumps({f"{m}/{t}": r for (m, t), r in results.items()}, indent=1))
        return
    print(f"bench_optimize: {len(MODELS)} models x {len(tools)} tools, {args.reps} interleaved repetitions "
          f"(median [min-max]); tools missing: {', '.join(missing) or 'none'}")
    print(f"{'model':<14} {'tool':<11} {'nodes':>9} {'removed':>8} {'bytes':>8} {'call ms':>22} "
          f"{'process ms':>22} {'peak RSS MB':>16}  result")
    best_ok = best_all = True
    for name in MODELS:
        rows = {t: results.get((name, t), {}) for t in tools}
        for tool in tools:
            r = rows[tool]
            if "after" not in r:
                print(f"{name:<14} {tool:<11} error: {r.get('error', '?')}")
                continue
            removed = (r["before"] - r["after"]) / r["before"] * 100
            print(f"{name:<14} {tool:<11} {r['before']:>4}->{r['after']:<4} {removed:>7.1f}% {r['bytes']:>8} "
                  f"{_span([s * 1000 for s in r['seconds']], lambda v: f'{v:.1f}'):>22} "
                  f"{_span([s * 1000 for s in r['process']], lambda v: f'{v:.0f}'):>22} "
                  f"{_span(r['rss_mb'], lambda v: f'{v:.0f}'):>16}  {r['check']}")
        mine = rows.get("rewriter", {})
        strict = [rows[t]["after"] for t in tools if t != "rewriter" and rows[t].get("check") == "ok"]
        loose = [rows[t]["after"] for t in tools if t != "rewriter" and str(rows[t].get("check")).startswith("ok")]
        if "after" in mine and strict and mine["after"] > min(strict):
            best_ok = False
        if "after" in mine and loose and mine["after"] > min(loose):
            best_all = False
    for key, what in (("seconds", "optimization call"), ("process", "whole process, imports included")):
        times = {t: statistics.median([statistics.median(results[(m, t)][key]) for m in MODELS
                                       if results.get((m, t), {}).get(key)] or [float("nan")]) for t in tools}
        print(f"median wall time per model, {what} (ms): "
              + ", ".join(f"{t} {v * 1000:.1f}" for t, v in times.items()))
        if "rewriter" in times:
            ratios = ", ".join(f"{times['rewriter'] / v:.2f}x {t}" for t, v in times.items() if t != "rewriter" and v)
            print(f"  rewriter / baseline: {ratios}")
    invalid = sum(1 for (m, t), r in results.items() if t == "rewriter" and r.get("check") != "ok")
    print(f"rewriter results not ok: {invalid}")
    print(f"rewriter removes at least as many nodes as the best other tool on every model "
          f"(results that keep functions, standard ops, same outputs): {best_ok}; "
          f"counting also results that expand functions or add vendor ops: {best_all}")


if __name__ == "__main__":
    sys.exit(main())
