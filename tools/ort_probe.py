"""Probe what each old ONNX Runtime release (venvs from tools/ort_venvs.py) will load.

    python tools/ort_probe.py [--json] [RELEASE ...]

For each release it loads tiny models built here with onnx.helper and reports the
highest value that loaded of:

* IR version        (one Relu node, default-domain opset 7, IR 3 .. onnx's IR + 2);
* ai.onnx opset     (one Relu node, and one Identity node, at the release's highest IR;
                     opset 7 .. onnx's newest + 3).  Relu's newest schema is 14, so a
                     Relu model with a high opset_import fails only where ORT checks the
                     opset number itself; Identity gained versions up to 25, so it also
                     fails where the release lacks the kernel;
* ai.onnx.ml opset  (one Normalizer, and one Binarizer, node; ai.onnx.ml 1 .. onnx's
                     newest + 3, with ai.onnx opset 13, at the release's highest IR).

A value ending in "+" is the top of the probed range (it may load higher still).  The
loaded values are listed too, in case they are not a contiguous run.  Only loading is
tried (InferenceSession creation, CPU EP, default options), never running.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import onnx.defs
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import old_ort  # noqa: E402

IR_RANGE = range(3, onnx.IR_VERSION + 3)
OPSET_RANGE = range(7, onnx.defs.onnx_opset_version() + 4)
ML_MAX = max(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == "ai.onnx.ml")
ML_RANGE = range(1, ML_MAX + 4)

_LOADER = """
import json, sys
import onnxruntime as ort
ort.set_default_logger_severity(3)
for path in sys.argv[1:]:
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        r = {"ok": True}
    except Exception as e:
        r = {"ok": False, "error": type(e).__name__ + ": " + str(e)}
    print(json.dumps({"path": path, **r}), flush=True)
"""


def model(op: str, ir: int, opset: int, ml: int | None = None) -> onnx.ModelProto:
    attrs, domain = {}, ""
    if op == "Normalizer":
        attrs, domain = {"norm": "MAX"}, "ai.onnx.ml"
    elif op == "Binarizer":
        attrs, domain = {"threshold": 0.5}, "ai.onnx.ml"
    node = helper.make_node(op, ["x"], ["y"], domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    opsets = [helper.make_opsetid("", opset)]
    if ml is not None:
        opsets.append(helper.make_opsetid("ai.onnx.ml", ml))
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir, producer_name="ort_probe")


def load_all(release: str, models: list[onnx.ModelProto]) -> list[tuple[bool, str]]:
    """Load each model in one process of the release's python; one process each after a crash."""
    python = old_ort.venvs_dir() / release / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="ort-probe-") as tmp:
        paths = []
        for i, m in enumerate(models):
            paths.append(str(Path(tmp) / f"{i}.onnx"))
            Path(paths[-1]).write_bytes(m.SerializeToString())
        proc = subprocess.run([str(python), "-c", _LOADER, *paths], capture_output=True, text=True)
        done = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                done[r["path"]] = (r["ok"], r.get("error", ""))
        return [done[p] if p in done else old_ort.loads(release, p) for p in paths]


def _summary(values: range, results: list[tuple[bool, str]]) -> dict:
    loaded = [v for v, (ok, _) in zip(values, results) if ok]
    best = max(loaded) if loaded else None
    first_fail = next(((v, err) for v, (ok, err) in zip(values, results) if not ok and best and v > best), None)
    return {
        "max": best,
        "top_of_range": best == values[-1],
        "loaded": loaded,
        "first_failure": {"value": first_fail[0], "error": first_fail[1][:1000]} if first_fail else None,
    }


def probe(release: str) -> dict:
    irs = _summary(IR_RANGE, load_all(release, [model("Relu", ir, 7) for ir in IR_RANGE]))
    ir = irs["max"] or 7
    out = {"release": release, "ir": irs}
    for op in ("Relu", "Identity"):
        out[f"opset_{op}"] = _summary(OPSET_RANGE, load_all(release, [model(op, ir, v) for v in OPSET_RANGE]))
    for op in ("Normalizer", "Binarizer"):
        out[f"ml_{op}"] = _summary(ML_RANGE, load_all(release, [model(op, ir, 13, v) for v in ML_RANGE]))
    version = subprocess.run(
        [str(old_ort.venvs_dir() / release / "bin" / "python"), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
        capture_output=True, text=True,
    )
    out["ort"] = version.stdout.strip()
    return out


def _cell(s: dict) -> str:
    if s["max"] is None:
        return "none"
    text = f"{s['max']}{'+' if s['top_of_range'] else ''}"
    if s["loaded"] != list(range(s["loaded"][0], s["max"] + 1)):
        text += f" (only {','.join(map(str, s['loaded']))})"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="MAJOR.MINOR (default: every working venv)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    releases = args.releases or old_ort.releases()
    if not releases:
        print(f"no venvs in {old_ort.venvs_dir()}: run tools/ort_venvs.py", file=sys.stderr)
        return 1
    columns = ["ir", "opset_Relu", "opset_Identity", "ml_Normalizer", "ml_Binarizer"]
    heads = ["release", "onnxruntime", "max IR", "opset (Relu)", "opset (Identity)", "ML (Normalizer)", "ML (Binarizer)"]
    results = []
    if not args.json:
        print(f"probed: IR {IR_RANGE[0]}-{IR_RANGE[-1]}, opset {OPSET_RANGE[0]}-{OPSET_RANGE[-1]}, "
              f"ML opset {ML_RANGE[0]}-{ML_RANGE[-1]}; onnx {onnx.__version__}")
        print(" | ".join(heads))
    for release in releases:
        r = probe(release)
        results.append(r)
        if not args.json:
            print(" | ".join([release, r["ort"], *(_cell(r[c]) for c in columns)]), flush=True)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
