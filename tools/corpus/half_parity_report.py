#!/usr/bin/env python3
"""The CLI, the API and the pass give the same half-precision model, on real models.

For each ``*.onnx`` of the given folders and each setting, ``rewriter convert M --dtype float16``
(in its own process) is compared byte for byte with ``rewriter.convert_precision(path, ...)``
(the written file loaded by plain onnx), and ``ConvertPrecisionPass`` on ``onnx_ir.load(path)``
with ``convert_precision`` on the same onnx_ir model. A row per (model, setting): ``same``, or
what differs; exit 1 when any differs.

    python tools/corpus/half_parity_report.py /work/corpus/optbench /work/corpus/torch
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import onnx
import onnx_ir as ir

import rewriter

SETTINGS = {
    "float16": ([], {}),
    "float16 --target onnxruntime==1.17": (["--target", "onnxruntime==1.17"], {"target": "onnxruntime==1.17"}),
    "bfloat16 --keep-op-types Softmax": (["--keep-op-types", "Softmax"], {"keep_op_types": "Softmax"}),
}


def _row(path: str, setting: str, tmp: str) -> str:
    flags, kwargs = SETTINGS[setting]
    dtype = setting.split()[0]
    out = os.path.join(tmp, "cli.onnx")
    cli = subprocess.run([sys.executable, "-m", "rewriter", "convert", path, "--dtype", dtype, "-o", out, "-q",
                          "--no-verify", *flags], capture_output=True, text=True)
    try:
        api = rewriter.convert_precision(path, dtype, **kwargs)
    except rewriter.RewriterError as e:
        return "both refused" if cli.returncode == 2 else f"API refused, CLI exit {cli.returncode}: {str(e)[:80]}"
    if cli.returncode != 0:
        return f"CLI exit {cli.returncode}: {cli.stderr.strip().splitlines()[-1][:100] if cli.stderr.strip() else ''}"
    if onnx.load(out).SerializeToString() != api.SerializeToString():
        return "DIFFERS: CLI file vs API"
    from_ir = rewriter.convert_precision(ir.load(path), dtype, **kwargs)
    from_pass = rewriter.ConvertPrecisionPass(dtype, **kwargs)(ir.load(path)).model
    if ir.to_proto(from_ir).SerializeToString() != ir.to_proto(from_pass).SerializeToString():
        return "DIFFERS: pass vs API"
    return "same"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args(argv)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rewriter {rewriter.__version__}, "
          f"onnx {onnx.__version__}")
    counts: dict[str, int] = {}
    for folder in args.folders:
        for path in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
            for setting in SETTINGS:
                with tempfile.TemporaryDirectory() as tmp:
                    row = _row(path, setting, tmp)
                counts[row.split(":")[0]] = counts.get(row.split(":")[0], 0) + 1
                print(f"{os.path.relpath(path, os.path.dirname(folder))}\t{setting}\t{row}", flush=True)
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if any(k.startswith("DIFFERS") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
