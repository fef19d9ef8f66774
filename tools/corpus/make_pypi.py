#!/usr/bin/env python
"""A corpus of the ONNX models that PyPI packages ship: rapidocr-onnxruntime (PP-OCR
detector, recognizer, classifier: Paddle exports), silero-vad (six voice-activity models, with
If and Loop) and magika (a file-type classifier using ai.onnx.ml). The wheels are fetched with
`pip download --no-deps` (at build time only), the models copied out unchanged, and each gets
a sample input of a shape it takes (values from a fixed seed; silero's `sr` is 16000).

    python tools/corpus/make_pypi.py [--out /work/corpus/pypi]

Writes <name>.onnx, <name>.npz and manifest.json as the other corpus builders do; runs in the
project's environment (it needs only pip, numpy, onnx and onnxruntime).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PACKAGES = ["rapidocr-onnxruntime==1.4.4", "silero-vad==6.2.3", "magika==1.0.3"]
# input name -> shape for models whose inputs are dynamic (a size they take), and fixed values
SHAPES = {
    "ch_PP-OCRv4_det_infer": {"x": [1, 3, 96, 160]},
    "ch_PP-OCRv4_rec_infer": {"x": [1, 3, 48, 160]},
    "ch_ppocr_mobile_v2.0_cls_infer": {"x": [1, 3, 48, 192]},
    "magika_standard_v3_3": {"bytes": [1, 2048]},
}
SILERO = {"input": [1, 576], "state": [2, 1, 128], "h": [1, 1, 128], "c": [1, 1, 128]}


def _sample(name: str, model) -> dict:
    import onnx

    rng = np.random.default_rng(0)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        elem = vi.type.tensor_type.elem_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in vi.type.tensor_type.shape.dim]
        shape = SHAPES.get(name, {}).get(vi.name) or (SILERO.get(vi.name) if name.startswith("silero") else None)
        if shape is None:
            shape = [d or 1 for d in dims]
        if name.startswith("silero") and vi.name == "input" and dims[1:] == [576]:
            shape = [1, 576]
        if vi.name == "sr":
            feeds[vi.name] = np.array(16000, dtype=np.int64)
        elif elem == onnx.TensorProto.FLOAT:
            feeds[vi.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        elif elem == onnx.TensorProto.FLOAT16:
            feeds[vi.name] = rng.uniform(-1, 1, shape).astype(np.float16)
        elif elem in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
            feeds[vi.name] = rng.integers(0, 256, shape).astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        else:
            raise SystemExit(f"{name}: no sample for input {vi.name} of type {elem}")
    return feeds


def main(argv=None) -> int:
    import onnx
    import onnxruntime as ort

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/pypi")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    entries, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PACKAGES, "-d", tmp], check=True)
        for wheel in sorted(glob.glob(os.path.join(tmp, "*.whl"))):
            with zipfile.ZipFile(wheel) as zf:
                for member in zf.namelist():
                    if not member.endswith(".onnx"):
                        continue
                    stem = os.path.splitext(os.path.basename(member))[0]
                    name = f"magika_{member.split('/')[-2]}" if stem == "model" else stem
                    path = os.path.join(args.out, name + ".onnx")
                    with zf.open(member) as src, open(path, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    model = onnx.load(path)
                    feeds = _sample(name, model)
                    try:
                        ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
                    except Exception as e:  # noqa: BLE001
                        failures.append({"name": name, "error": str(e)[:300]})
                        os.unlink(path)
                        continue
                    np.savez(os.path.join(args.out, name + ".npz"), **feeds)
                    entries.append({"name": name, "file": name + ".onnx", "sample": name + ".npz",
                                    "package": os.path.basename(wheel), "member": member,
                                    "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
                                    "ir_version": model.ir_version})
    json.dump({"generator": "tools/corpus/make_pypi.py", "models": entries, "failures": failures},
              open(os.path.join(args.out, "manifest.json"), "w"), indent=1)
    print(f"{len(entries)} models written to {args.out}; {len(failures)} did not run: {failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
