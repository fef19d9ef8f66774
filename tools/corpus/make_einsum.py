#!/usr/bin/env python
"""A corpus of real ONNX models with Einsum nodes, and the report of their conversion to opset 11.

Build (the torch venv, NOT the project's python; see make_torch.py for the venv):

    /work/venvs/torch/bin/python tools/corpus/make_einsum.py [--out /work/corpus/einsum]

- ``piper_tashkeel``: the Arabic diacritizer (libtashkeel) that the PyPI wheel piper-tts 1.8.0
  ships as ``piper/tashkeel/model.onnx`` (``pip download --no-deps piper-tts==1.8.0``), with a
  sample made from an Arabic sentence through the wheel's own ``input_id_map.json``.
- torch modules whose forward calls ``torch.einsum`` (random weights, ``torch.manual_seed(0)``,
  nothing downloaded): a zoo of equations (attention, rotary outer product, bilinear forms over
  three operands, trace, diagonal, ellipsis) and transformers models with tiny configs (Funnel's
  relative attention, CvT, VitDet's relative positions, Wav2Vec2-BERT's relative keys,
  MGP-STR's ellipsis einsum, X-CLIP's logits), each exported by ``torch.onnx.export`` with
  ``dynamo=False`` at opset 12 and 14 (dynamic batch/sequence axes) and ``dynamo=True`` at 18.

Writes the layout of the other corpora (README.md): ``<name>.onnx``, ``<name>.npz`` (the sample
input), ``expected/<name>.npz`` (onnxruntime's outputs on it), ``manifest.json``.

Report (the project's python, with rewriter installed):

    python tools/corpus/make_einsum.py --report [--out /work/corpus/einsum]

converts every model with Einsum to opset 11 (``rewriter convert M -o converted/M --opset 11
--verify``, the sample fed with ``--input-value``) and runs the result in onnxruntime on the
sample: converted or not, max abs diff against the recorded outputs, node counts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
import warnings
import zipfile

import numpy as np

warnings.filterwarnings("ignore")
PIPER = "piper-tts==1.8.0"
ARABIC = "ذهب الولد إلى المدرسة صباحا وقرأ كتابا جميلا"


# ------------------------------------------------------------------ torch models


def _zoo_modules():
    import torch
    from torch import nn

    class Attention(nn.Module):
        """Multi-head attention written with einsum, rotary angles from an outer product."""

        def __init__(self, d=32, h=4):
            super().__init__()
            self.h, self.qkv, self.out = h, nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d // h, 2).float() / (d // h))))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).unbind(2)
            angles = torch.einsum("i,j->ij", torch.arange(t, dtype=torch.float32), self.inv_freq)
            cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
            q = q * cos[:, None] + q.flip(-1) * sin[:, None]
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d // self.h) ** 0.5
            ctx = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(b, t, d)
            return self.out(ctx)

    class Bilinear(nn.Module):
        """Three-operand and reducing equations: bilinear form, trace, diagonal, ellipsis."""

        def __init__(self, d=16):
            super().__init__()
            self.w = nn.Parameter(torch.randn(d, d) * 0.1)
            self.proj = nn.Parameter(torch.randn(4, d, 8) * 0.1)

        def forward(self, a, b):
            bil = torch.einsum("bi,ij,bj->b", a, self.w, b)
            outer = torch.einsum("bi,bj->bij", a, b)
            trace = torch.einsum("bii->b", outer)
            diag = torch.einsum("bii->bi", outer)
            heads = torch.einsum("...d,hde->...he", a, self.proj)
            return bil + trace, diag * a, heads

    class Relative(nn.Module):
        """Transformer-XL style relative attention scores."""

        def __init__(self, n=2, d=8, klen=6):
            super().__init__()
            self.r = nn.Parameter(torch.randn(klen, n, d))

        def forward(self, q, k):
            ac = torch.einsum("ibnd,jbnd->bnij", q, k)
            bd = torch.einsum("ibnd,jnd->bnij", q, self.r)
            return (ac + bd).softmax(-1)

    return {
        "zoo_attention": (Attention(), (torch.randn(2, 7, 32),), {"x": {0: "batch", 1: "seq"}}),
        "zoo_bilinear": (Bilinear(), (torch.randn(3, 16), torch.randn(3, 16)), {"a": {0: "batch"}, "b": {0: "batch"}}),
        "zoo_relative": (Relative(), (torch.randn(6, 2, 2, 8), torch.randn(6, 2, 2, 8)), {"q": {1: "batch"}, "k": {1: "batch"}}),
    }


def _transformers_modules():
    import torch
    import transformers as tr

    def tiny(cls, config, *inputs, names, axes):
        torch.manual_seed(0)
        model = cls(config).eval()

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *args):
                out = self.m(*args, return_dict=False)
                return tuple(o for o in out if isinstance(o, torch.Tensor))[:2]

        return Wrapped(), inputs, dict(zip(names, axes))

    ids = torch.randint(0, 90, (2, 12))
    return {
        "hf_funnel": lambda: tiny(tr.FunnelModel, tr.FunnelConfig(
            vocab_size=100, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64, num_decoder_layers=1),
            ids, names=["input_ids"], axes=[{0: "batch"}]),
        "hf_cvt": lambda: tiny(tr.CvtModel, tr.CvtConfig(
            embed_dim=[16, 16, 32], num_heads=[1, 1, 2], depth=[1, 1, 1]), torch.randn(1, 3, 64, 64),
            names=["pixel_values"], axes=[{0: "batch"}]),
        "hf_vitdet": lambda: tiny(tr.VitDetModel, tr.VitDetConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=64,
            pretrain_image_size=64, patch_size=16, use_relative_position_embeddings=True, window_size=2,
            window_block_indices=[0]), torch.randn(1, 3, 64, 64), names=["pixel_values"], axes=[{0: "batch"}]),
        "hf_wav2vec2_bert": lambda: tiny(tr.Wav2Vec2BertModel, tr.Wav2Vec2BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            feature_projection_input_dim=16, position_embeddings_type="relative_key", conv_depthwise_kernel_size=3,
            left_max_position_embeddings=8, right_max_position_embeddings=4, add_adapter=False),
            torch.randn(1, 10, 16), names=["input_features"], axes=[{0: "batch", 1: "frames"}]),
        "hf_mgp_str": lambda: tiny(tr.MgpstrForSceneTextRecognition, tr.MgpstrConfig(
            image_size=[32, 64], patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            mlp_ratio=2.0, max_token_length=8), torch.randn(1, 3, 32, 64), names=["pixel_values"], axes=[{0: "batch"}]),
    }


def _export(module, args, axes, path, opset, dynamo):
    import torch

    names = list(axes)
    if dynamo:
        torch.onnx.export(module, args, path, input_names=names, opset_version=opset, dynamo=True, optimize=True,
                          external_data=False)
    else:
        torch.onnx.export(module, args, path, input_names=names, opset_version=opset, dynamo=False,
                          dynamic_axes=axes)


def build(out: str) -> None:
    import onnx
    import onnxruntime as ort
    import torch

    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    manifest = {"versions": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__},
                "models": [], "failures": []}

    def record(name, path, feeds, source):
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        outs = sess.run(None, feeds)
        np.savez(os.path.join(out, f"{name}.npz"), **feeds)
        np.savez(os.path.join(out, "expected", f"{name}.npz"), **{o.name: v for o, v in zip(sess.get_outputs(), outs)})
        m = onnx.load(path)
        einsums = [onnx.helper.get_attribute_value(n.attribute[0]).decode() for n in m.graph.node if n.op_type == "Einsum"]
        manifest["models"].append({"name": name, "file": f"{name}.onnx", "sample": f"{name}.npz",
                                   "expected": f"expected/{name}.npz", "source": source,
                                   "default_opset": next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                                   "nodes": len(m.graph.node), "einsum": einsums})
        print(f"{name}: {len(m.graph.node)} nodes, Einsum {einsums}")

    wheels = os.path.join(out, "wheels")
    os.makedirs(wheels, exist_ok=True)
    if not any(f.startswith("piper_tts-1.8.0") for f in os.listdir(wheels)):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", PIPER, "-d", wheels], check=True)
    wheel = zipfile.ZipFile(os.path.join(wheels, next(f for f in os.listdir(wheels) if f.startswith("piper_tts-1.8.0"))))
    path = os.path.join(out, "piper_tashkeel.onnx")
    with open(path, "wb") as f:
        f.write(wheel.read("piper/tashkeel/model.onnx"))
    id_map = json.loads(wheel.read("piper/tashkeel/input_id_map.json"))
    hints = json.loads(wheel.read("piper/tashkeel/hint_id_map.json"))
    chars = [id_map[c] for c in ARABIC if c in id_map]
    feeds = {"char_inputs": np.array([chars], np.int64), "diac_inputs": np.full((1, len(chars)), hints[""], np.int64),
             "input_lengths": np.array([len(chars)], np.int64)}
    record("piper_tashkeel", path, feeds, f"{PIPER} wheel: piper/tashkeel/model.onnx")

    specs = dict(_zoo_modules())
    specs.update(_transformers_modules())
    for base, spec in specs.items():
        try:
            module, args, axes = spec() if callable(spec) else spec
            module.eval()
        except Exception as e:  # noqa: BLE001
            manifest["failures"].append({"name": base, "stage": "build", "error": str(e)[:300]})
            continue
        for tag, opset, dynamo in (("legacy_op12", 12, False), ("legacy_op14", 14, False), ("dynamo_op18", 18, True)):
            name = f"{base}_{tag}"
            path = os.path.join(out, f"{name}.onnx")
            try:
                torch.manual_seed(0)
                with torch.no_grad():
                    _export(module, args, axes, path, opset, dynamo)
                feeds = {k: a.numpy() for k, a in zip(axes, args)}
                record(name, path, feeds, f"torch.onnx.export {tag} of {base}")
            except Exception as e:  # noqa: BLE001
                manifest["failures"].append({"name": name, "stage": "export", "error": traceback.format_exc()[-400:]})
                print(f"{name}: FAILED {str(e)[:200]}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


# ------------------------------------------------------------------ report


def report(out: str) -> None:
    import onnx
    import onnxruntime as ort

    manifest = json.load(open(os.path.join(out, "manifest.json")))
    os.makedirs(os.path.join(out, "converted"), exist_ok=True)
    rows = []
    for e in manifest["models"]:
        if not e["einsum"]:
            continue
        src, dst = os.path.join(out, e["file"]), os.path.join(out, "converted", e["file"])
        feeds = dict(np.load(os.path.join(out, e["sample"])))
        if os.path.exists(dst):
            os.remove(dst)
        # --verify's random inputs give dynamic dims the size 2; the tashkeel's lengths must fit them
        values = [] if e["name"] != "piper_tashkeel" else [
            "--input-value=char_inputs:5,9,12,3", "--input-value=diac_inputs:1,1,1,1", "--input-value=input_lengths:2,2"]
        cli = subprocess.run([sys.executable, "-m", "rewriter", "convert", src, "-o", dst, "--opset", "11", "--verify",
                              "--json", *values], capture_output=True, text=True)
        row = {"name": e["name"], "source opset": e["default_opset"], "einsum": len(e["einsum"]),
               "nodes before": e["nodes"], "cli exit": cli.returncode}
        if os.path.exists(dst):
            m = onnx.load(dst)
            sess = ort.InferenceSession(dst, providers=["CPUExecutionProvider"])
            got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
            want = dict(np.load(os.path.join(out, e["expected"])))
            diff = max(float(np.max(np.abs(got[k].astype(np.float64) - v.astype(np.float64)), initial=0.0))
                       for k, v in want.items())
            row.update({"nodes after": len(m.graph.node), "opset after": next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                        "max abs diff (sample)": diff,
                        "einsum left": sum(n.op_type == "Einsum" for n in m.graph.node)})
        else:
            row["error"] = (cli.stderr.strip().splitlines() or [""])[-1][:300]
        try:
            numerics = (json.loads(cli.stdout).get("verification") or {}).get("numerics") or {}
            row["--verify"] = {"ok": numerics.get("ok"), "backend": numerics.get("backend_rewritten"),
                               "max abs diff": max((o["max_abs_diff"] for o in numerics.get("outputs", [])
                                                    if o.get("max_abs_diff") is not None), default=None)}
        except (json.JSONDecodeError, AttributeError):
            row["--verify"] = None
        rows.append(row)
        print(json.dumps(row))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(rows, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/einsum")
    ap.add_argument("--report", action="store_true", help="convert the corpus to opset 11 and compare (project python)")
    args = ap.parse_args(argv)
    report(args.out) if args.report else build(args.out)


if __name__ == "__main__":
    main()
