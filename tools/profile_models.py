"""Real models through a measured profile: convert each for it and run the result in the runtime.

    python tools/profile_models.py --runner RUNNER.py --python PYTHON --target PROFILE.json MODEL.onnx ...

For each MODEL.onnx (its inputs in MODEL.npz beside it, keyed by input name): ONNX Runtime runs
the model as it is (the reference); the runtime runs it as it is (through the runner, as
tools/profile_probe.py does); ``rewriter convert MODEL --target PROFILE.json -o OUT`` converts it;
the runtime runs OUT on the same inputs. Each runs twice in the same process (MNN 3.6.1 computes
some models wrongly on their first run and right on the second): both errors are shown, the
worse one judged. A result matches when each float output is within
relative L2 1e-4 of ONNX Runtime's (||got - ref|| / ||ref||) and each integer or boolean output
is equal. Prints one markdown row per model and a summary line; ``--json FILE`` keeps them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import profile_probe  # noqa: E402

LIMIT = 1e-4


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return float("inf")
    if ref.dtype.kind in "biu":
        return 0.0 if np.array_equal(got.astype(np.int64), ref.astype(np.int64)) else float("inf")
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    if not (np.isfinite(g).all() and np.isfinite(r).all()):
        return 0.0 if np.array_equal(np.isnan(g), np.isnan(r)) and np.allclose(g, r, equal_nan=True) else float("inf")
    norm = np.linalg.norm(r)
    return float(np.linalg.norm(g - r) / norm) if norm else float(np.linalg.norm(g))


def _runtime(python: str, runner: str, models: dict, folder: Path) -> dict:
    """{key: (verdict, worst relative L2 or None, detail)} for {key: (path, feeds, reference)}."""
    cases = []
    for key, (path, feeds, ref) in models.items():
        model = onnx.load(path)
        for run in ("", "#again"):  # twice in the same process: MNN 3.6.1 differs on a model's first run
            cases.append(profile_probe.Case(key + run, "", "", None, None, "model", model, feeds, ref))
    verdicts, _ = profile_probe.run_all(python, runner, cases, 600.0, str(folder), log=lambda *a: None)
    out = {}
    for case in cases:
        verdict, detail = verdicts[case.id]
        if verdict in profile_probe.FAILED:
            out[case.id] = (verdict, None, detail)
            continue
        try:
            with np.load(case.extra["outputs"], allow_pickle=False) as data:
                got = [data[str(i)] for i in range(len(data.files))]
        except Exception as e:  # noqa: BLE001
            out[case.id] = ("wrong", None, f"outputs unreadable: {e}")
            continue
        if len(got) != len(case.expected):
            out[case.id] = ("wrong", None, f"{len(got)} outputs, expected {len(case.expected)}")
            continue
        worst = max((rel_l2(g, r) for g, r in zip(got, case.expected)), default=0.0)
        out[case.id] = ("match" if worst <= LIMIT else "differs", worst, "")
    for key in models:  # the worse of the two runs, both shown
        (v1, w1, d1), (v2, w2, d2) = out.pop(key), out.pop(key + "#again")
        if w1 is None or w2 is None:
            out[key] = (v1 if w1 is None else v2, None, d1 or d2)
        else:
            out[key] = ("match" if max(w1, w2) <= LIMIT else "differs", max(w1, w2), f"{w1:.1e} then {w2:.1e}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--runner", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--target", required=True, help="the profile .json")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="profile-models-") as tmp:
        tmp = Path(tmp)
        as_is, converted = {}, {}
        for path in map(Path, args.models):
            model = onnx.load(path)
            with np.load(path.with_suffix(".npz"), allow_pickle=False) as data:
                feeds = {k: data[k] for k in data.files}
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            ref = [np.asarray(r) for r in sess.run(None, feeds)]
            opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
            row = {"model": path.stem, "opset": opset}
            as_is[path.stem] = (path, feeds, ref)
            out = tmp / f"{path.stem}.converted.onnx"
            proc = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(path), "--target", args.target,
                                   "-o", str(out), "-q"], capture_output=True, text=True, cwd=str(HERE.parent))
            if proc.returncode != 0 or not out.exists():
                said = (proc.stderr or proc.stdout).strip().splitlines()
                row["convert"] = "refused: " + (said[0] if said else f"exit {proc.returncode}")[:200]
            else:
                result = onnx.load(out)
                row["convert"] = "converted"
                row["opset_after"] = next(o.version for o in result.opset_import if o.domain in ("", "ai.onnx"))
                kinds = {n.op_type for n in model.graph.node}
                row["ops_removed"] = sorted(kinds - {n.op_type for n in result.graph.node})
                converted[path.stem] = (out, feeds, ref)
            rows.append(row)
        first = _runtime(args.python, args.runner, as_is, tmp / "as_is")
        second = _runtime(args.python, args.runner, converted, tmp / "converted")
    for row in rows:
        v, worst, detail = first[row["model"]]
        row["as_is"] = v if worst is None else f"{v} ({detail})"
        if row["model"] in second:
            v, worst, detail = second[row["model"]]
            row["after"] = v if worst is None else f"{v} ({detail})"
            row["after_detail"] = detail[:200]
            row["rel_l2"] = worst
    print("| model | opset | as it is (rel. L2, 1st then 2nd run) | convert | opset after | ops expanded | after | worst |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        l2 = "" if r.get("rel_l2") is None else f"{r['rel_l2']:.1e}"
        print(f"| {r['model']} | {r['opset']} | {r['as_is']} | {r['convert'][:90]} | {r.get('opset_after', '')} | "
              f"{', '.join(r.get('ops_removed', []))} | {r.get('after', '')} | {l2} |")
    n = len(rows)
    conv = sum(r["convert"] == "converted" for r in rows)
    match = sum(str(r.get("after", "")).startswith("match") for r in rows)
    differs = sum(str(r.get("after", "")).startswith("differs") for r in rows)
    before = sum(str(r["as_is"]).startswith("match") for r in rows)
    print(f"\n{n} models: {before} run and match as they are; {conv} converted, {n - conv} refused; "
          f"after: {match} run and match, {differs} run and differ, {conv - match - differs} fail")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
