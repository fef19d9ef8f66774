#!/usr/bin/env python
"""Build the real models behind the type routes of issue 20 (int64 Min/Max/Clip below 12,
16-bit and per-channel QuantizeLinear/DequantizeLinear below 21 / 13).

Two parts, each in its own virtualenv (never the project's python):

    /work/venvs/torch/bin/python tools/corpus/make_type_routes.py --part torch
    /work/venvs/ml/bin/python    tools/corpus/make_type_routes.py --part qdq

``--part torch`` (torch + transformers): small random-weight configs exported with the legacy
exporter (``dynamo=False``), dynamic batch and sequence axes:

- ``t5_legacy_op13/op14``: transformers' T5Model (encoder + decoder); its relative position
  buckets use int64 Min (``torch.min``) and Where.
- ``deberta_v2_legacy_op13/op14``: DebertaV2Model with relative attention and position
  buckets; ``torch.clamp`` of int64 relative positions becomes int64 Clip.
- ``float/cnn_op13``, ``float/mlp_op13``: small float models (Conv/BatchNorm/ReLU/Pool/Gemm,
  Gemm/ReLU) for the quantization part.

``--part qdq`` (onnxruntime.quantization): the float models quantized with
``quantize_static`` in QDQ format, per_channel=True:

- ``<m>_qdq_u8s8_pc``: activations QUInt8, weights QInt8 per channel (opset 13, per-axis DQ);
- ``<m>_qdq_a16w8_u16`` / ``_s16``: activations QUInt16 / QInt16, weights QInt8 per channel
  (onnxruntime raises such models to opset 21, where 16-bit Q/DQ exist).

``--part report`` (the project's python, where ``rewriter`` is installed): converts every model
with ``rewriter convert IN -o OUT --opset N --verify`` (to 11, and the 16-bit QDQ ones also to
13, 15, 17, 19) and prints a table: converted or why not, the max abs diff of the result vs the
original on the sample input in ONNX Runtime (graph optimizations off, and on: with them on,
ONNX Runtime fuses the original's per-channel QDQ into integer kernels, which the arithmetic
form at opset 11 cannot be), the node counts.

No weights are downloaded (torch.manual_seed(0), random init). Writes ``<out>/<name>.onnx``,
``<out>/<name>.npz`` (a sample input, one array per graph input) and ``<out>/manifest.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")

OUT = "/work/corpus/type_routes"


def _save_input(path: str, feeds: dict) -> None:
    np.savez(path, **feeds)


def _torch_part(out: str, manifest: dict) -> None:
    import torch
    import transformers
    from torch import nn

    manifest["versions"].update(torch=torch.__version__, transformers=transformers.__version__)

    def export(name, model, args, input_names, output_names, dynamic, opset, feeds):
        path = os.path.join(out, name + ".onnx")
        model.eval()
        with torch.no_grad():
            torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic, opset_version=opset, dynamo=False, do_constant_folding=True)
        _save_input(os.path.join(out, name + ".npz"), feeds)
        manifest["models"].append({"name": name, "opset": opset, "exporter": "torch.onnx.export(dynamo=False)"})
        print("wrote", path, flush=True)

    ids = torch.randint(0, 100, (2, 8), dtype=torch.int64, generator=torch.Generator().manual_seed(1))
    dec = torch.randint(0, 100, (2, 5), dtype=torch.int64, generator=torch.Generator().manual_seed(2))

    class T5Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, decoder_input_ids):
            return self.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False,
                          return_dict=False)[0]

    class DebertaWrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

    for opset in (13, 14):
        torch.manual_seed(0)
        cfg = transformers.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                    num_heads=4, relative_attention_num_buckets=8,
                                    relative_attention_max_distance=16, decoder_start_token_id=0,
                                    attn_implementation="eager")
        t5 = T5Wrap(transformers.T5Model(cfg))
        try:
            export(f"t5_legacy_op{opset}", t5, (ids, dec), ["input_ids", "decoder_input_ids"], ["hidden"],
                   {"input_ids": {0: "batch", 1: "seq"}, "decoder_input_ids": {0: "batch", 1: "dseq"},
                    "hidden": {0: "batch", 1: "dseq"}}, opset,
                   {"input_ids": ids.numpy(), "decoder_input_ids": dec.numpy()})
        except Exception as e:  # noqa: BLE001
            manifest["failures"].append({"name": f"t5_legacy_op{opset}", "error": repr(e)[:500]})
        torch.manual_seed(0)
        cfg = transformers.DebertaV2Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                           intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                                           position_buckets=8, max_relative_positions=16, pos_att_type=["p2c", "c2p"],
                                           norm_rel_ebd="layer_norm", share_att_key=True,
                                           attn_implementation="eager")
        mask = torch.ones_like(ids)
        deberta = DebertaWrap(transformers.DebertaV2Model(cfg))
        try:
            export(f"deberta_v2_legacy_op{opset}", deberta, (ids, mask), ["input_ids", "attention_mask"], ["hidden"],
                   {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                    "hidden": {0: "batch", 1: "seq"}}, opset,
                   {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        except Exception as e:  # noqa: BLE001
            manifest["failures"].append({"name": f"deberta_v2_legacy_op{opset}", "error": repr(e)[:500]})

    float_dir = os.path.join(out, "float")
    os.makedirs(float_dir, exist_ok=True)
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    mlp = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 5))
    for name, model, shape in (("cnn", cnn, (1, 3, 16, 16)), ("mlp", mlp, (4, 20))):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
        path = os.path.join(float_dir, f"{name}_op13.onnx")
        model.eval()
        with torch.no_grad():
            torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=13,
                              dynamo=False)
        _save_input(os.path.join(float_dir, f"{name}_op13.npz"), {"x": x.numpy()})
        print("wrote", path, flush=True)


def _qdq_part(out: str, manifest: dict) -> None:
    import onnxruntime
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    manifest["versions"].update(onnxruntime=onnxruntime.__version__)

    class Reader(CalibrationDataReader):
        def __init__(self, shape, seed):
            rng = np.random.default_rng(seed)
            self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    float_dir = os.path.join(out, "float")
    for name, shape in (("cnn", (1, 3, 16, 16)), ("mlp", (4, 20))):
        src = os.path.join(float_dir, f"{name}_op13.onnx")
        sample = dict(np.load(os.path.join(float_dir, f"{name}_op13.npz")))
        for tag, act in (("u8s8_pc", QuantType.QUInt8), ("a16w8_u16", QuantType.QUInt16),
                         ("a16w8_s16", QuantType.QInt16)):
            dst = os.path.join(out, f"{name}_qdq_{tag}.onnx")
            quantize_static(src, dst, Reader(shape, 4), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=act, weight_type=QuantType.QInt8)
            _save_input(os.path.join(out, f"{name}_qdq_{tag}.npz"), sample)
            manifest["models"].append({"name": f"{name}_qdq_{tag}", "activation": str(act), "weight": "QInt8",
                                       "per_channel": True, "format": "QDQ"})
            print("wrote", dst, flush=True)


def _report(out: str) -> None:
    import glob
    import subprocess

    import onnx
    import onnxruntime as ort

    def outputs(path, feeds, optimize):
        options = ort.SessionOptions()
        options.log_severity_level = 4
        if not optimize:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*.onnx"))):
        name = os.path.basename(path)[:-5]
        feeds = dict(np.load(os.path.join(out, name + ".npz")))
        source = onnx.load(path)
        opset = next(o.version for o in source.opset_import if o.domain in ("", "ai.onnx"))
        targets = [11] + ([13, 15, 17, 19] if opset >= 21 else [])
        for target in targets:
            dst = f"/tmp/type_routes_{name}_{target}.onnx"
            proc = subprocess.run(["rewriter", "convert", path, "-o", dst, "--opset", str(target), "--verify"],
                                  capture_output=True, text=True)
            verify = next((line.strip() for line in proc.stdout.splitlines() + proc.stderr.splitlines()
                           if "max abs diff" in line), "")
            if proc.returncode == 1:  # --verify (ONNX Runtime, optimizations on) found a difference: measure it
                proc = subprocess.run(["rewriter", "convert", path, "-o", dst, "--opset", str(target)],
                                      capture_output=True, text=True)
            if proc.returncode != 0:
                rows.append((name, opset, target, "refused" if proc.returncode == 2 else f"exit {proc.returncode}",
                             "", "", len(source.graph.node), "", proc.stderr.strip().splitlines()[-1][:150]))
                continue
            diffs = []
            for optimize in (False, True):
                a, b = outputs(path, feeds, optimize), outputs(dst, feeds, optimize)
                diffs.append(max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
                                 for x, y in zip(a, b)))
            rows.append((name, opset, target, "yes", f"{diffs[0]:.3g}", f"{diffs[1]:.3g}", len(source.graph.node),
                         len(onnx.load(dst).graph.node), verify.replace("(tolerance rtol=0.0001, atol=1e-06) ", "")[:80]))
    print("| model | from | to | converted | max abs diff (ORT, opt. off) | (ORT, opt. on) | nodes before "
          "| nodes after | --verify |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["torch", "qdq", "report"], required=True)
    p.add_argument("--out", default=OUT)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.part == "report":
        _report(args.out)
        return 0
    path = os.path.join(args.out, f"manifest_{args.part}.json")
    manifest = {"versions": {"python": sys.version.split()[0], "numpy": np.__version__}, "models": [], "failures": []}
    (_torch_part if args.part == "torch" else _qdq_part)(args.out, manifest)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(manifest["failures"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
