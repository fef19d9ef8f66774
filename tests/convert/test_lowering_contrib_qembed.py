"""com.microsoft QEmbedLayerNormalization lowered (the quantized tables dequantized as the kernel does,
then EmbedLayerNormalization's standard form), against ONNX Runtime's CPU kernel in ONNX Runtime and
onnx.reference, within float32 rounding: uint8 and int8 tensors, with and without segments and mask."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

from tests.convert.support.contrib_oracle import com_model, const
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOL = {"exact_ort": False, "exact_ref": False, "rtol": 1e-5, "atol": 1e-5}
B, S, H, VOCAB = 2, 6, 8, 20


def _qembed(rng, *, signed, segments, mask):
    dt = np.int8 if signed else np.uint8
    low, high = (-100, 100) if signed else (0, 255)
    tables = {"w": (VOCAB, H), "p": (S + 2, H), "s": (2, H), "g": (H,), "b": (H,)}
    inits = []
    for k, shape in tables.items():
        inits += [const(f"{k}q", rng.integers(low, high, size=shape), dt),
                  const(f"{k}s", rng.uniform(0.01, 0.05), np.float32),
                  const(f"{k}z", rng.integers(-5, 5) + (0 if signed else 128), dt)]
    names = [("ids", T.INT32, ["b", "s"]), ("seg", T.INT32, ["b", "s"]) if segments else "", "wq", "pq",
             "sq" if segments else "", "gq", "bq", ("m", T.INT32, ["b", "s"]) if mask else "",
             "ws", "ps", "ss" if segments else "", "gs", "bs", "wz", "pz", "sz" if segments else "", "gz", "bz"]
    used = {n for n in names if isinstance(n, str)}
    model = com_model("QEmbedLayerNormalization", names, [("Y", T.FLOAT, ["b", "s", H]), ("MI", T.INT32, ["b"])],
                      initializers=[i for i in inits if i.name in used], epsilon=1e-5)
    feeds = {"ids": rng.integers(0, VOCAB, size=(B, S)).astype(np.int32)}
    if segments:
        feeds["seg"] = rng.integers(0, 2, size=(B, S)).astype(np.int32)
    if mask:
        feeds["m"] = (rng.random((B, S)) > 0.3).astype(np.int32)
    return model, feeds


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
@pytest.mark.parametrize("segments", [True, False], ids=["segments", "no_segments"])
@pytest.mark.parametrize("mask", [True, False], ids=["mask", "no_mask"])
def test_qembed_layer_norm(signed, segments, mask):
    rng = np.random.default_rng(int(signed) * 4 + int(segments) * 2 + int(mask))
    model, feeds = _qembed(rng, signed=signed, segments=segments, mask=mask)
    check_lowering(model, feeds, **TOL)
