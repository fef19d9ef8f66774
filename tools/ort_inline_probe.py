"""Measure where old ONNX Runtime releases inline a function op's body wrongly in a half type.

    python tools/ort_inline_probe.py [--out FILE] [RELEASE ...]

A node whose op has an ONNX function body and no kernel for its types (LayerNormalization-17,
Softmax-13 in float16 on the x86_64 CPU provider of 1.15) is replaced by ONNX Runtime with the
body that the onnx it was built with defines. ONNX Runtime 1.15 and 1.16 write that body for
the opset where it was first defined, whatever the model's opset: at opset 18 their inlined
ReduceMean / ReduceMax nodes carry the ``axes`` attribute opset 18 no longer has, and the
session is refused ("Unrecognized attribute: axes for operator ReduceMean").

For every default-domain schema with a function body (``has_function`` or
``has_context_dependent_function``; the deprecated GroupNormalization-18 too) and each half type
it takes, one single-node model per opset at which the schema is in force, up to the release's
newest (``tools/ort_kernel_probe.py``'s NEWEST), built by that tool's ``build`` (every float type
parameter in the half type; also with every optional input given), is loaded by the release's venv
python (``tools/ort_venvs.py``) with graph optimizations disabled. A load that fails with
"Unrecognized attribute" (a node of the inlined body is not valid at the model's opset) is
recorded; every other outcome is not (a missing kernel is the kernel tables' business).

Writes ``rewriter/targets/data/onnxruntime_inlining.json`` (unless --out)::

    {"source": "measured by ... on DATE with onnxruntime 1.15.1, ...",
     "releases": {"1.15": {"onnxruntime": "1.15.1", "newest_opset": 19,
                           "float16": {"Softmax": {"13": [18, 19]}, ...}, "bfloat16": {...},
                           "errors": {"float16": {"Softmax": {"13": "...first error..."}}, ...}}, ...}}

``rewriter/targets/inlining.py`` reads it. Developer tool; no network; a few seconds a release.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import onnx.defs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
import ort_kernel_probe as probe  # noqa: E402
from tests import old_ort  # noqa: E402

OUT = ROOT / "rewriter" / "targets" / "data" / "onnxruntime_inlining.json"
DTYPES = ("float16", "bfloat16")
QUIRK = "Unrecognized attribute"

LOADER = r"""
import json, os, sys
import onnxruntime as ort
ort.set_default_logger_severity(4)
folder = sys.argv[1]
print(json.dumps({"ort": ort.__version__}), flush=True)
for name in sorted(n for n in os.listdir(folder) if n.endswith(".onnx")):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(os.path.join(folder, name), sess_options=opts, providers=["CPUExecutionProvider"])
        r = {"ok": True}
    except Exception as e:
        r = {"ok": False, "error": str(e)}
    r["file"] = name
    print(json.dumps(r), flush=True)
"""


def function_schemas() -> list:
    """The default-domain schemas with a function body (GroupNormalization-18, deprecated, too)."""
    found = []
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain != "" or (s.deprecated and s.name != "GroupNormalization"):
            continue
        if s.has_function or s.has_context_dependent_function:
            found.append(s)
    return sorted(found, key=lambda s: (s.name, s.since_version))


def in_force(schema, newest: int) -> list[int]:
    """The opsets (from 7, up to ``newest``) at which ``schema`` is the op's schema."""
    out = []
    for opset in range(max(schema.since_version, probe.MIN_VERSION[""]), newest + 1):
        try:
            if onnx.defs.get_schema(schema.name, opset, "").since_version != schema.since_version:
                break
        except onnx.defs.SchemaError:
            break
        out.append(opset)
    return out


def write_models(folder: Path, newest: int) -> dict[str, tuple[str, str, int, int]]:
    """file name -> (dtype, op, since_version, opset) for every model written to ``folder``."""
    plan = {}
    for s in function_schemas():
        for dtype in DTYPES:
            types = probe.half_types(s, dtype)
            if types is None:
                continue
            for opset in in_force(s, newest):
                for full in (False, True):
                    for layout in probe.SHAPE_LAYOUTS:
                        try:
                            model = probe.build(s, s.since_version, types, layout, probe.elem_type(dtype), opset,
                                                all_optional=full)
                        except Exception:  # noqa: BLE001 - that layout cannot be built
                            continue
                        if s.deprecated or probe.local_error(model) is None:
                            break
                    else:
                        continue
                    name = f"{dtype}__{s.name}__{s.since_version}__{opset}__{'full' if full else 'req'}.onnx"
                    (folder / name).write_bytes(model.SerializeToString())
                    plan[name] = (dtype, s.name, s.since_version, opset)
    return plan


def probe_release(release: str) -> dict:
    newest = probe.NEWEST[release][""]
    entry: dict = {"onnxruntime": None, "newest_opset": newest, **{d: {} for d in DTYPES},
                   "errors": {d: {} for d in DTYPES}}
    with tempfile.TemporaryDirectory(prefix="ort-inline-") as tmp:
        folder = Path(tmp)
        plan = write_models(folder, newest)
        python = old_ort.venvs_dir() / release / "bin" / "python"
        proc = subprocess.run([str(python), "-c", LOADER, str(folder)], capture_output=True, text=True, timeout=1800)
        for line in proc.stdout.splitlines():
            r = json.loads(line)
            if "ort" in r:
                entry["onnxruntime"] = r["ort"]
                continue
            if r["ok"] or QUIRK not in r["error"]:
                continue
            dtype, op, v, opset = plan[r["file"]]
            opsets = entry[dtype].setdefault(op, {}).setdefault(str(v), [])
            if opset not in opsets:
                opsets.append(opset)
                opsets.sort()
            entry["errors"][dtype].setdefault(op, {}).setdefault(
                str(v), re.sub(r"0x[0-9a-f]{6,}", "0x...", r["error"].replace(f"{folder}/", ""))[:240])
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="MAJOR.MINOR (default: every venv tools/ort_venvs.py made)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    wanted = args.releases or [r for r in old_ort.releases() if r in probe.NEWEST]
    doc = {"releases": {}}
    for release in wanted:
        doc["releases"][release] = probe_release(release)
        found = {d: sorted(doc["releases"][release][d]) for d in DTYPES}
        print(f"{release}: {doc['releases'][release]['onnxruntime']}: {found}")
    versions = ", ".join(e["onnxruntime"] for e in doc["releases"].values())
    doc = {"source": f"measured by tools/ort_inline_probe.py on {_dt.date.today()} with onnxruntime {versions} "
                     f"(onnx {onnx.__version__} schemas; CPUExecutionProvider of the Linux x86_64 wheels, graph "
                     "optimizations disabled)", **doc}
    args.out.write_text(probe.compact_json(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
