"""Which forms a runtime release refuses over symbolic dims and runs once they are static.

    python tools/runtime_probe_symbolic.py --runtime tract==0.23 [--runtime tvm==0.27] [--dry-run]

Each form of tools/symbolic_forms.py (a small model whose graph inputs have symbolic dims, shaped
after a node a real model showed refused) is run in the release (its venv, tools/runtime_venvs.py;
its runner, tools/runtime_run_<runtime>.py) twice: as it is, and with the sample's shapes made
static by rewriter's own ``--input-shape`` (``rewriter.graph.static_shapes.fix_shapes``, what
``convert --input-shape`` writes). Both results are compared with ONNX Runtime on the form
(relative L2 <= 1e-4). A form is *needed static* when it is refused (or wrong) as it is and
matches static: the release's entry in ``rewriter/targets/data/<runtime>.json`` gets
``needs_static_dims`` = {"probe": {command, date, versions}, "forms": {form: {"op", "version",
"symbolic", "static"}}, "needed": [forms], "refused": [forms refused static too]}, which
``rewriter.targets.static_dims`` reads (``tools/runtime_probe.py`` keeps it when it rewrites the
release's entry).
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import runtime_venvs
import symbolic_forms

DATA_DIR = HERE.parent / "rewriter" / "targets" / "data"
RTOL = 1e-4


def _verdict(python: Path, runtime: str, model: onnx.ModelProto, feeds: dict, want: list, folder: Path,
             tag: str) -> str:
    """"match", "WRONG: ..." or "refused: <the runtime's first line>"."""
    path, inputs, outputs = folder / f"{tag}.onnx", folder / f"{tag}_in.npz", folder / f"{tag}_out.npz"
    onnx.save(model, str(path))
    np.savez(inputs, **feeds)
    proc = subprocess.run([str(python), str(runtime_venvs.runner(runtime)), str(path), str(inputs), str(outputs)],
                          capture_output=True, text=True, timeout=300, check=False)
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return f"refused: the runner exited {proc.returncode} ({proc.stderr.strip()[-200:]})"
    result = json.loads(lines[-1])
    if not result.get("ok"):
        return "refused: " + " ".join(result.get("error", "").split("Stack backtrace")[0].split())[:300]
    with np.load(outputs) as got:
        value = got[got.files[0]]
    ref = want[0]
    if value.shape != ref.shape:
        return f"WRONG: shape {list(value.shape)}, expected {list(ref.shape)}"
    err = float(np.linalg.norm(value - ref) / max(np.linalg.norm(ref), 1e-30))
    return "match" if err <= RTOL else f"WRONG: relative L2 {err:.3g}"


def static_copy(model: onnx.ModelProto, feeds: dict) -> onnx.ModelProto:
    """``model`` with its inputs fixed to the feeds' shapes, as ``convert --input-shape`` does."""
    from rewriter.graph.static_shapes import fix_shapes

    fixed = copy.deepcopy(model)
    fix_shapes(fixed, {name: list(value.shape) for name, value in feeds.items()})
    return fixed


def probe(runtime: str, release: str, folder: Path) -> dict:
    """{form: {"op", "version", "symbolic", "static"}} measured in the release."""
    import onnxruntime as ort

    python = runtime_venvs.venv_python(runtime, release)
    if python is None:
        raise SystemExit(f"no venv for {runtime}=={release}: python tools/runtime_venvs.py {runtime}=={release}")
    forms = {}
    for name, (op, build) in symbolic_forms.FORMS.items():
        model, feeds = build()
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        version = onnx.defs.get_schema(op, symbolic_forms.OPSET).since_version
        forms[name] = {"op": op, "version": version,
                       "symbolic": _verdict(python, runtime, model, feeds, want, folder, f"{name}_symbolic"),
                       "static": _verdict(python, runtime, static_copy(model, feeds), feeds, want, folder,
                                          f"{name}_static")}
    return forms


def needed(forms: dict) -> list[str]:
    """The forms refused (or wrong) with symbolic dims that match with static ones."""
    return sorted(n for n, f in forms.items() if f["symbolic"] != "match" and f["static"] == "match")


def refused(forms: dict) -> list[str]:
    """The forms refused (or wrong) with symbolic dims and with static ones alike."""
    return sorted(n for n, f in forms.items() if f["symbolic"] != "match" and f["static"] != "match")


def record(runtime: str, release: str, forms: dict, command: str, data_dir: Path = DATA_DIR) -> Path:
    """Write the release's ``needs_static_dims`` into ``data_dir/<runtime>.json``."""
    marker = json.loads((runtime_venvs.venv_path(runtime, release) / runtime_venvs.MARKER).read_text())
    versions = {k: v for k, v in marker.items() if k not in ("runtime", "release", "pip", "made", "runner")}
    versions["onnx"] = onnx.__version__
    path = data_dir / f"{runtime}.json"
    table = json.loads(path.read_text())
    entry = table["releases"][release]
    entry["needs_static_dims"] = {
        "probe": {"command": command, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "versions": versions, "forms": "tools/symbolic_forms.py"},
        "forms": forms, "needed": needed(forms), "refused": refused(forms)}
    path.write_text(json.dumps(table, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", action="append", required=True, help="RUNTIME==RELEASE, e.g. tract==0.23")
    parser.add_argument("--dry-run", action="store_true", help="print the verdicts, write nothing")
    args = parser.parse_args(argv)
    command = "python tools/runtime_probe_symbolic.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    for item in args.runtime:
        runtime, release = runtime_venvs.parse(item)
        with tempfile.TemporaryDirectory() as tmp:
            forms = probe(runtime, release, Path(tmp))
        for name, form in forms.items():
            print(f"{runtime} {release} {name} ({form['op']}-{form['version']}): symbolic {form['symbolic'][:120]}; "
                  f"static {form['static'][:120]}")
        print(f"{runtime} {release} needs static dims for: {', '.join(needed(forms)) or 'none'}")
        if not args.dry_run:
            print(f"wrote {record(runtime, release, forms, command)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
