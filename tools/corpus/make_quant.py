#!/usr/bin/env python
"""Quantized real models (issue 27): float models quantized by onnxruntime.quantization, each as
static QDQ and QOperator (per tensor and per channel, uint8 activations, int8 weights, 4
calibration samples from a fixed seed) and dynamic (int8 weights); with a sample input of a shape
it takes, as the other corpora have.

    python tools/corpus/make_quant.py [--out /work/corpus/quant] [FLOAT.onnx ...]

Without models, the float models PyPI wheels ship (fetched with `pip download --no-deps`):
rapidocr-onnxruntime's PP-OCR detector, recognizer and classifier, nudenet's YOLOv8n, piper's
tashkeel transformer, magika's classifier. Other float models given on the command line need
static input shapes or an entry in SHAPES (torchvision exports: `torch.onnx.export(...,
dynamo=False)` in /work/venvs/torch). Runs in a venv with onnxruntime, onnx and sympy
(`/work/venvs/quant`), never in the project's python. Writes <name>_<how>.onnx and .npz and
manifest.json; a model onnxruntime.quantization fails on, or whose result does not run, is
listed under `failures`.

Then, in the project's python:
`python -m rewriter convert M --opset 11 -o out.onnx --verify --input-shape NAME:DIMS ...`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PACKAGES = ["rapidocr-onnxruntime==1.4.4", "nudenet==3.4.2", "piper-tts==1.8.0", "magika==1.0.3"]
MEMBERS = {  # wheel member -> corpus name
    "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": "ppocr_v4_det",
    "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": "ppocr_v4_rec",
    "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx": "ppocr_mobile_cls",
    "nudenet/320n.onnx": "nudenet_320n",
    "piper/tashkeel/model.onnx": "piper_tashkeel",
    "magika/models/standard_v3_3/model.onnx": "magika",
}
# name -> {input: (shape, low, high)}; integer inputs take integers in [low, high)
SHAPES = {
    "ppocr_v4_det": {"x": ([1, 3, 96, 160], -1, 1)}, "ppocr_v4_rec": {"x": ([1, 3, 48, 160], -1, 1)},
    "ppocr_mobile_cls": {"x": ([1, 3, 48, 192], -1, 1)}, "nudenet_320n": {"images": ([1, 3, 320, 320], 0, 1)},
    "piper_tashkeel": {"char_inputs": ([1, 24], 1, 30), "diac_inputs": ([1, 24], 1, 8),
                       "input_lengths": ([1], 24, 25)},
    "magika": {"bytes": ([1, 2048], 0, 256)},
}
HOW = [("qdq", "QDQ", False), ("qdq_pc", "QDQ", True), ("qop", "QOperator", False),
       ("qop_pc", "QOperator", True), ("dyn", None, False)]


def _sample(name: str, model, seed: int) -> dict:
    import onnx

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in initializers:
            continue
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        shape, low, high = SHAPES.get(name, {}).get(i.name) or (
            [d.dim_value for d in i.type.tensor_type.shape.dim], 0, 1)
        if dtype.kind in "iu":
            feeds[i.name] = rng.integers(low, high, shape).astype(dtype)
        else:
            feeds[i.name] = rng.uniform(low, high, shape).astype(dtype)
    return feeds


def _quantize(name: str, path: str, out: str, entries: dict, failures: list) -> None:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model = onnx.load(path)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter([_sample(name, model, s) for s in range(4)])

        def get_next(self):
            return next(self.samples, None)

    path, out = os.path.abspath(path), os.path.abspath(out)
    with tempfile.TemporaryDirectory() as tmp, _cwd(tmp):  # (its calibrator writes uuid-named data files to cwd)
        source = os.path.join(tmp, "pre.onnx")
        try:
            quant_pre_process(path, source)
        except Exception:  # noqa: BLE001 - dynamic dims defeat its symbolic inference: quantize as it is
            source = path
        for tag, fmt, per_channel in HOW:
            dst_name = f"{name}_{tag}"
            dst = os.path.join(out, dst_name + ".onnx")
            try:
                if fmt is None:
                    quantize_dynamic(source, dst, weight_type=QuantType.QInt8)
                else:
                    quantize_static(source, dst, Reader(), quant_format=getattr(QuantFormat, fmt),
                                    per_channel=per_channel, activation_type=QuantType.QUInt8,
                                    weight_type=QuantType.QInt8)
                feeds = _sample(name, model, 99)
                ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, feeds)
            except Exception as e:  # noqa: BLE001
                failures.append({"name": dst_name, "error": " ".join(str(e).split())[:300]})
                if os.path.exists(dst):
                    os.unlink(dst)
                print(f"FAILED {dst_name}: {failures[-1]['error'][:120]}", flush=True)
                continue
            np.savez(os.path.join(out, dst_name + ".npz"), **feeds)
            q = onnx.load(dst, load_external_data=False)
            entries[dst_name] = {"name": dst_name, "file": dst_name + ".onnx", "sample": dst_name + ".npz",
                                 "source": name, "format": fmt or "dynamic", "per_channel": per_channel,
                                 "opsets": {o.domain or "ai.onnx": o.version for o in q.opset_import},
                                 "nodes": len(q.graph.node),
                                 "com.microsoft": sorted({n.op_type for n in q.graph.node if n.domain == "com.microsoft"})}
            print(f"ok {dst_name:32s} nodes={len(q.graph.node)}", flush=True)


@contextlib.contextmanager
def _cwd(path):
    here = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)


def main(argv=None) -> int:
    import onnxruntime

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/quant")
    ap.add_argument("models", nargs="*", help="float models to quantize (default: the wheels' models)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    entries: dict = {}
    failures: list = []
    with tempfile.TemporaryDirectory() as tmp:
        sources = [(os.path.basename(p)[:-5], p) for p in args.models]
        if not args.models:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PACKAGES, "-d", tmp],
                           check=True)
            for wheel in sorted(f for f in os.listdir(tmp) if f.endswith(".whl")):
                with zipfile.ZipFile(os.path.join(tmp, wheel)) as zf:
                    for member in zf.namelist():
                        if member in MEMBERS:
                            path = os.path.join(tmp, MEMBERS[member] + ".onnx")
                            with zf.open(member) as src, open(path, "wb") as dst:
                                shutil.copyfileobj(src, dst)
                            sources.append((MEMBERS[member], path))
        for name, path in sorted(sources):
            _quantize(name, path, args.out, entries, failures)
    json.dump({"generator": "tools/corpus/make_quant.py", "onnxruntime": onnxruntime.__version__,
               "models": sorted(entries.values(), key=lambda e: e["name"]), "failures": failures},
              open(os.path.join(args.out, "manifest.json"), "w"), indent=1)
    print(f"{len(entries)} quantized models in {args.out}; {len(failures)} failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
