#!/usr/bin/env python
"""Transformer models fused by onnxruntime.transformers.optimizer (issue 42's com.microsoft ops), with
a sample input each, from the optbench exports nobody here wrote:

    python tools/corpus/make_contrib.py [--out /work/corpus/contrib] [--venv /work/venvs/quant]

bert_tiny_legacy_op13 (hidden 128, 2 heads) as the optimizer writes it by default
(EmbedLayerNormalization, Attention with a 1D mask index, SkipLayerNormalization, BiasGelu), with
--use_mask_index, --use_multi_head_attention, --enable_gelu_approximation (FastGelu) and
--disable_embed_layer_norm --disable_bias_gelu (LayerNormalization-1 in domain "" at opset 13, Gelu);
gpt2_tiny_legacy_op11 (hidden 64, 2 heads: head size 32 read from its Reshape constants) as the gpt2
model type writes it (SkipLayerNormalization, FastGelu, LayerNormalization-1 at opset 11), also with
--use_multi_head_attention and --disable_bias_gelu. The optimizer runs in ``--venv`` (onnxruntime
there), never in the project's python. Samples: batch 2, 7 tokens, the second row padded by 2.

Then: ``python tools/corpus/contrib_report.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx

OPTBENCH = "/work/corpus/optbench"
BERT = ["--model_type", "bert", "--num_heads", "2", "--hidden_size", "128"]
GPT2 = ["--model_type", "gpt2", "--num_heads", "2", "--hidden_size", "64"]
MODELS = {
    "bert_tiny_opt": ("bert_tiny_legacy_op13", BERT),
    "bert_tiny_opt_maskindex": ("bert_tiny_legacy_op13", BERT + ["--use_mask_index"]),
    "bert_tiny_opt_mha": ("bert_tiny_legacy_op13", BERT + ["--use_multi_head_attention"]),
    "bert_tiny_opt_gelu_approx": ("bert_tiny_legacy_op13", BERT + ["--enable_gelu_approximation"]),
    "bert_tiny_opt_noembed": ("bert_tiny_legacy_op13", BERT + ["--disable_embed_layer_norm", "--disable_bias_gelu"]),
    "gpt2_tiny_opt": ("gpt2_tiny_legacy_op11", GPT2),
    "gpt2_tiny_opt_mha": ("gpt2_tiny_legacy_op11", GPT2 + ["--use_multi_head_attention"]),
    "gpt2_tiny_opt_fastgelu": ("gpt2_tiny_legacy_op11", GPT2 + ["--disable_bias_gelu"]),
}


def sample(model: onnx.ModelProto, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        if value.name == "input_ids":
            feeds[value.name] = rng.integers(0, 1000, size=(2, 7)).astype(np.int64)
        elif value.name == "attention_mask":
            feeds[value.name] = np.array([[1] * 7, [1] * 5 + [0] * 2], np.int64)
        elif value.name == "token_type_ids":
            feeds[value.name] = np.array([[0] * 4 + [1] * 3, [0] * 7], np.int64)
        else:
            raise SystemExit(f"no sample rule for input {value.name!r}")
    return feeds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/work/corpus/contrib")
    ap.add_argument("--venv", default="/work/venvs/quant")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    python = os.path.join(args.venv, "bin", "python")
    for name, (source, options) in MODELS.items():
        out = os.path.join(args.out, f"{name}.onnx")
        cmd = [python, "-m", "onnxruntime.transformers.optimizer", "--input", os.path.join(OPTBENCH, f"{source}.onnx"),
               "--output", out, "--opt_level", "0", *options]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(f"{name}: the optimizer failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        np.savez(os.path.join(args.out, f"{name}.npz"), **sample(onnx.load(out, load_external_data=False)))
        print(f"{name}: {' '.join(options)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
