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

With ``--genai-venv`` (torch, transformers and onnxruntime-genai 0.18 there) also a random tiny Llama
(hidden 64, 2 layers, 4 query and 2 KV heads, vocabulary 256, a word-level tokenizer) saved by
transformers and built by onnxruntime-genai's model builder for CPU as fp32 (GroupQueryAttention
with rotary, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization in domain ""), int4
(MatMulNBits too) and fp16 (RotaryEmbedding and MultiHeadAttention instead), stored with inline
weights; samples: one generation step after 4 past tokens (fp32, int4), a 5-token prompt (fp16).

With ``--quant`` also resnet18 and mobilenet_v3_small (the torch corpus' opset-17 exports) through
tools/corpus/make_quant.py in ``--venv``; their QOperator forms (per tensor, per channel: QGemm,
QLinearGlobalAveragePool, QLinearAdd, QLinearMul) are kept here; and the fused BERT-tiny models
through onnxruntime.quantization.quantize_dynamic in ``--venv`` (its IntegerOps registry quantizes
Attention into QAttention and EmbedLayerNormalization into QEmbedLayerNormalization, the other
MatMuls into DynamicQuantizeLinear + MatMulInteger; ``DefaultTensorType`` float, since ONNX's
inference types nothing after a contrib node): bert_tiny_opt_qdyn (int8 weights per tensor),
bert_tiny_opt_qdyn_u8pc (uint8 weights, per-column scales and zero points),
bert_tiny_opt_noembed_qdyn (QAttention reading a ReduceSum mask index, no QEmbedLayerNormalization);
samples as their float models'.

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


TINY_LLAMA = """
import json, sys, torch, transformers
from tokenizers import Tokenizer, models, pre_tokenizers
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                               rms_norm_eps=1e-5, tie_word_embeddings=False)
transformers.LlamaForCausalLM(cfg).save_pretrained(sys.argv[1], safe_serialization=True)
tok = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(256)}, unk_token="t0"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1", eos_token="t2",
                                     model_max_length=128).save_pretrained(sys.argv[1])
"""


def _genai_sample(model: onnx.ModelProto, prompt: bool) -> dict:
    rng = np.random.default_rng(1)
    past, new = (0, 5) if prompt else (4, 1)
    feeds = {"input_ids": rng.integers(0, 256, size=(1, new)).astype(np.int64),
             "attention_mask": np.ones((1, past + new), np.int64)}
    for value in model.graph.input:
        if value.name == "position_ids":
            feeds[value.name] = np.arange(past, past + new, dtype=np.int64)[None]
        elif value.name.startswith("past_key_values"):
            dtype = np.float16 if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16 else np.float32
            feeds[value.name] = rng.normal(size=(1, 2, past, 16)).astype(dtype)
    return feeds


QUANT_SOURCES = ["/work/corpus/torch/resnet18_legacy_op17.onnx",
                 "/work/corpus/torch/mobilenet_v3_small_legacy_op17.onnx"]


def make_quant(out: str, python: str) -> None:
    import glob
    import shutil
    import tempfile

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_quant.py")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([python, script, "--out", tmp, *QUANT_SOURCES], check=True, capture_output=True)
        for path in sorted(glob.glob(os.path.join(tmp, "*_qop*.onnx"))):
            for kept in (path, path[:-5] + ".npz"):
                shutil.copy(kept, out)
            print(f"{os.path.basename(path)[:-5]}: tools/corpus/make_quant.py (QOperator)")


QDYN = {"bert_tiny_opt_qdyn": ("bert_tiny_opt", "QInt8", False),
        "bert_tiny_opt_qdyn_u8pc": ("bert_tiny_opt", "QUInt8", True),
        "bert_tiny_opt_noembed_qdyn": ("bert_tiny_opt_noembed", "QInt8", True)}
QUANTIZE_DYNAMIC = """
import sys, onnx
from onnxruntime.quantization import QuantType, quantize_dynamic
quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=getattr(QuantType, sys.argv[3]), per_channel=sys.argv[4] == "1",
                 extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
"""


def make_qdyn(out: str, python: str) -> None:
    """The fused BERT-tiny models (made above, in ``out``) through quantize_dynamic."""
    for name, (source, weights, per_channel) in QDYN.items():
        path = os.path.join(out, f"{name}.onnx")
        done = subprocess.run([python, "-c", QUANTIZE_DYNAMIC, os.path.join(out, f"{source}.onnx"), path, weights,
                               "1" if per_channel else "0"], capture_output=True, text=True)
        if done.returncode:
            print(f"{name}: quantize_dynamic failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        np.savez(os.path.join(out, f"{name}.npz"), **sample(onnx.load(path, load_external_data=False)))
        print(f"{name}: quantize_dynamic({source}, weight_type={weights}, per_channel={per_channel})")


def make_genai(out: str, python: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "tiny_llama")
        subprocess.run([python, "-c", TINY_LLAMA, hf], check=True, capture_output=True)
        for precision in ("fp32", "int4", "fp16"):
            built = os.path.join(tmp, precision)
            cmd = [python, "-m", "onnxruntime_genai.models.builder", "-m", "tiny", "-i", hf, "-o", built,
                   "-p", precision, "-e", "cpu", "-c", os.path.join(tmp, "cache")]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                print(f"llama_tiny_{precision}: the builder failed: {done.stderr.strip().splitlines()[-1:]}",
                      file=sys.stderr)
                continue
            model = onnx.load(os.path.join(built, "model.onnx"))
            onnx.save(model, os.path.join(out, f"llama_tiny_{precision}.onnx"))
            np.savez(os.path.join(out, f"llama_tiny_{precision}.npz"), **_genai_sample(model, precision == "fp16"))
            print(f"llama_tiny_{precision}: onnxruntime-genai builder -p {precision} -e cpu")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/work/corpus/contrib")
    ap.add_argument("--venv", default="/work/venvs/quant")
    ap.add_argument("--quant", action="store_true", help="also the QOperator resnet18 and mobilenet_v3_small, "
                    "and the dynamically quantized BERT-tiny models")
    ap.add_argument("--genai-venv", help="a venv with torch, transformers, onnxruntime-genai (/work/venvs/genai)")
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
    if args.quant:
        make_quant(args.out, python)
        make_qdyn(args.out, python)
    if args.genai_venv:
        make_genai(args.out, os.path.join(args.genai_venv, "bin", "python"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
