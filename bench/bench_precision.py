"""float32 -> float16 on real models: `rewriter convert --dtype float16` against onnxconverter-common and onnxslim.

For every model of a corpus folder (default /work/corpus/fp16, built by tools/corpus/make_fp16.py:
``<name>.onnx`` with its sample input ``<name>.npz``), each tool writes a float16 version, in
one run, as a user runs it (a whole process, file to file):

- ``onnxconverter``: onnxconverter-common's
  ``float16.convert_float_to_float16(model, keep_io_types=True)`` (its defaults otherwise:
  min_positive_val 1e-7, max_finite_val 1e4, the default op block list), in a small script;
- ``onnxslim``: ``onnxslim IN OUT --dtype fp16`` (this makes the graph's float inputs and
  outputs float16 too: such inputs are fed the sample cast to float16, and outputs are cast
  back to float32 to compare);
- ``rewriter``: ``python -m rewriter convert IN --dtype float16 -o OUT`` with this python;
- ``rewriter-optimize``: the same with ``--optimize`` (rewriter's optimizer first, as onnxslim
  slims before it halves: BatchNormalization folded into Conv is one rounding fewer);
- ``rewriter-max-error``: ``convert --dtype float16 --calibration-data SAMPLE --max-error RTOL``:
  runs of nodes kept float32 where half precision is measured to take the error beyond --rtol on
  the model's sample, the same sample it is then judged on (what a user with real inputs gets on
  those inputs; no other tool is given the sample);
- ``rewriter-max-error-flipped``: the same, calibrated on another input: the sample with every
  float input reversed along its last axis (an image mirrored, a waveform played backwards;
  integer inputs as they are), written beside the result; judged on the sample itself, which
  the search never saw.

Each result is judged in this python's onnxruntime (CPU) against the float32 source run there
on the same sample, in this order, and put in the first class that applies:

  tool error               the tool exited non-zero, timed out or wrote nothing
  fails the checker        onnx.checker.check_model(path, full_check=True) raised
  does not load            onnxruntime refused the model, or session.run raised (a missing
                           float16 kernel, a type mismatch, an input the result renamed ...)
  computes something else  an output differs: a float output's relative L2 error
                           ||y - y32|| / ||y32|| above --rtol (1e-2) or NaN/inf where the
                           source has none (or the reverse); a non-float output not equal;
                           another shape or count of outputs
  not halved               file size (external data included) above --max-ratio (0.6) x the source's
  OK                       none of the above

Figures kept for every (model, tool): the class, the reason, wall time of the tool's process,
sizes and ratio, checker/load/run results, and per output its dtype, shape, relative L2 and max
abs error and the count of non-finite values.  Prints a per-model table, the summary table

  | tool | OK | fails the checker | does not load | computes something else | not halved | tool error |

and every non-OK case with its reason; ``--json PATH`` writes all figures.

Set-up (the tools other than rewriter live in their own venv; this python needs only numpy,
onnx, onnxruntime and rewriter itself, which runs as a subprocess):

    python -m venv /work/venvs/fp16
    /work/venvs/fp16/bin/pip install onnxconverter-common onnxslim onnxruntime onnx
    python -c "import rewriter" || pip install -e /work/main
    /work/venvs/torch/bin/python tools/corpus/make_fp16.py            # the corpus (see its docstring)

Run:

    python bench/bench_precision.py [/work/corpus/fp16] [--only NAME ...] \\
        [--tools onnxconverter onnxslim rewriter rewriter-optimize] [-j N] [--json PATH] [--keep DIR] \\
        [--rewriter-src SNAPSHOT] \\
        [--venv /work/venvs/fp16] [--timeout 1800] [--rtol 1e-2] [--max-ratio 0.6]

With -j N, N (model, tool) jobs run at once (each judged with one onnxruntime thread); the
times are then not comparable across tools.  Exit status 0 (the figures are the result).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np
import onnx
import onnxruntime as ort

TOOLS = ("onnxconverter", "onnxslim", "rewriter", "rewriter-optimize", "rewriter-max-error",
         "rewriter-max-error-flipped")
CLASSES = ("OK", "fails the checker", "does not load", "computes something else", "not halved", "tool error")
SHORT = {"OK": "OK", "fails the checker": "checker", "does not load": "no load",
         "computes something else": "differs", "not halved": "not halved", "tool error": "tool error"}

ONNXCONVERTER = r"""
import json, os, sys, time
import onnx
from onnxconverter_common import float16
t0 = time.perf_counter()
model = onnx.load(sys.argv[1])
t1 = time.perf_counter()
out = float16.convert_float_to_float16(model, keep_io_types=True)
t2 = time.perf_counter()
big = out.ByteSize() > 2**31 - 2**20 if hasattr(out, "ByteSize") else False
onnx.save(out, sys.argv[2], save_as_external_data=big, location=os.path.basename(sys.argv[2]) + ".data")
print(json.dumps({"load_seconds": t1 - t0, "convert_seconds": t2 - t1, "save_seconds": time.perf_counter() - t2}))
"""


# ------------------------------------------------------------------ corpus


def corpus_models(folder: str) -> list[dict]:
    """The corpus's models: those manifest.json lists (with their group and source), then every
    other <name>.onnx with a <name>.npz beside it (the groups an earlier run of make_fp16.py wrote)."""
    folder = os.path.abspath(folder)  # (the rewriter tools may run in a snapshot's directory)
    mpath = os.path.join(folder, "manifest.json")
    out = []
    if os.path.exists(mpath):
        for e in json.load(open(mpath)).get("models", []):
            path = os.path.join(folder, e["file"])
            sample = os.path.join(folder, e.get("sample") or e["file"][:-5] + ".npz")
            if os.path.exists(path) and os.path.exists(sample):
                out.append({"name": e["name"], "path": path, "sample": sample, "group": e.get("group"),
                            "source": e.get("source")})
    listed = {os.path.abspath(m["path"]) for m in out}
    for path in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
        sample = path[:-5] + ".npz"
        if os.path.abspath(path) not in listed and os.path.exists(sample):
            out.append({"name": os.path.basename(path)[:-5], "path": path, "sample": sample})
    return out


def _all_tensors(m: onnx.ModelProto):
    """Every tensor of the model: initializers, sparse values, Constant and other tensor
    attributes, in every graph and function."""
    def walk_nodes(nodes):
        for n in nodes:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t
                yield from a.tensors
                if a.type == onnx.AttributeProto.GRAPH:
                    yield from walk(a.g)
                for sg in a.graphs:
                    yield from walk(sg)

    def walk(g):
        yield from g.initializer
        yield from (s.values for s in g.sparse_initializer)
        yield from walk_nodes(g.node)

    yield from walk(m.graph)
    for f in m.functions:
        yield from walk_nodes(f.node)


def model_bytes(path: str) -> int:
    """The file's size plus every external-data file it refers to (each counted once)."""
    total = os.path.getsize(path)
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001
        return total
    locations = {kv.value for t in _all_tensors(m) if t.data_location == onnx.TensorProto.EXTERNAL
                 for kv in t.external_data if kv.key == "location"}
    base = os.path.dirname(os.path.abspath(path))
    for loc in locations:
        p = os.path.join(base, loc)
        if os.path.exists(p):
            total += os.path.getsize(p)
    return total


def tensor_bytes(path: str) -> int | None:
    """The bytes of the model's tensor data (inline or external): what halving can halve; the
    rest of the file is the graph, names and metadata, which a conversion keeps."""
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001
        return None
    total = 0
    for t in _all_tensors(m):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            total += int(next((kv.value for kv in t.external_data if kv.key == "length"), 0) or 0)
        else:
            total += len(t.raw_data) if t.HasField("raw_data") else t.ByteSize()
    return total


# ------------------------------------------------------------------ onnxruntime


def _np_type(ort_type: str):
    table = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
             "tensor(bfloat16)": None, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
             "tensor(int16)": np.int16, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
             "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64,
             "tensor(bool)": np.bool_, "tensor(string)": np.str_}
    return table.get(ort_type)


def session(path: str, threads: int):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run(sess, sample: dict) -> tuple[list[str], list[np.ndarray], list[str]]:
    """Feed the sample (cast to each input's type where they differ, e.g. float16 inputs);
    returns output names, arrays and notes on the casts."""
    feeds, notes = {}, []
    for i in sess.get_inputs():
        if i.name not in sample:
            raise KeyError(f"the model has an input {i.name!r} ({i.type}) that the sample has not "
                           f"(sample: {sorted(sample)})")
        v = sample[i.name]
        want = _np_type(i.type)
        if want is not None and v.dtype != want:
            notes.append(f"{i.name}: {v.dtype} fed as {np.dtype(want)}")
            v = v.astype(want)
        feeds[i.name] = v
    outs = sess.run(None, feeds)
    return [o.name for o in sess.get_outputs()], outs, notes


def compare(ref_names, ref, names, got, rtol) -> tuple[bool, list[dict], str]:
    """Per output figures, whether all agree, and the first disagreement."""
    figures, why = [], ""
    if len(got) != len(ref):
        return False, figures, f"{len(got)} outputs, the source has {len(ref)}"
    by_name = dict(zip(names, got))
    pairs = [(n, r, by_name[n]) for n, r in zip(ref_names, ref)] if set(ref_names) <= set(by_name) else \
        list(zip(ref_names, ref, got))
    ok = True
    for name, r, g in pairs:
        f = {"name": name, "dtype": str(getattr(g, "dtype", type(g).__name__)), "source_dtype": str(r.dtype),
             "shape": list(np.shape(g)), "source_shape": list(r.shape)}
        figures.append(f)
        g = np.asarray(g)
        if g.shape != r.shape:
            ok, f["verdict"] = False, "shape"
            why = why or f"output {name!r}: shape {list(g.shape)}, the source's {list(r.shape)}"
            continue
        if r.dtype.kind in "fc":
            if g.dtype.kind not in "fc":
                ok, f["verdict"] = False, "dtype"
                why = why or f"output {name!r}: {g.dtype}, the source's {r.dtype}"
                continue
            r64, g64 = r.astype(np.float64), g.astype(np.float64)
            fin_r, fin_g = np.isfinite(r64), np.isfinite(g64)
            f["nonfinite"] = int((~fin_g).sum())
            f["source_nonfinite"] = int((~fin_r).sum())
            same_nonfinite = np.array_equal(fin_r, fin_g) and np.array_equal(
                np.nan_to_num(r64[~fin_r], nan=0.0), np.nan_to_num(g64[~fin_g], nan=0.0)) and \
                np.array_equal(np.isnan(r64), np.isnan(g64))
            both = fin_r & fin_g
            num = float(np.linalg.norm((g64 - r64)[both]))
            den = float(np.linalg.norm(r64[both]))
            rel = num / den if den > 0 else (0.0 if num == 0 else float("inf"))
            f["rel_l2"] = rel
            f["max_abs"] = float(np.max(np.abs((g64 - r64)[both]))) if both.any() else 0.0
            f["source_l2"] = den
            if not same_nonfinite:
                ok, f["verdict"] = False, "nonfinite"
                why = why or (f"output {name!r}: {f['nonfinite']} NaN/inf values, the source has "
                              f"{f['source_nonfinite']} (rel L2 of the finite ones {rel:.3g})")
            elif rel > rtol:
                ok, f["verdict"] = False, "error"
                why = why or f"output {name!r}: relative L2 error {rel:.3g} > {rtol:g} (max abs {f['max_abs']:.3g})"
            else:
                f["verdict"] = "ok"
        else:
            equal = g.dtype.kind == r.dtype.kind and np.array_equal(g, r)
            f["equal"] = bool(equal)
            if not equal:
                ok, f["verdict"] = False, "not equal"
                n_diff = int(np.sum(g != r)) if g.dtype.kind == r.dtype.kind else r.size
                why = why or f"output {name!r} ({r.dtype}): {n_diff} of {r.size} values differ"
            else:
                f["verdict"] = "ok"
    return ok, figures, why


# ------------------------------------------------------------------ tools


def tool_command(tool: str, src: str, dst: str, venv: str, sample: str = "SAMPLE", rtol: float = 1e-2) -> list[str]:
    if tool == "onnxconverter":
        return [os.path.join(venv, "bin", "python"), "-c", ONNXCONVERTER, src, dst]
    if tool == "onnxslim":
        return [os.path.join(venv, "bin", "onnxslim"), src, dst, "--dtype", "fp16"]
    if tool == "rewriter":
        return [sys.executable, "-m", "rewriter", "convert", src, "--dtype", "float16", "-o", dst]
    if tool == "rewriter-optimize":
        return [sys.executable, "-m", "rewriter", "convert", src, "--dtype", "float16", "--optimize", "-o", dst]
    if tool in ("rewriter-max-error", "rewriter-max-error-flipped"):
        return [sys.executable, "-m", "rewriter", "convert", src, "--dtype", "float16", "--calibration-data", sample,
                "--max-error", f"{rtol:g}", "-o", dst]
    raise ValueError(tool)


def tool_version(tool: str, venv: str) -> str | None:
    code = {"onnxconverter": "import onnxconverter_common as m; print(m.__version__)",
            "onnxslim": "import onnxslim as m; print(m.__version__)",
            "rewriter": "import rewriter as m; print(getattr(m, '__version__', '?'))"}[tool.split("-")[0]]
    py = sys.executable if tool.startswith("rewriter") else os.path.join(venv, "bin", "python")
    try:
        r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120)
        return r.stdout.strip() or r.stderr.strip().splitlines()[-1]
    except Exception as e:  # noqa: BLE001
        return f"unavailable: {e}"


def judge(model: dict, tool: str, out_dir: str, ref: dict, args) -> dict:
    src = model["path"]
    dst = os.path.join(out_dir, tool, model["name"] + ".onnx")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    for stale in glob.glob(dst + "*") + glob.glob(dst[:-5] + ".calibration.npz"):
        os.remove(stale)
    sample = model["sample"]
    if tool == "rewriter-max-error-flipped":
        sample = dst[:-5] + ".calibration.npz"
        with np.load(model["sample"], allow_pickle=False) as data:
            np.savez(sample, **{k: (np.ascontiguousarray(np.flip(data[k], -1)) if data[k].dtype.kind == "f"
                                    and data[k].ndim else data[k]) for k in data.files})
    cmd = tool_command(tool, src, dst, args.venv, sample, args.fit_rtol or args.rtol)
    r = {"model": model["name"], "tool": tool, "command": " ".join(cmd[:2] + ["<script>"] + cmd[3:])
         if tool == "onnxconverter" else " ".join(cmd), "output_path": dst}
    t0 = time.perf_counter()
    try:
        env = {**os.environ, **({"OMP_NUM_THREADS": "1"} if args.threads else {})}
        cwd = None
        if args.rewriter_src and tool.startswith("rewriter"):  # a snapshot of the package, not the work tree
            env["PYTHONPATH"] = cwd = os.path.abspath(args.rewriter_src)  # (python -m puts the cwd first)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=cwd)
        r["seconds"] = round(time.perf_counter() - t0, 3)
        r["returncode"] = p.returncode
        r["stderr_tail"] = "\n".join(p.stderr.strip().splitlines()[-25:])
        r["stdout_tail"] = "\n".join(p.stdout.strip().splitlines()[-10:])
    except subprocess.TimeoutExpired:
        r["seconds"] = round(time.perf_counter() - t0, 3)
        r["returncode"] = None
        return {**r, "class": "tool error", "reason": f"timed out after {args.timeout} s"}
    except OSError as e:
        r["seconds"] = 0.0
        return {**r, "class": "tool error", "reason": f"could not start: {e}"}
    if p.returncode != 0 or not os.path.exists(dst):
        tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()] or \
            [ln for ln in p.stdout.strip().splitlines() if ln.strip()]
        reason = (f"exit {p.returncode}" if p.returncode else "exit 0 but no output file") + \
            (": " + tail[-1][:400] if tail else "")
        return {**r, "class": "tool error", "reason": reason}

    r["source_bytes"] = ref["bytes"]
    r["bytes"] = model_bytes(dst)
    r["size_ratio"] = r["bytes"] / ref["bytes"]
    source_tensors, result_tensors = tensor_bytes(model["path"]), tensor_bytes(dst)
    r["tensor_ratio"] = result_tensors / source_tensors if source_tensors and result_tensors is not None else None
    classes = []
    try:
        onnx.checker.check_model(dst, full_check=True)
        r["checker"] = "ok"
    except Exception as e:  # noqa: BLE001
        r["checker"] = f"{type(e).__name__}: {str(e).strip()[:1500]}"
        classes.append(("fails the checker", "checker: " + _first_line(r["checker"])))
    try:
        sess = session(dst, args.threads)
        r["loads"] = "ok"
    except Exception as e:  # noqa: BLE001
        sess = None
        r["loads"] = f"{type(e).__name__}: {str(e).strip()[:1500]}"
        classes.append(("does not load", "onnxruntime: " + _first_line(r["loads"])))
    if sess is not None:
        try:
            names, outs, notes = run(sess, ref["sample"])
            r["runs"] = "ok"
            r["feed_casts"] = notes
            same, figures, why = compare(ref["names"], ref["outputs"], names, outs, args.rtol)
            r["outputs"] = figures
            r["max_rel_l2"] = max([f.get("rel_l2", 0.0) for f in figures], default=0.0)
            if not same:
                classes.append(("computes something else", why))
        except Exception as e:  # noqa: BLE001
            r["runs"] = f"{type(e).__name__}: {str(e).strip()[:1500]}"
            classes.append(("does not load", "session.run: " + _first_line(r["runs"])))
    if r["size_ratio"] > args.max_ratio:
        classes.append(("not halved", f"{r['bytes'] / 1e6:.2f} MB is {r['size_ratio']:.3f} x the source's "
                                      f"{ref['bytes'] / 1e6:.2f} MB"
                        + (f" (its tensors {r['tensor_ratio']:.3f} x the source's)" if r["tensor_ratio"] else "")))
    order = {c: i for i, c in enumerate(("fails the checker", "does not load", "computes something else",
                                         "not halved"))}
    classes.sort(key=lambda c: order[c[0]])
    r["all_classes"] = [c[0] for c in classes]
    r["class"], r["reason"] = classes[0] if classes else ("OK", "")
    if not args.keep:
        for f in glob.glob(dst + "*"):
            os.remove(f)
    return r


def _first_line(s: str) -> str:
    lines = [ln.strip() for ln in s.splitlines() if ln.strip()]
    return " ".join(lines[:3])[:500] if lines else ""


def reference(model: dict, threads: int, rtol: float) -> dict:
    """The float32 source's outputs on the sample, and its "float16 floor": the largest relative
    L2 error when only the float32 inputs are rounded to float16 (what the Casts at the edge of a
    keep-io-types conversion do before any float16 arithmetic).  A floor near or above --rtol
    says the model (with its weights and sample) is ill-conditioned in float16, not the tool."""
    sample = dict(np.load(model["sample"], allow_pickle=False))
    sess = session(model["path"], threads)
    names, outs, _ = run(sess, sample)
    rounded = {k: (v.astype(np.float16).astype(np.float32) if v.dtype == np.float32 else v) for k, v in sample.items()}
    floor = None
    if any(v.dtype == np.float32 for v in sample.values()):
        _, outs16, _ = run(sess, rounded)
        _, figures, _ = compare(names, outs, names, outs16, rtol)
        if any(f.get("verdict") not in ("ok", "error") for f in figures):
            floor = float("inf")  # another shape, a non-float output changed, NaN/inf appeared
        else:
            floor = max([f.get("rel_l2", 0.0) for f in figures], default=0.0)
    return {"sample": sample, "names": names, "outputs": outs, "bytes": model_bytes(model["path"]),
            "input_rounding_rel_l2": floor, "weight_rounding_rel_l2": weight_floor(model, sample, names, outs,
                                                                                  threads, rtol)}


def weight_floor(model: dict, sample: dict, names, outs, threads: int, rtol: float) -> float | None:
    """The source's error with every float32 initializer and Constant value rounded to float16
    (the arithmetic still float32): what storing the weights in half costs before any half
    arithmetic. None over 1 GiB (the copy is made in memory)."""
    if model_bytes(model["path"]) > 2 ** 30:
        return None
    from onnx import numpy_helper

    m = onnx.load(model["path"])

    def rounded(t):
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name))

    def walk(g):
        for t in g.initializer:
            rounded(t)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    rounded(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(m.graph)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads:
        so.intra_op_num_threads = threads
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    _, got, _ = run(sess, sample)
    _, figures, _ = compare(names, outs, names, got, rtol)
    if any(f.get("verdict") not in ("ok", "error") for f in figures):
        return float("inf")
    return max([f.get("rel_l2", 0.0) for f in figures], default=0.0)


# ------------------------------------------------------------------ report


def cell(r: dict) -> str:
    if r is None:
        return ""
    c = SHORT[r["class"]]
    bits = [c]
    if "size_ratio" in r:
        bits.append(f"{r['size_ratio']:.2f}x")
    if "max_rel_l2" in r:
        bits.append(f"e={r['max_rel_l2']:.1e}")
    bits.append(f"{r['seconds']:.1f}s")
    return " ".join(bits)


def print_report(models, tools, results, skipped, floors, weight_floors):
    by = {(r["model"], r["tool"]): r for r in results}
    print("\n## Per model (class, size ratio, max relative L2 error over float outputs, tool wall time)\n")
    print("floor: the source's own error with only its float32 inputs rounded to float16 (inf: a non-float")
    print("output or a NaN/inf changed); near or above the tolerance, the model is ill-conditioned in float16.")
    print("wfloor: the same with only its float32 weights and constants rounded to float16 (float32 arithmetic).\n")
    head = "| model | MB | floor | wfloor | " + " | ".join(tools) + " |"
    print(head)
    print("|" + " --- |" * (4 + len(tools)))
    for m in models:
        if m["name"] in skipped:
            print(f"| {m['name']} | | | | " + " | ".join(["(source does not run)"] * len(tools)) + " |")
            continue
        mb = next((r["source_bytes"] for r in results if r["model"] == m["name"] and "source_bytes" in r), None)
        mb = f"{mb / 1e6:.1f}" if mb else ""
        fl = floors.get(m["name"])
        fl = "" if fl is None else f"{fl:.1e}"
        wf = weight_floors.get(m["name"])
        wf = "" if wf is None else f"{wf:.1e}"
        print(f"| {m['name']} | {mb} | {fl} | {wf} | " + " | ".join(cell(by.get((m["name"], t))) for t in tools)
              + " |")
    print("\n## Summary\n")
    print("| tool | " + " | ".join(CLASSES) + " | total wall s |")
    print("|" + " --- |" * (len(CLASSES) + 2))
    for t in tools:
        rs = [r for r in results if r["tool"] == t]
        counts = [sum(r["class"] == c for r in rs) for c in CLASSES]
        print(f"| {t} | " + " | ".join(map(str, counts)) + f" | {sum(r['seconds'] for r in rs):.1f} |")
    print("\n## Every case that is not OK\n")
    for t in tools:
        bad = [r for r in results if r["tool"] == t and r["class"] != "OK"]
        if not bad:
            continue
        print(f"### {t} ({len(bad)})\n")
        for r in bad:
            print(f"- {r['model']}: **{r['class']}** - {r['reason']}")
        print()


def summary(results, tools):
    return {t: {c: sum(1 for r in results if r["tool"] == t and r["class"] == c) for c in CLASSES}
            for t in tools}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", default="/work/corpus/fp16")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="model names (a name that is no model's is taken as a substring)")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--rewriter-src", default=None, metavar="DIR",
                    help="run rewriter from DIR/rewriter (a copy of the package, native kernel included) instead "
                    "of the installed one: a run is not disturbed by edits to the work tree")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="(model, tool) jobs at once (default 1)")
    ap.add_argument("--json", metavar="PATH", help="write every figure to PATH")
    ap.add_argument("--keep", metavar="DIR", help="keep the results in DIR/<tool>/<model>.onnx")
    ap.add_argument("--venv", default="/work/venvs/fp16", help="venv with onnxconverter-common and onnxslim")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per tool run")
    ap.add_argument("--rtol", type=float, default=1e-2, help="relative L2 error allowed per float output")
    ap.add_argument("--max-ratio", type=float, default=0.6, help="size ratio allowed (result / source)")
    ap.add_argument("--fit-rtol", type=float, default=None,
                    help="the --max-error the rewriter-max-error tools are given (default --rtol): below --rtol, "
                    "a margin for inputs the search did not see")
    args = ap.parse_args(argv)
    args.threads = 1 if args.jobs > 1 else 0

    models = corpus_models(args.corpus)
    if args.only:
        # a name that is a model's takes that model; any other is a substring of the names
        exact = {m["name"] for m in models} & set(args.only)
        subs = [o for o in args.only if o not in exact]
        models = [m for m in models if m["name"] in exact or any(o in m["name"] for o in subs)]
    if not models:
        print(f"no models in {args.corpus}", file=sys.stderr)
        return 2
    versions = {"python": platform.python_version(), "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                "numpy": np.__version__, **{t: tool_version(t, args.venv) for t in args.tools}}
    print(f"{len(models)} models from {args.corpus}; tools {', '.join(args.tools)}; "
          f"rtol {args.rtol:g}, size ratio <= {args.max_ratio:g}, --max-error {args.fit_rtol or args.rtol:g}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)

    out_dir = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="bench_precision_")
    refs, skipped = {}, {}
    for m in models:
        try:
            refs[m["name"]] = reference(m, args.threads, args.rtol)
        except Exception as e:  # noqa: BLE001
            skipped[m["name"]] = f"{type(e).__name__}: {e}"[:500]
            print(f"skip {m['name']}: the source does not run: {skipped[m['name']]}", file=sys.stderr)

    jobs = [(m, t) for m in models if m["name"] in refs for t in args.tools]
    results, lock = [], threading.Lock()

    def one(job):
        m, t = job
        try:
            r = judge(m, t, out_dir, refs[m["name"]], args)
        except Exception as e:  # noqa: BLE001  (a bug of the bench is not the tool's)
            r = {"model": m["name"], "tool": t, "class": "tool error", "seconds": 0.0,
                 "reason": f"bench error: {type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        with lock:
            results.append(r)
            print(f"[{len(results):3d}/{len(jobs)}] {m['name']:52s} {t:14s} {r['class']:24s} "
                  f"{r['seconds']:7.1f}s  {r.get('reason', '')[:150]}", flush=True)
        return r

    t0 = time.time()
    if args.jobs > 1:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            list(ex.map(one, jobs))
    else:
        for job in jobs:
            one(job)
    order = {(m["name"], t): i for i, (m, t) in enumerate(jobs)}
    results.sort(key=lambda r: order[(r["model"], r["tool"])])
    floors = {k: v["input_rounding_rel_l2"] for k, v in refs.items()}
    weight_floors = {k: v["weight_rounding_rel_l2"] for k, v in refs.items()}
    print_report(models, args.tools, results, skipped, floors, weight_floors)
    print(f"({time.time() - t0:.0f} s in all)")
    if args.json:
        doc = {"corpus": os.path.abspath(args.corpus), "versions": versions, "tools": args.tools,
               "thresholds": {"rtol": args.rtol, "max_ratio": args.max_ratio, "fit_rtol": args.fit_rtol or args.rtol},
               "commands": {t: " ".join(tool_command(t, "IN", "OUT", args.venv)) if t != "onnxconverter"
                            else "float16.convert_float_to_float16(onnx.load(IN), keep_io_types=True) -> OUT"
                            for t in args.tools},
               "models": [{**{k: m.get(k) for k in ("name", "group", "source")},
                           "bytes": refs[m["name"]]["bytes"] if m["name"] in refs else None,
                           "input_rounding_rel_l2": floors.get(m["name"]),
                           "weight_rounding_rel_l2": weight_floors.get(m["name"])} for m in models],
               "skipped": skipped, "summary": summary(results, args.tools), "results": results}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
        print(f"figures written to {args.json}")
    if not args.keep:
        import shutil

        shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
