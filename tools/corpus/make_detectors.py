#!/usr/bin/env python
"""Build real detector models with NMS (and basic-pitch's shipped model) for measuring half
precision's floor (docs/precision.md, "Detectors").

Run with the torch venv (NOT the project's python; see make_fp16.py for how it is made):

    /work/venvs/torch/bin/python tools/corpus/make_detectors.py [--out /work/corpus/detect] [--only NAME ...]

Nothing is downloaded for the torch models: torchvision ``weights=None, weights_backbone=None``,
``torch.manual_seed(0)``, BatchNorm running statistics from make_torch.calibrate on synthetic
pictures.  Random heads score every class alike, so make_fp16's ``sharpen`` spreads the class
logits (weights x4, biases N(0,1) x2 - 2) and the score threshold is 0.3 (50 detections at
most): each model then finds a few to a few dozen boxes on the sample.  RetinaNet's sigmoid
scores would all be 1.0 sharpened: it keeps its initial prior (scores near 0.01), threshold 0.01.  The sample is
make_fp16.rgb01: a smooth synthetic picture (sine gradients, three flat rectangles, 3% noise)
of 320x320 (the mobilenet detectors) or 256x256 (the ResNet-50 ones), one CHW image.

basic-pitch: ``pip download basic-pitch==0.4.0 --no-deps``, its
``basic_pitch/saved_models/icassp_2022/nmp.onnx`` copied unchanged; its sample is two seconds
of a three-note melody with harmonics at 22050 Hz, [1, 43844, 1].

Names: ``legacy_op17`` is ``torch.onnx.export(dynamo=False, opset_version=17)``, ``dynamo_op18``
is ``dynamo=True, opset_version=18``.  Writes <out>/<name>.onnx, <out>/<name>.npz,
<out>/expected/<name>.npz and <out>/manifest.json (as make_fp16.py).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_fp16 import detector_wrapper, export_one, imagenet, record, rgb01, sharpen

DETECTORS = [  # (torchvision builder, image size, threshold keyword, threshold, sharpen?, exporters)
    ("ssdlite320_mobilenet_v3_large", 320, "score_thresh", 0.3, True, ("legacy", "dynamo")),
    ("fasterrcnn_mobilenet_v3_large_320_fpn", 320, "box_score_thresh", 0.3, True, ("legacy", "dynamo")),
    # sigmoid scores: sharpened, every one is 1.0 (ties everywhere); as initialised (a prior of 0.01
    # in the bias) they lie near 0.01
    ("retinanet_resnet50_fpn", 256, "score_thresh", 0.01, False, ("legacy",)),
    ("maskrcnn_resnet50_fpn", 256, "box_score_thresh", 0.3, True, ("legacy",)),
]


def detector_specs():
    import make_torch
    import torch
    import torchvision

    Detector = detector_wrapper()

    def builder(name, size, kw, sharpened):
        def build():
            m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)
            make_torch.calibrate(m.backbone, lambda b, s=None: torch.from_numpy(imagenet(b, size)))
            if sharpened:
                sharpen(m)
            return Detector(m.eval())
        return build

    specs = []
    for name, size, thresh_kw, thresh, sharpened, exporters in DETECTORS:
        count_kw = thresh_kw.replace("score_thresh", "detections_per_img")
        kw = {thresh_kw: thresh, count_kw: 50}
        source = (f"torchvision {torchvision.__version__} {name}(weights=None, weights_backbone=None, "
                  f"{thresh_kw}={thresh}, {count_kw}=50)" + (", class logits sharpened" if sharpened else ""))
        for exporter in exporters:
            dynamo = exporter == "dynamo"
            opset = 18 if dynamo else 17
            specs.append((f"{name}_{exporter}_op{opset}", builder(name, size, kw, sharpened),
                          lambda s=size: (torch.from_numpy(rgb01(1, s)[0]),),
                          lambda s=size: {"image": rgb01(1, s)[0]}, dynamo, opset, source))
    return specs


def melody(sr=22050, n=43844):
    """Three notes (A3, C#4, E4) of 0.73 s each with 4 harmonics and a soft attack, plus noise."""
    t = np.arange(n) / sr
    y = np.zeros(n)
    for i, f0 in enumerate((220.0, 277.18, 329.63)):
        on = (t >= i * n / sr / 3) & (t < (i + 1) * n / sr / 3)
        env = np.minimum(1.0, (t - i * n / sr / 3) * 40) * np.exp(-(t - i * n / sr / 3) * 2)
        y += on * env * sum(0.4 / k * np.sin(2 * np.pi * k * f0 * t) for k in range(1, 5))
    y += 0.003 * np.random.default_rng(0).standard_normal(n)
    return y.astype(np.float32)[None, :, None]


def build_basic_pitch(out, entries, failures):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "basic-pitch==0.4.0",
                        "-d", tmp], check=True)
        wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
        member = "basic_pitch/saved_models/icassp_2022/nmp.onnx"
        with zipfile.ZipFile(wheel) as z, z.open(member) as src, \
                open(os.path.join(out, "basic_pitch_nmp.onnx"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    record(out, "basic_pitch_nmp", "speech", f"basic-pitch==0.4.0 {member}", "tf2onnx (as shipped)", None,
           {"serving_default_input_2:0": melody()}, entries, failures,
           extra={"weights": "trained (as shipped)"})


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/work/corpus/detect")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args(argv)
    os.makedirs(os.path.join(args.out, "expected"), exist_ok=True)
    torch.set_num_threads(2)
    mpath = os.path.join(args.out, "manifest.json")
    old = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            old = json.load(f)
    entries = {e["name"]: e for e in old.get("models", [])}
    failures = [f for f in old.get("failures", []) if args.only and f["name"] not in args.only]
    for name, build, make_args, make_sample, dynamo, opset, source in detector_specs():
        if args.only and name not in args.only:
            continue
        entries.pop(name, None)
        done = export_one(args.out, name, build, make_args, make_sample, ["image"], ["boxes", "scores", "labels"],
                          None, dynamo, opset, failures)
        if done is not None:
            feeds, ref, exporter, secs = done
            record(args.out, name, "det", source, exporter, opset, feeds, entries, failures, ref=ref,
                   extra={"export_seconds": round(secs, 1),
                          "weights": "random (torch.manual_seed(0)); no pretrained weights"})
    if not args.only or "basic_pitch_nmp" in args.only:
        build_basic_pitch(args.out, entries, failures)
    with open(mpath, "w") as f:
        json.dump({"generator": "tools/corpus/make_detectors.py", "torch": torch.__version__,
                   "models": sorted(entries.values(), key=lambda e: e["name"]), "failures": failures}, f, indent=1)
    print(f"{len(entries)} models, {len(failures)} failures -> {args.out}")


if __name__ == "__main__":
    main()
