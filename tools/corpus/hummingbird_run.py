#!/usr/bin/env python
"""Run ONNX-ML models through Hummingbird (its PyTorch backend), for bench/bench_lowering.py.

Run by the python of a venv holding hummingbird-ml, torch, onnx and scikit-learn, never the
project's:

    /work/venvs/hummingbird/bin/python tools/corpus/hummingbird_run.py CASES.jsonl

Each line of CASES.jsonl is {"id", "model", "inputs" (npz), "outputs" (npz to write)}. For each it
prints one JSON line: {"id", "ok": true, "kind": "classifier"|"regressor"|"transformer"} after
writing "label" and "proba" (or "value") to the outputs file, or {"id", "ok": false, "error"}.
``hummingbird.ml.convert(onnx_model, "torch", sample)`` reads the model; one graph input only.

The venv (hummingbird-ml 0.4.12 pins onnx <= 1.16.1 and wants torch, which the torch venv has):

    python3.11 -m venv /work/venvs/hummingbird
    printf '%s\n' /work/venvs/ml/lib/python3.11/site-packages /work/venvs/torch/lib/python3.11/site-packages \
        > /work/venvs/hummingbird/lib/python3.11/site-packages/shared_venvs.pth
    /work/venvs/hummingbird/bin/pip install --no-deps hummingbird-ml==0.4.12 psutil dill onnxconverter-common
"""

from __future__ import annotations

import json
import sys
import warnings


def _one(case: dict) -> dict:
    import numpy as np
    import onnx
    from hummingbird.ml import convert

    model = onnx.load(case["model"])
    with np.load(case["inputs"], allow_pickle=True) as data:
        feeds = [data[k] for k in data.files]
    if len(feeds) != 1:
        return {"ok": False, "error": f"{len(feeds)} graph inputs (Hummingbird takes one)"}
    x = feeds[0]
    hb = convert(model, "torch", x)
    out = {}
    if hasattr(hb, "predict_proba"):
        out["label"], out["proba"] = np.asarray(hb.predict(x)), np.asarray(hb.predict_proba(x))
        kind = "classifier"
    elif hasattr(hb, "predict"):
        out["value"], kind = np.asarray(hb.predict(x)), "regressor"
    else:
        out["value"], kind = np.asarray(hb.transform(x)), "transformer"
    np.savez(case["outputs"], **out)
    return {"ok": True, "kind": kind}


def main(argv=None) -> int:
    warnings.filterwarnings("ignore")
    import hummingbird

    print(json.dumps({"hummingbird": getattr(hummingbird, "__version__", "?")}), flush=True)
    with open((argv or sys.argv[1:])[0]) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    for case in cases:
        try:
            result = _one(case)
        except Exception as e:  # noqa: BLE001  Hummingbird refusing the model is a result
            text = str(e).strip().splitlines()
            result = {"ok": False, "error": f"{type(e).__name__}: {text[0][:200] if text else ''}"}
        print(json.dumps(dict(result, id=case["id"])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
