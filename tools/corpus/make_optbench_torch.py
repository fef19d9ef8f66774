#!/usr/bin/env python
"""Torch legacy (TorchScript) exports of small transformers models, for the optimizer
bench (issue 19): BERT-tiny (google/bert_uncased_L-2_H-128_A-2's config) at opset 13 and a
GPT-2-tiny (2 layers, 64 wide) at opset 11, both with dynamic batch and sequence axes and
random weights from the config (torch.manual_seed(0); nothing downloaded). ShuffleNetV2 0.5
legacy opset 13 with a dynamic batch is already in /work/corpus/torch (make_torch.py).

Run with the torch venv (NOT the project's python):

    /work/venvs/torch/bin/pip install transformers
    /work/venvs/torch/bin/python tools/corpus/make_optbench_torch.py [--out /work/corpus/optbench]

Writes <name>.onnx, <name>.npz (sample input, batch 2, sequence 12) and merges entries into
<out>/manifest.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402


class Wrap(torch.nn.Module):
    """The model's first output only (logits / last hidden state), plain tensors in."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), return_dict=False)[0]


def bert_tiny():
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=512, attn_implementation="eager")
    return transformers.BertModel(cfg), ["input_ids", "attention_mask", "token_type_ids"], 30522


def gpt2_tiny():
    cfg = transformers.GPT2Config(vocab_size=50257, n_positions=128, n_embd=64, n_layer=2, n_head=2, use_cache=False,
                                  attn_implementation="eager")
    return transformers.GPT2LMHeadModel(cfg), ["input_ids", "attention_mask"], 50257


MODELS = [("bert_tiny_legacy_op13", bert_tiny, 13), ("gpt2_tiny_legacy_op11", gpt2_tiny, 11)]


def _inputs(names, vocab, batch, seq):
    g = torch.Generator().manual_seed(1)
    out = []
    for n in names:
        if n == "input_ids":
            out.append(torch.randint(0, vocab, (batch, seq), generator=g))
        elif n == "attention_mask":
            out.append(torch.ones(batch, seq, dtype=torch.int64))
        else:
            out.append(torch.zeros(batch, seq, dtype=torch.int64))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/optbench")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    manifest = os.path.join(args.out, "manifest.json")
    old = json.load(open(manifest)) if os.path.exists(manifest) else {}
    entries = {e["name"]: e for e in old.get("models", []) if e.get("generator") != "make_optbench_torch.py"}
    failures = [f for f in old.get("failures", []) if f.get("generator") != "make_optbench_torch.py"]
    for name, build, opset in MODELS:
        torch.manual_seed(0)
        model, names, vocab = build()
        model.eval()
        wrapped = Wrap(model, names).eval()
        path = os.path.join(args.out, name + ".onnx")
        axes = {n: {0: "batch", 1: "seq"} for n in names}
        try:
            torch.onnx.export(wrapped, tuple(_inputs(names, vocab, 2, 8)), path, dynamo=False, opset_version=opset,
                              input_names=names, output_names=["output"], dynamic_axes={**axes, "output": {0: "batch", 1: "seq"}})
            m = onnx.load(path)
            onnx.checker.check_model(m, full_check=True)
            xs = _inputs(names, vocab, 2, 12)
            feeds = {n: x.numpy() for n, x in zip(names, xs)}
            got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            with torch.no_grad():
                want = wrapped(*xs).numpy()
            diff = float(np.max(np.abs(got - want)))
        except Exception as e:  # noqa: BLE001
            failures.append({"name": name, "generator": "make_optbench_torch.py", "error": repr(e)[:500]})
            print(f"FAIL {name}: {e!r:.300}")
            continue
        np.savez(os.path.join(args.out, name + ".npz"), **feeds)
        data = open(path, "rb").read()
        entries[name] = {"name": name, "file": name + ".onnx", "sample": name + ".npz",
                         "generator": "make_optbench_torch.py",
                         "exporter": f"torch.onnx.export(dynamo=False) torch {torch.__version__}, "
                                     f"transformers {transformers.__version__}",
                         "opset": opset, "nodes": len(m.graph.node), "max_abs_diff_vs_torch": diff,
                         "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        print(f"ok {name:28s} nodes={len(m.graph.node)} diff={diff:.2e} {len(data) / 1e6:.1f} MB", flush=True)
    json.dump({"generators": ["tools/corpus/make_optbench_pypi.py", "tools/corpus/make_optbench_torch.py"],
               "models": sorted(entries.values(), key=lambda e: e["name"]), "failures": failures},
              open(manifest, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
