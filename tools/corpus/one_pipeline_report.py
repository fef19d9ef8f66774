"""Whether `convert --dtype`, `rewriter.convert_precision` and `rewriter.ConvertPrecisionPass` give the
same half-precision model on real models (the one-pipeline promise, measured beyond the tests'
synthetic models).

For each model under the corpus folders and each setting, three runs:
  cli   `rewriter convert M --dtype D -o F -q --no-verify FLAGS` (in process), F loaded by plain onnx;
  api   `rewriter.convert_precision(M, D, **kwargs)` on the path (a ModelProto comes back);
  pass  `rewriter.ConvertPrecisionPass(D, **kwargs)` on `onnx_ir.load(M)`, against
        `rewriter.convert_precision(onnx_ir.load(M), ...)` (the same representation).
A row is `identical` when cli == api byte for byte (SerializeToString) and pass == api(ir);
`refused` when all three refuse (the CLI with exit 1 or 2, the API and the pass with a
RewriterError) with the same first line; anything else is `DIFFERS` and printed.

    python tools/corpus/one_pipeline_report.py /work/corpus/torch /work/corpus/ml ... [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import sys
import tempfile
import time

import onnx
import onnx_ir as ir

import rewriter
from rewriter.cli.main import main

SETTINGS = {
    "float16": ("float16", [], {}),
    "bfloat16": ("bfloat16", [], {}),
    "optimize": ("float16", ["--optimize"], {"optimize": True}),
    "target_ort_1.17": ("float16", ["--target", "onnxruntime==1.17"], {"target": "onnxruntime==1.17"}),
    "bfloat16_keep_softmax": ("bfloat16", ["--keep-op-types", "Softmax"], {"keep_op_types": "Softmax"}),
}


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _cli(path: pathlib.Path, dtype: str, flags: list, out: pathlib.Path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["convert", str(path), "--dtype", dtype, "-o", str(out), "-q", "--no-verify", *flags])
    if code == 0:
        return onnx.load(str(out)).SerializeToString(), None
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    return None, f"exit {code}: {lines[0] if lines else ''}"


def _api(source, dtype: str, kwargs: dict):
    try:
        result = rewriter.convert_precision(source, dtype, **kwargs)
    except rewriter.RewriterError as e:
        return None, _first_line(e)
    return (result.SerializeToString() if isinstance(result, onnx.ModelProto)
            else ir.to_proto(result).SerializeToString()), None


def _pass(path: pathlib.Path, dtype: str, kwargs: dict):
    try:
        model = rewriter.ConvertPrecisionPass(dtype, **kwargs)(ir.load(str(path))).model
    except rewriter.RewriterError as e:
        return None, _first_line(e)
    return ir.to_proto(model).SerializeToString(), None


def compare(path: pathlib.Path, setting: str, tmp: pathlib.Path) -> dict:
    dtype, flags, kwargs = SETTINGS[setting]
    cli, cli_err = _cli(path, dtype, flags, tmp / "cli.onnx")
    api, api_err = _api(str(path), dtype, kwargs)
    row = {"model": f"{path.parent.name}/{path.stem}", "setting": setting}
    try:
        loaded = ir.load(str(path))
    except Exception as e:  # noqa: BLE001 - onnx_ir cannot read the model: the pass is not compared
        row["no_pass"] = f"onnx_ir.load: {type(e).__name__}"
        via_ir = passed = api
        ir_err = pass_err = api_err
    else:
        via_ir, ir_err = _api(loaded, dtype, kwargs)
        passed, pass_err = _pass(path, dtype, kwargs)
    if cli is not None and api is not None and passed is not None and via_ir is not None:
        same = cli == api and passed == via_ir
        row.update(outcome="identical" if same else "DIFFERS", cli_eq_api=cli == api, pass_eq_api_ir=passed == via_ir)
    elif cli is None and api is None and passed is None and via_ir is None:
        row.update(outcome="refused", why=api_err, cli=cli_err, api_ir=ir_err, passes=pass_err)
    else:
        row.update(outcome="DIFFERS", cli=cli_err or "ok", api=api_err or "ok", api_ir=ir_err or "ok",
                   passes=pass_err or "ok")
    return row


def main_report(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=pathlib.Path)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--max-mb", type=float, default=400.0, help="skip models larger than this")
    args = parser.parse_args(argv)
    rows = []
    models = sorted(p for folder in args.folders for p in folder.glob("*.onnx"))
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for path in models:
            if path.stat().st_size > args.max_mb * 2**20:
                continue
            for setting in args.settings.split(","):
                row = compare(path, setting, pathlib.Path(tmp))
                rows.append(row)
                if row["outcome"] == "DIFFERS":
                    print("DIFFERS", json.dumps(row), flush=True)
    counts: dict = {}
    for row in rows:
        counts.setdefault(row["setting"], {}).setdefault(row["outcome"], 0)
        counts[row["setting"]][row["outcome"]] += 1
    print(f"{len(models)} models, {time.time() - start:.0f} s")
    for setting, c in counts.items():
        print(f"{setting:18s} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "rows": rows}, indent=1))
    return 1 if any(r["outcome"] == "DIFFERS" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main_report())
