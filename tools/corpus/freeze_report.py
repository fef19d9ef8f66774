#!/usr/bin/env python3
"""Models whose weights are graph inputs with an initializer, converted with and without
``--freeze-input-defaults``, beside onnx's own version converter: does each result run in ONNX
Runtime and compute what the source computes (on its sample input, the defaults taken)?

    python tools/corpus/freeze_report.py /work/corpus/iniputs --opsets 7 11 13 17 18

A row per (model, opset): rewriter without the option, with it (and how many inputs it froze),
onnx.version_converter.convert_version: ``ok``, ``refused: ...`` or ``DIFFERS``/``BROKEN``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

import rewriter


def _run(model: onnx.ModelProto, feeds: dict):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _judge(make, feeds, want) -> str:
    try:
        result = make()
    except Exception as e:  # noqa: BLE001 - reported
        return "refused: " + " ".join(str(e).split())[:90]
    try:
        got = _run(result, feeds)
    except Exception as e:  # noqa: BLE001 - reported
        return "BROKEN: " + " ".join(str(e).split())[:90]
    err = max(float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30) for g, w in zip(got, want))
    return "ok" if err < 1e-5 else f"DIFFERS ({err:.1e})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--opsets", type=int, nargs="+", default=[7, 11, 13, 17, 18])
    args = ap.parse_args(argv)
    print("| model | opset | rewriter | rewriter --freeze-input-defaults | onnx.version_converter |")
    print("|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(args.folder, "*.onnx"))):
        feeds = dict(np.load(path[:-5] + ".npz"))
        source = onnx.load(path)
        want = _run(source, feeds)
        for opset in args.opsets:
            plain = _judge(lambda: rewriter.convert_opset(path, opset), feeds, want)
            frozen = _judge(lambda: rewriter.convert_opset(path, opset, freeze_input_defaults=True), feeds, want)
            theirs = _judge(lambda: onnx.version_converter.convert_version(source, opset), feeds, want)
            print(f"| {os.path.basename(path)} | {opset} | {plain} | {frozen} | {theirs} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
