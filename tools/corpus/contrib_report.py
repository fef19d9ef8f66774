#!/usr/bin/env python
"""Lower the ``com.microsoft`` ops of real models to standard ONNX and compare with ONNX Runtime's run of
the original (issue 42):

    python tools/corpus/contrib_report.py [MODEL.onnx ...] [--reference] [--json]

Default models: /work/corpus/quant/*qop*.onnx (onnxruntime.quantization's QOperator format) and
/work/corpus/contrib/*.onnx (onnxruntime.transformers.optimizer's fusions, tools/corpus/make_contrib.py),
each with its sample ``<name>.npz``. A model passes when ``lower_ops(model)`` succeeds, the result
passes onnx.checker (full_check; when it fails only on value_info the input carries, that is said) with
only standard nodes (no com.microsoft import left), and ONNX
Runtime's outputs on
the sample match the original's: integers equal, floats to relative L2 <= 1e-5 (2e-3 for float16
outputs: such a model computes in half precision on both sides) (``bit`` says whether
every output is bit-identical). ``--reference`` also runs the lowered model in onnx.reference (lowered
at opset 21 when the model's is below 19: onnx.reference's DequantizeLinear starts there).
Prints one row per model, the blockers, and the totals.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

TOLERANCE = 1e-5
HALF_TOLERANCE = 2e-3  # float16 outputs: the model computes in half precision, ONNX Runtime and the result alike
DEFAULT = ["/work/corpus/quant/*qop*.onnx", "/work/corpus/contrib/*.onnx"]


def _run(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


def _compare(expected, actual) -> tuple[bool, bool, float]:
    ok, bit, worst = True, True, 0.0
    for e, a in zip(expected, actual):
        e, a = np.asarray(e), np.asarray(a)
        same = e.shape == a.shape and e.dtype == a.dtype and np.array_equal(e, a, equal_nan=e.dtype.kind == "f")
        bit &= bool(same)
        if e.dtype.kind != "f" or not same and e.shape != a.shape:
            ok &= bool(same)
            continue
        e64, a64 = e.astype(np.float64), a.astype(np.float64)
        err = float(np.linalg.norm(e64 - a64) / max(np.linalg.norm(e64), 1e-30))
        worst = max(worst, err)
        ok &= err <= (HALF_TOLERANCE if e.dtype == np.float16 else TOLERANCE)
    return ok, bit, worst


def report(path: str, reference: bool) -> dict:
    import onnx

    from rewriter.convert.lower_ops import lower_ops
    from rewriter.errors import RewriterError

    name = os.path.basename(path)[:-5]
    model = onnx.load(path)
    feeds = dict(np.load(path[:-5] + ".npz"))
    ops = sorted({n.op_type for n in model.graph.node if n.domain == "com.microsoft"})
    row = {"model": name, "contrib_ops": ops}
    try:
        lowered, lowering = lower_ops(model)
    except RewriterError as e:
        return dict(row, status="blocked", reason=str(e))
    try:
        onnx.checker.check_model(lowered, full_check=True)
        row["checker"] = "ok"
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        row["checker"] = str(e).strip().splitlines()[0][:160]
        bare = onnx.ModelProto()
        bare.CopyFrom(lowered)
        del bare.graph.value_info[:]
        try:  # the input's own value_info may declare wrong shapes (onnxruntime-genai's constants do)
            onnx.checker.check_model(bare, full_check=True)
            row["checker"] = "ok without the input's value_info (it declares shapes its values contradict)"
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            pass
    standard = all(n.domain in ("", "ai.onnx") for n in lowered.graph.node) and not any(
        o.domain == "com.microsoft" for o in lowered.opset_import)
    ok, bit, worst = _compare(_run(model, feeds), _run(lowered, feeds))
    row.update(status="pass" if ok and standard and row["checker"].startswith("ok") else "mismatch", bit=bit,
               rel_l2=worst,
               standard=standard,
               lowered=dict(sorted(lowering.to_dict()["lowered"].items())))
    if reference:
        import onnx.reference

        try:  # onnx.reference runs DequantizeLinear from opset 19 only: such models are raised to 21 first
            opset = next(o.version for o in lowered.opset_import if o.domain in ("", "ai.onnx"))
            ref_model = lower_ops(model, opset=21)[0] if opset < 19 else lowered
            got = onnx.reference.ReferenceEvaluator(ref_model).run(None, feeds)
            row["reference_ok"] = _compare(_run(model, feeds), got)[0]
        except Exception as e:  # noqa: BLE001  onnx.reference failing on the model (its own ops too)
            row["reference_ok"] = None
            row["reference_error"] = str(e).splitlines()[0][:120]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--reference", action="store_true", help="also run the lowered models in onnx.reference")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    paths = args.models or sorted(p for g in DEFAULT for p in glob.glob(g))
    rows = [report(p, args.reference) for p in paths]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        detail = (f"bit {'yes' if r['bit'] else 'no'}, rel L2 {r['rel_l2']:.1e}" if r["status"] != "blocked"
                  else r["reason"][:300])
        ref = "" if "reference_ok" not in r else (
            f", reference n/a ({r['reference_error']})" if r["reference_ok"] is None else
            f", reference {'ok' if r['reference_ok'] else 'MISMATCH'}")
        checker = "" if r.get("checker", "ok") == "ok" else f", checker {r['checker']}"
        print(f"{r['model']:32s} {r['status']:9s} {detail}{ref}{checker}  [{', '.join(r['contrib_ops'])}]")
    passed = sum(r["status"] == "pass" for r in rows)
    print(f"\n{passed} of {len(rows)} models lowered fully and match ONNX Runtime "
          f"({sum(r.get('bit', False) for r in rows)} bit for bit)")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
