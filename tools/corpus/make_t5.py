#!/usr/bin/env python
"""T5 exports for the optimizer (issue 27: `rewriter optimize` failed on every one of them).

transformers' T5ForConditionalGeneration with a tiny random config (vocab 100, d_model 32, d_kv 8,
d_ff 64, 2 layers, 4 heads; torch.manual_seed(0), nothing downloaded), inputs input_ids,
attention_mask, decoder_input_ids, outputs the logits and the encoder's last hidden state (the
value made by the encoder's final_layer_norm/Mul_1, which the decoder's cross-attention reads
too), with the legacy exporter (dynamo=False) at opsets 11, 13, 17 and the dynamo exporter at
18, 20, 21; and T5EncoderModel (last hidden state only) legacy at 13 and dynamo at 18.

Run with the torch venv (NOT the project's python):

    /work/venvs/torch/bin/python tools/corpus/make_t5.py [--out /work/corpus/t5]

torch 2.14's legacy exporter writes T5's relative-position bucketing as a Min on int64 at opset
11 (ONNX allows int64 from 12): the checker and ONNX Runtime refuse that model, and it is listed
under the manifest's failures.

Writes <name>.onnx, <name>.npz (sample input: batch 2, sequence 7, decoder sequence 5) and
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

CONFIG = dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, use_cache=False,
              attn_implementation="eager")


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = transformers.T5ForConditionalGeneration(transformers.T5Config(**CONFIG))

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                         return_dict=True)
        return out.logits, out.encoder_last_hidden_state


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = transformers.T5EncoderModel(transformers.T5Config(**CONFIG))

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state


SEQ2SEQ = (Seq2Seq, ["input_ids", "attention_mask", "decoder_input_ids"], ["logits", "encoder_last_hidden_state"])
ENCODER = (Encoder, ["input_ids", "attention_mask"], ["last_hidden_state"])
MODELS = [(f"t5_tiny_legacy_op{o}", SEQ2SEQ, False, o) for o in (11, 13, 17)] + \
         [(f"t5_tiny_dynamo_op{o}", SEQ2SEQ, True, o) for o in (18, 20, 21)] + \
         [("t5_encoder_tiny_legacy_op13", ENCODER, False, 13), ("t5_encoder_tiny_dynamo_op18", ENCODER, True, 18)]


def _inputs(names, batch, seq, dec):
    g = torch.Generator().manual_seed(1)
    out = []
    for n in names:
        if n == "attention_mask":
            mask = torch.ones(batch, seq, dtype=torch.int64)
            mask[0, -2:] = 0  # padding on the first row: the mask is read
            out.append(mask)
        else:
            out.append(torch.randint(0, CONFIG["vocab_size"], (batch, dec if n.startswith("decoder") else seq),
                                     generator=g))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/corpus/t5")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    entries, failures = [], []
    for name, (cls, names, outputs), dynamo, opset in MODELS:
        torch.manual_seed(0)
        module = cls().eval()
        path = os.path.join(args.out, name + ".onnx")
        example = tuple(_inputs(names, 2, 6, 4))
        try:
            if dynamo:
                batch, seq, dec = torch.export.Dim("batch"), torch.export.Dim("seq"), torch.export.Dim("dec")
                shapes = {n: {0: batch, 1: dec if n.startswith("decoder") else seq} for n in names}
                program = torch.onnx.export(module, example, dynamo=True, opset_version=opset, input_names=names,
                                            output_names=outputs, dynamic_shapes=shapes)
                program.save(path)
            else:
                axes = {n: {0: "batch", 1: "dec" if n.startswith("decoder") else "seq"} for n in names}
                axes.update({o: {0: "batch", 1: "dec" if o == "logits" else "seq"} for o in outputs})
                torch.onnx.export(module, example, path, dynamo=False, opset_version=opset, input_names=names,
                                  output_names=outputs, dynamic_axes=axes)
            m = onnx.load(path)
            onnx.checker.check_model(m, full_check=True)
            xs = _inputs(names, 2, 7, 5)
            feeds = {n: x.numpy() for n, x in zip(names, xs)}
            got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
            with torch.no_grad():
                want = module(*xs)
            want = [want] if isinstance(want, torch.Tensor) else list(want)
            diff = max(float(np.max(np.abs(g - w.numpy()))) for g, w in zip(got, want))
        except Exception as e:  # noqa: BLE001
            failures.append({"name": name, "error": repr(e)[:500]})
            print(f"FAIL {name}: {e!r:.300}")
            continue
        np.savez(os.path.join(args.out, name + ".npz"), **feeds)
        data = open(path, "rb").read()
        entries.append({"name": name, "file": name + ".onnx", "sample": name + ".npz", "generator": "make_t5.py",
                        "exporter": f"torch.onnx.export(dynamo={dynamo}) torch {torch.__version__}, "
                                    f"transformers {transformers.__version__}",
                        "opset": opset, "nodes": len(m.graph.node), "max_abs_diff_vs_torch": diff,
                        "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        print(f"ok {name:30s} nodes={len(m.graph.node)} diff={diff:.2e} {len(data) / 1e3:.0f} kB", flush=True)
    json.dump({"generators": ["tools/corpus/make_t5.py"], "models": entries, "failures": failures},
              open(os.path.join(args.out, "manifest.json"), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
