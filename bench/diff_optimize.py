"""Where does `rewriter optimize` leave nodes that another tool removes? (issue 19 diagnosis)

Reads the results bench_optimize.py --models ... --keep DIR wrote (DIR/<model>.<tool>.onnx) and,
per model where a tool leaves fewer nodes than rewriter, prints the op-type histogram diff and
counts the nodes of rewriter's result that sit in known removable patterns (each count is
what the pattern accounts for in rewriter's result, with one excerpt):

  shape_chain   nodes computing a shape from Shape(x) (Shape/Gather/Unsqueeze/Concat/Slice/
                Squeeze/Cast/Mul/Div/Add/Sub/... on int64 values) feeding Reshape/Expand/
                ConstantOfShape/Tile/Range/Slice/Resize
  const_node    Constant nodes
  cast_noop     Cast to the type its input already has
  reshape_pair  Reshape of a Reshape's output
  transpose_pair Transpose of a Transpose's output
  identity      Identity / Dropout
  batchnorm     BatchNormalization left (unfused)
  squeeze_pair  Unsqueeze/Squeeze of the other's output

    python bench/diff_optimize.py --keep DIR [--json DIR/bench.json] [--models NAME ...] [--against onnxslim]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPE_CONSUMERS = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0, "Tile": 1, "Range": None, "Slice": None,
                   "Resize": None, "Upsample": 1, "Pad": 1, "OneHot": 1, "TopK": 1, "Split": 1, "Squeeze": 1,
                   "Unsqueeze": 1, "ReduceSum": 1, "ReduceMean": 1, "Gather": None, "Where": None}
INT_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Mul", "Div", "Add", "Sub",
           "Floor", "Ceil", "Equal", "Where", "ReduceProd", "Reshape", "Identity", "Constant", "Range", "Size",
           "Max", "Min", "Neg", "Sqrt", "Expand", "ConstantOfShape", "Greater", "Less", "Not", "And", "Or"}


def _types(m: onnx.ModelProto) -> dict:
    try:
        inferred = onnx.shape_inference.infer_shapes(m, data_prop=True)
    except Exception:  # noqa: BLE001
        inferred = m
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        t = vi.type.tensor_type
        dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim] \
            if t.HasField("shape") else None
        out[vi.name] = (t.elem_type, dims)
    for t in inferred.graph.initializer:
        out[t.name] = (t.data_type, list(t.dims))
    return out


def _attrs(n) -> str:
    parts = []
    for a in n.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, onnx.TensorProto):
            arr = onnx.numpy_helper.to_array(v)
            v = arr.tolist() if arr.size <= 8 else f"tensor{list(arr.shape)}"
        elif isinstance(v, bytes):
            v = v.decode(errors="replace")
        elif isinstance(v, onnx.GraphProto):
            v = "graph"
        parts.append(f"{a.name}={v}")
    return ",".join(parts)


def _const_values(m: onnx.ModelProto) -> dict:
    vals = {}
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.INT64 and len(t.dims) <= 1:
            a = onnx.numpy_helper.to_array(t)
            if a.size <= 8:
                vals[t.name] = a.tolist()
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            a = onnx.numpy_helper.to_array(n.attribute[0].t)
            if a.size <= 8:
                vals[n.output[0]] = a.tolist()
    return vals


def _float_consts(m: onnx.ModelProto) -> dict:
    """Constant float tensors (initializers that are not graph inputs, Constant nodes, and
    Identity of either), name -> array."""
    import numpy as np

    graph_inputs = {i.name for i in m.graph.input}
    out = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer
           if t.name not in graph_inputs and t.data_type in (1, 10, 11, 16)}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value" \
                and n.attribute[0].t.data_type in (1, 10, 11, 16):
            out[n.output[0]] = onnx.numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Identity" and n.input[0] in out:
            out[n.output[0]] = out[n.input[0]]
    return {k: np.asarray(v) for k, v in out.items()}


def _per_channel(a) -> bool:
    """Shape [1, C, 1, ...] or [C, 1, ...]: a Conv bias written as an Add."""
    s = list(a.shape)
    if len(s) >= 3 and s[0] == 1:
        s = s[1:]
    return len(s) >= 2 and all(d == 1 for d in s[1:])


def _neutral(op, a) -> bool:
    import numpy as np

    return a.size > 0 and bool(np.all(a == (0 if op in ("Add", "Sub") else 1)))


def patterns(m: onnx.ModelProto) -> dict:
    """pattern -> {"nodes": count, "example": [lines]} on the main graph."""
    g = m.graph
    types = _types(m)
    consts = _const_values(m)
    prod = {o: n for n in g.node for o in n.output}
    uses = defaultdict(list)
    for n in g.node:
        for i, x in enumerate(n.input):
            uses[x].append((n, i))
    found = defaultdict(lambda: {"nodes": 0, "example": [], "sites": 0})

    def show(n):
        ins = ", ".join(f"{x}{(':' + str(consts[x])) if x in consts else ''}"
                        f"{(' ' + str(types[x][1])) if x in types and x not in consts else ''}" for x in n.input)
        outs = ", ".join(f"{o} {types.get(o, (0, '?'))[1]}" for o in n.output)
        return f"{n.op_type}({ins}) [{_attrs(n)}] -> {outs}"

    # shape chains: backward from each shape input of a consumer, over int ops, to Shape nodes
    in_chain = set()
    for n in g.node:
        if n.op_type not in SHAPE_CONSUMERS:
            continue
        slots = [SHAPE_CONSUMERS[n.op_type]] if SHAPE_CONSUMERS[n.op_type] is not None else range(1, len(n.input))
        for s in slots:
            if s >= len(n.input) or not n.input[s] or n.input[s] in consts:
                continue
            seen, stack, has_shape = [], [n.input[s]], False
            while stack:
                v = stack.pop()
                p = prod.get(v)
                if p is None or p.op_type not in INT_OPS or id(p) in {id(x) for x in seen}:
                    continue
                if p.op_type == "Shape":
                    has_shape = True
                    seen.append(p)
                    continue
                seen.append(p)
                stack.extend(p.input)
            if has_shape and seen:
                new = [p for p in seen if p.name + "|" + p.output[0] not in in_chain]
                for p in new:
                    in_chain.add(p.name + "|" + p.output[0])
                f = found[f"shape_chain->{n.op_type}"]
                f["nodes"] += len(new)
                f["sites"] += 1
                if not f["example"] and 3 <= len(seen) <= 10:
                    f["example"] = [show(p) for p in reversed(seen)] + ["=> " + show(n)]
    farr = _float_consts(m)
    for n in g.node:
        key = None
        other = [x for x in n.input if x not in farr]
        if n.op_type == "Add" and len(other) == 1 and prod.get(other[0]) is not None \
                and prod[other[0]].op_type in ("Conv", "ConvTranspose") and len(uses[other[0]]) == 1 \
                and _per_channel(farr[[x for x in n.input if x in farr][0]]):
            key = "conv_add_bias"
        elif n.op_type in ("Add", "Sub", "Mul", "Div") and len(other) == 1 and len(n.input) == 2 \
                and _neutral(n.op_type, farr[[x for x in n.input if x in farr][0]]):
            key = "neutral_" + ("scalar" if farr[[x for x in n.input if x in farr][0]].ndim == 0 else "tensor")
        elif n.op_type == "Cast" and prod.get(n.input[0]) is not None and prod[n.input[0]].op_type == "Cast":
            key = "cast_pair"
        elif n.op_type == "Equal" and any(consts.get(x) is not None and isinstance(consts[x], list)
                                          and consts[x] and all(v == -1 for v in consts[x]) for x in n.input):
            key = "equal_minus1"
        if key:
            f = found[key]
            f["nodes"] += 1
            f["sites"] += 1
            if len(f["example"]) < 2:
                f["example"].append(" ; ".join(show(prod[x]) for x in n.input if x in prod and x not in farr)[:200]
                                    + " ; " + show(n))
            continue
        if n.op_type == "Constant":
            key = "const_node"
        elif n.op_type == "Cast" and n.input[0] in types and types[n.input[0]][0] == n.attribute[0].i:
            key = "cast_noop"
        elif n.op_type in ("Identity", "Dropout"):
            key = n.op_type.lower()
        elif n.op_type == "BatchNormalization":
            key = "batchnorm"
        elif n.op_type in ("Reshape", "Transpose", "Squeeze", "Unsqueeze") and prod.get(n.input[0]) is not None:
            p = prod[n.input[0]]
            if n.op_type == p.op_type == "Reshape":
                key = "reshape_pair"
            elif n.op_type == p.op_type == "Transpose":
                key = "transpose_pair"
            elif {n.op_type, p.op_type} == {"Squeeze", "Unsqueeze"}:
                key = "squeeze_pair"
            elif n.op_type == "Reshape" and p.op_type in ("Squeeze", "Unsqueeze", "Flatten"):
                key = "reshape_after_squeeze"
        if key:
            f = found[key]
            f["nodes"] += 1
            f["sites"] += 1
            if len(f["example"]) < 2:
                p = prod.get(n.input[0]) if n.input else None
                f["example"].append((show(p) + " ; " if p is not None and key.endswith("pair") else "") + show(n))
    return dict(found)


def contexts(m: onnx.ModelProto, ops) -> Counter:
    """(producer of each input or 'const'/'input') -> op -> (consumer ops) signature counts, for ops."""
    g = m.graph
    consts = {t.name for t in g.initializer} | {n.output[0] for n in g.node if n.op_type == "Constant"}
    inputs = {i.name for i in g.input} - consts
    prod = {o: n for n in g.node for o in n.output}
    uses = defaultdict(list)
    for n in g.node:
        for x in n.input:
            uses[x].append(n.op_type)
    outs = {o.name for o in g.output}
    c = Counter()
    for n in g.node:
        if n.op_type not in ops:
            continue
        src = ",".join("const" if x in consts else "input" if x in inputs else prod[x].op_type if x in prod else "-"
                       for x in n.input)
        dst = ",".join(sorted(uses[n.output[0]])) + ("+output" if n.output[0] in outs else "")
        c[f"{src} -> {n.op_type} -> {dst}"] += 1
    return c


def diff(a: dict, b: dict) -> str:
    keys = sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) - b.get(k, 0)))
    return ", ".join(f"{k} {a.get(k, 0)}/{b.get(k, 0)}" for k in keys if a.get(k, 0) != b.get(k, 0))


def _from_files(keep, others) -> dict:
    """The same shape as bench.json's results, from the result files alone (validity assumed)."""
    import glob

    from optimize_real import all_nodes, histogram

    res = {}
    for path in sorted(glob.glob(os.path.join(keep, "*.rewriter.onnx"))):
        name = os.path.basename(path)[:-len(".rewriter.onnx")]
        tools = {}
        for t in ["rewriter", *others]:
            p = os.path.join(keep, f"{name}.{t}.onnx")
            if os.path.exists(p):
                m = onnx.load(p)
                tools[t] = {"nodes": sum(1 for _ in all_nodes(m)), "ops": histogram(m), "valid": True}
        res[name] = {"source": {"nodes": "?"}, "tools": tools}
    return res


def interface_report(res, tools) -> str:
    """Per tool: on how many models the result changed what a user of the file sees besides the
    nodes (bench.json's "interface" records), with examples; idempotence and growth of rewriter."""
    lines = []
    for t in tools:
        changes = defaultdict(list)
        for name, r in res.items():
            a, b = r["source"].get("interface"), r["tools"].get(t, {}).get("interface")
            if not a or not b:
                continue
            for key in ("producer", "doc", "graph_doc", "metadata_props", "node_docs", "functions", "opsets", "ir"):
                if a[key] != b[key]:
                    changes[key].append(f"{name} {a[key]}->{b[key]}")
            if [x[0] for x in a["inputs"]] != [x[0] for x in b["inputs"]] or a["overridable"] != b["overridable"]:
                changes["inputs/overridable"].append(f"{name} {a['overridable'][:3]}->{b['overridable'][:3]}")
            if [x[:2] for x in a["outputs"]] != [x[:2] for x in b["outputs"]]:
                changes["output names/types"].append(name)
            elif [x[2] for x in a["outputs"]] != [x[2] for x in b["outputs"]]:
                changes["output shapes"].append(f"{name} {[x[2] for x in a['outputs']][:2]}->{[x[2] for x in b['outputs']][:2]}")
            if b["value_info"] > a["value_info"]:
                changes["value_info added"].append(f"{name} {a['value_info']}->{b['value_info']}")
            if r["tools"][t]["bytes"] > r["source"]["bytes"]:
                changes["file grows"].append(f"{name} {r['source']['bytes']}->{r['tools'][t]['bytes']}")
        lines.append(f"{t}:")
        for key, items in sorted(changes.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {key}: {len(items)} models, e.g. {'; '.join(items[:4])}")
    again = [(n, r["tools"]["rewriter"]["nodes"], r["rewriter_again"]["nodes"]) for n, r in res.items()
             if "nodes" in r.get("rewriter_again", {}) and "nodes" in r["tools"].get("rewriter", {})]
    moved = [x for x in again if x[1] != x[2]]
    lines.append(f"rewriter run twice: node count changed on {len(moved)} of {len(again)} models: {moved}")
    grew = [(n, r["tools"]["rewriter"]["bytes"], r["rewriter_again"]["bytes"]) for n, r in res.items()
            if "bytes" in r.get("rewriter_again", {}) and r["rewriter_again"]["bytes"] != r["tools"]["rewriter"]["bytes"]]
    lines.append(f"rewriter run twice: bytes changed on {len(grew)}: {grew[:8]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", required=True)
    ap.add_argument("--json")
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--against", default="onnxslim,onnxsim,onnxscript")
    ap.add_argument("--summary-json", help="write pattern counts per model here")
    ap.add_argument("--interface", action="store_true", help="only the interface/idempotence/growth report")
    args = ap.parse_args(argv)
    if args.interface:
        res = json.load(open(args.json or os.path.join(args.keep, "bench.json")))["results"]
        print(interface_report(res, ["rewriter", *args.against.split(",")]))
        return 0
    others = args.against.split(",")
    path = args.json or os.path.join(args.keep, "bench.json")
    res = json.load(open(path))["results"] if os.path.exists(path) else _from_files(args.keep, others)
    totals = Counter()
    per_model = {}
    for name, r in res.items():
        if args.models and name not in args.models:
            continue
        rw = r["tools"].get("rewriter", {})
        if "nodes" not in rw:
            continue
        better = {t: r["tools"][t]["nodes"] for t in others
                  if r["tools"].get(t, {}).get("valid") and r["tools"][t]["nodes"] < rw["nodes"]}
        if not better:
            continue
        print(f"== {name}: source {r['source']['nodes']}, rewriter {rw['nodes']}, "
              + ", ".join(f"{t} {v}" for t, v in better.items()))
        for t in better:
            print(f"  ops rewriter/{t} (excess first): {diff(rw['ops'], r['tools'][t]['ops'])}")
        m = onnx.load(os.path.join(args.keep, f"{name}.rewriter.onnx"))
        pats = patterns(m)
        loaded = {t: onnx.load(os.path.join(args.keep, f"{name}.{t}.onnx")) for t in better}
        ref = {t: patterns(x) for t, x in loaded.items()}
        best = min(better, key=better.get)
        excess = {k for k, v in rw["ops"].items() if v > r["tools"][best]["ops"].get(k, 0)}
        mine, theirs = contexts(m, excess), contexts(loaded[best], excess)
        print(f"  contexts (producers -> op -> consumers), rewriter - {best}:")
        for sig, k in sorted(((sig, mine[sig] - theirs.get(sig, 0)) for sig in mine), key=lambda x: -x[1])[:8]:
            if k > 0:
                print(f"    +{k:<4} {sig}   (rewriter {mine[sig]}, {best} {theirs.get(sig, 0)})")
        per_model[name] = {"rewriter": {k: v["nodes"] for k, v in pats.items()},
                           **{t: {k: v["nodes"] for k, v in p.items()} for t, p in ref.items()}}
        for k, v in sorted(pats.items(), key=lambda kv: -kv[1]["nodes"]):
            theirs = ref[best].get(k, {}).get("nodes", 0)
            print(f"  {k:<24} rewriter {v['nodes']:>4} nodes at {v['sites']:>3} sites; {best} {theirs}")
            if v["nodes"] > theirs:
                totals[k] += v["nodes"] - theirs
            for line in v["example"][:12]:
                print(f"      {line[:220]}")
    print("\nnodes in each pattern beyond the best other tool's count, summed over those models:")
    for k, v in totals.most_common():
        print(f"  {k:<24} {v}")
    if args.summary_json:
        json.dump(per_model, open(args.summary_json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
