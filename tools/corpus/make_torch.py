#!/usr/bin/env python
"""Build a corpus of real ONNX models exported by torch.onnx.

Run with the torch venv (NOT the project's python):

    /work/venvs/torch/bin/python tools/corpus/make_torch.py [--out /work/corpus/torch]

The venv is made with (x86_64; these wheels lie on this machine's disk):

    python -m venv /work/venvs/torch
    /work/venvs/torch/bin/pip install torch==2.14.1 torchvision==0.29.1
    /work/venvs/torch/bin/pip install onnx onnxscript onnxruntime timm

No weights are downloaded: every model is built with weights=None /
pretrained=False and random weights (torch.manual_seed(0) before each).

Every model is exported four ways:
  legacy_op13   torch.onnx.export(..., dynamo=False, opset_version=13), dynamic batch (and seq) axis
  legacy_op17   torch.onnx.export(..., dynamo=False, opset_version=17), static shapes
  dynamo_op18   torch.onnx.export(..., dynamo=True,  opset_version=18), dynamic batch (and seq) axis
  dynamo_op20   torch.onnx.export(..., dynamo=True,  opset_version=20), static shapes

Writes, for every model <name>:
  <out>/<name>.onnx           the exported model (one file, no external data)
  <out>/<name>.npz            sample input: one array per graph input, under
                              the input's exact name and dtype
  <out>/expected/<name>.npz   onnxruntime's outputs on that input
  <out>/manifest.json         one entry per model, plus the failures
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
import warnings
from collections import Counter

import numpy as np

warnings.filterwarnings("ignore")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from torch import nn  # noqa: E402

try:
    import timm  # noqa: E402
except Exception:  # pragma: no cover
    timm = None

try:
    import onnxscript  # noqa: E402
except Exception:  # pragma: no cover
    onnxscript = None

SEED = 0


# ------------------------------------------------------------------ models


class TinyTextEncoder(nn.Module):
    """Token ids -> embedding + learned positions -> 2 TransformerEncoderLayers
    -> mean pool -> linear classifier.  Input int64 [batch, seq]."""

    def __init__(self, vocab=1000, d_model=64, nhead=4, layers=2, max_len=128, n_classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, max_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=128, dropout=0.0,
                                           batch_first=True, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, input_ids):
        h = self.embed(input_ids) + self.pos[:, : input_ids.shape[1]]
        h = self.encoder(h)
        h = self.norm(h.mean(dim=1))
        return self.head(h)


def image_input(batch, seq=None, size=224):
    """A smooth synthetic RGB image batch, ImageNet-normalised."""
    g = torch.Generator().manual_seed(SEED + 1)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    imgs = []
    for b in range(batch):
        phase = torch.rand(3, generator=g) * 6.28
        rgb = torch.stack([0.5 + 0.4 * torch.sin(6 * xx + 4 * yy * (c + 1) + phase[c]) for c in range(3)])
        rgb = (rgb + 0.05 * torch.randn(3, size, size, generator=g)).clamp(0, 1)
        imgs.append(rgb)
    x = torch.stack(imgs)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return ((x - mean) / std).float()


def text_input(batch, seq=None):
    seq = seq or 16
    g = torch.Generator().manual_seed(SEED + 2 + seq)
    return torch.randint(1, 1000, (batch, seq), generator=g, dtype=torch.int64)


def calibrate(model, make_input):
    """Random init leaves BatchNorm at mean 0 / var 1, which in deep nets like
    mobilenet drives the logits towards 0 (so a comparison of outputs says
    little).  A few train-mode passes over synthetic inputs give the running
    statistics realistic values; weights stay random, the graph is unchanged."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for i in range(3):
            g = torch.Generator().manual_seed(100 + i)
            model(make_input(4) + 0.1 * torch.randn(make_input(4).shape, generator=g))
    return model.eval()


def tv(name):
    return lambda: getattr(torchvision.models, name)(weights=None)


def tm(name):
    return lambda: timm.create_model(name, pretrained=False)


IMG_AXES = {0: "batch"}
# The legacy (TorchScript) exporter traces MultiheadAttention's reshapes with
# the sequence length as a constant, so a dynamic seq axis exports but fails
# in onnxruntime on another length; legacy exports get a dynamic batch only.
TXT_AXES = {"legacy": {0: "batch"}, "dynamo": {0: "batch", 1: "seq"}}
TVV = f"torchvision {torchvision.__version__}"
# name, builder, input name, input maker, dynamic axes (when dynamic), source
MODELS = [
    ("resnet18", tv("resnet18"), "input", image_input, IMG_AXES, TVV),
    ("mobilenet_v3_small", tv("mobilenet_v3_small"), "input", image_input, IMG_AXES, TVV),
    ("shufflenet_v2_x0_5", tv("shufflenet_v2_x0_5"), "input", image_input, IMG_AXES, TVV),
    ("squeezenet1_0", tv("squeezenet1_0"), "input", image_input, IMG_AXES, TVV),
    ("efficientnet_b0", tv("efficientnet_b0"), "input", image_input, IMG_AXES, TVV),
    ("text_transformer", TinyTextEncoder, "input_ids", text_input, TXT_AXES,
     "custom: Embedding + 2 x nn.TransformerEncoderLayer(d_model=64, nhead=4, gelu) + LayerNorm + Linear"),
]
if timm is not None:
    MODELS += [
        ("convnext_atto", tm("convnext_atto"), "input", image_input, IMG_AXES, f"timm {timm.__version__}"),
        ("vit_tiny_patch16_224", tm("vit_tiny_patch16_224"), "input", image_input, IMG_AXES,
         f"timm {timm.__version__}"),
    ]

# tag, dynamo?, opset, dynamic batch?
EXPORTS = [
    ("legacy_op13", False, 13, True),
    ("legacy_op17", False, 17, False),
    ("dynamo_op18", True, 18, True),
    ("dynamo_op20", True, 20, False),
]


# The legacy exporter has no aten::scaled_dot_product_attention below opset
# 14, so models using it fail at 13 (recorded as failures); they also get a
# legacy opset-14 export with the dynamic axes.
EXTRA_EXPORTS = {
    "text_transformer": [("legacy_op14", False, 14, True)],
    "vit_tiny_patch16_224": [("legacy_op14", False, 14, True)],
}

# ----------------------------------------------------------------- export


DIM_MAX = {"batch": 256, "seq": 128}


def export(model, args, path, input_name, dynamo, opset, axes):
    """axes: {dim index: name} to make dynamic, or None for static shapes."""
    kw = dict(opset_version=opset, input_names=[input_name], output_names=["output"], dynamo=dynamo)
    if dynamo:
        if axes:
            kw["dynamic_shapes"] = {_forward_arg(model): {
                i: torch.export.Dim(n, min=1, max=DIM_MAX[n]) for i, n in axes.items()}}
        prog = torch.onnx.export(model, args, **kw)
        prog.save(path, external_data=False)
    else:
        if axes:
            kw["dynamic_axes"] = {input_name: dict(axes), "output": {0: "batch"}}
        torch.onnx.export(model, args, path, **kw)


def _forward_arg(model):
    import inspect

    params = list(inspect.signature(model.forward).parameters)
    return params[0]


def op_types(model):
    c = Counter()

    def walk(g):
        for n in g.node:
            c[(n.domain or "ai.onnx") + "::" + n.op_type] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)
    walk(model.graph)
    for f in model.functions:
        for n in f.node:
            c[f"(function {f.domain}::{f.name}) " + (n.domain or "ai.onnx") + "::" + n.op_type] += 1
    return dict(sorted(c.items()))


def type_str(t):
    tt = t.tensor_type
    dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in tt.shape.dim] \
        if tt.HasField("shape") else None
    return {"tensor": onnx.TensorProto.DataType.Name(tt.elem_type).lower(), "shape": dims}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default="/work/corpus/torch")
    ap.add_argument("--only", nargs="*", help="model names to build (default all)")
    ap.add_argument("--exports", nargs="*", help="export tags (default all)")
    args = ap.parse_args(argv)
    out = args.out
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    torch.set_num_threads(2)

    versions = {
        "python": sys.version.split()[0], "torch": torch.__version__, "torchvision": torchvision.__version__,
        "timm": getattr(timm, "__version__", None), "onnxscript": getattr(onnxscript, "__version__", None),
        "onnx": onnx.__version__, "onnxruntime": ort.__version__, "numpy": np.__version__,
    }
    old = {}
    mpath = os.path.join(out, "manifest.json")
    if (args.only or args.exports) and os.path.exists(mpath):
        prev = json.load(open(mpath))
        old = {e["name"]: e for e in prev.get("models", []) + prev.get("rejected", [])}
        old_failures = prev.get("failures", [])
    else:
        old_failures = []
    entries, failures = dict(old), []
    built = set()

    for mname, build, input_name, make_input, dyn_axes, source in MODELS:
        if args.only and mname not in args.only:
            continue
        for tag, dynamo, opset, dynamic in EXPORTS + EXTRA_EXPORTS.get(mname, []):
            if args.exports and tag not in args.exports:
                continue
            name = f"{mname}_{tag}"
            built.add(name)
            entries.pop(name, None)
            torch.manual_seed(SEED)
            try:
                model = calibrate(build(), make_input).eval()
            except Exception as e:
                failures.append({"name": name, "stage": "build", "error": repr(e)[:500]})
                print(f"BUILD FAIL {name}: {e!r}")
                continue
            n_params = sum(p.numel() for p in model.parameters())
            # torch.export specialises a dimension of size 1, so trace a
            # dynamic export with batch 2 (and check it on batch 3)
            axes = dyn_axes.get("dynamo" if dynamo else "legacy", dyn_axes) if dynamic else None
            x = make_input(2 if dynamic else 1)
            path = os.path.join(out, name + ".onnx")
            t0 = time.time()
            try:
                # no torch.no_grad() here: under no_grad an eval-mode
                # TransformerEncoderLayer takes its fused fast path
                # (aten::_transformer_encoder_layer_fwd), which the legacy
                # exporter cannot export
                export(model, (x,), path, input_name, dynamo, opset, axes)
                m = onnx.load(path)
                onnx.checker.check_model(m)
            except Exception as e:
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                failures.append({"name": name, "stage": "export", "error": msg[:800],
                                 "traceback_tail": traceback.format_exc().splitlines()[-6:]})
                print(f"EXPORT FAIL {name}: {msg[:300]}")
                if os.path.exists(path):
                    os.remove(path)
                continue
            secs = time.time() - t0
            # sample input: batch 3 (and another seq length) where dynamic
            xs = make_input(3 if axes and 0 in axes else 1, 12 if axes and 1 in axes else None)
            gin = m.graph.input[0]
            feeds = {gin.name: xs.numpy().astype(onnx.helper.tensor_dtype_to_np_dtype(gin.type.tensor_type.elem_type))}
            with torch.no_grad():
                ref = model(xs).numpy()
            try:
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                outs = sess.run(None, feeds)
                diff = float(np.max(np.abs(outs[0] - ref)))
                ok = True
            except Exception as e:
                failures.append({"name": name, "stage": "onnxruntime", "error": f"{type(e).__name__}: {str(e)[:800]}"})
                print(f"ORT FAIL {name}: {e!s:.300}")
                ok, outs, diff = False, None, None
            if not ok:
                os.makedirs(os.path.join(out, "rejected"), exist_ok=True)
                os.replace(path, os.path.join(out, "rejected", name + ".onnx"))
            sub = "" if ok else "rejected"
            np.savez(os.path.join(out, sub, name + ".npz"), **feeds)
            if ok:
                np.savez(os.path.join(out, "expected", name + ".npz"),
                         **{o.name: v for o, v in zip(m.graph.output, outs)})
            data = open(os.path.join(out, sub, name + ".onnx"), "rb").read()
            opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
            entries[name] = {
                "name": name,
                "file": os.path.join(sub, name + ".onnx"),
                "sample": os.path.join(sub, name + ".npz"),
                "expected": ("expected/" + name + ".npz") if ok else None,
                "model": mname,
                "source": source,
                "parameters": n_params,
                "weights": "random (torch.manual_seed(0)), no pretrained weights; BatchNorm running stats from 3 train-mode passes on synthetic inputs",
                "exporter": f"torch.onnx.export(dynamo={dynamo}) torch {torch.__version__}"
                            + (f", onnxscript {versions['onnxscript']}" if dynamo else " (TorchScript-based)"),
                "requested_opset": opset,
                "dynamic_axes": {str(k): v for k, v in axes.items()} if axes else None,
                "default_opset": opsets.get("ai.onnx"),
                "ml_opset": opsets.get("ai.onnx.ml"),
                "opset_import": opsets,
                "ir_version": m.ir_version,
                "producer": f"{m.producer_name} {m.producer_version}".strip(),
                "n_nodes": len(m.graph.node),
                "n_functions": len(m.functions),
                "op_types": op_types(m),
                "inputs": [{"name": i.name, **type_str(i.type)} for i in m.graph.input],
                "outputs": [{"name": o.name, **type_str(o.type)} for o in m.graph.output],
                "sample_shape": list(xs.shape),
                "onnxruntime_ok": ok,
                "max_abs_diff_vs_torch": diff,
                "output_abs_max": float(np.max(np.abs(ref))),
                "export_seconds": round(secs, 1),
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            print(f"{'ok ' if ok else 'REJ'} {name:36s} opsets={opsets} ir={m.ir_version} "
                  f"nodes={len(m.graph.node)} diff={diff} {secs:.1f}s {len(data) / 1e6:.1f}MB", flush=True)

    failures = [f for f in old_failures if f["name"] not in built] + failures
    allm = sorted(entries.values(), key=lambda e: e["name"])
    manifest = {"generator": "tools/corpus/make_torch.py", "versions": versions,
                "exports": [{"tag": t, "dynamo": d, "opset": o, "dynamic_batch": b} for t, d, o, b in EXPORTS],
                "models": [e for e in allm if e["onnxruntime_ok"]],
                "rejected": [e for e in allm if not e["onnxruntime_ok"]],
                "failures": failures}
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"\n{len(manifest['models'])} models ok, {len(manifest['rejected'])} rejected by onnxruntime, "
          f"{len(failures)} failures; manifest at {mpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
