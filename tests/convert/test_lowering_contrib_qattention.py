"""com.microsoft QAttention lowered to MatMulInteger, its scale and bias, and Attention's standard form,
against ONNX Runtime's CPU kernel (the oracle) in ONNX Runtime and onnx.reference, within float32
rounding: uint8/int8 weights, scalar and per-column scales and zero points, masks, unidirectional,
past/present, scale and mask_filter_value; the named blockers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import com_model, const
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOL = {"exact_ort": False, "exact_ref": False, "rtol": 1e-5, "atol": 1e-5}
B, S, D, N = 2, 5, 16, 2


def _qattention(rng, *, signed=False, per_column=False, zero_points=True, mask=None, past=0, present=False,
                **attrs):
    wdt = np.int8 if signed else np.uint8
    low, high = (-40, 40) if signed else (90, 170)
    columns = 3 * D if per_column else ()
    inits = [const("W", rng.integers(low, high, size=(D, 3 * D)), wdt),
             const("bias", rng.normal(size=3 * D), np.float32),
             const("xs", 0.02, np.float32), const("ws", rng.uniform(0.005, 0.02, size=columns), np.float32),
             const("xz", 128, np.uint8), const("wz", rng.integers(-3, 3, size=columns) + (0 if signed else 128), wdt)]
    names = [("X", T.UINT8, ["b", "s", D]), "W", "bias", "xs", "ws", ("M", T.INT32, mask[1]) if mask else "",
             "xz" if zero_points else "", "wz" if zero_points else "",
             ("P", T.FLOAT, [2, "b", N, "p", D // N]) if past else ""]
    while not names[-1]:
        names.pop()
    outs = [("Y", T.FLOAT, ["b", "s", D])] + ([("Present", T.FLOAT, [2, "b", N, "t", D // N])] if present else [])
    feeds = {"X": rng.integers(0, 256, size=(B, S, D)).astype(np.uint8)}
    if mask:
        feeds["M"] = mask[0]
    if past:
        feeds["P"] = rng.normal(size=(2, B, N, past, D // N)).astype(np.float32)
    model = com_model("QAttention", names, outs, initializers=[i for i in inits if i.name in names], num_heads=N,
                      **attrs)
    return model, feeds


@pytest.mark.parametrize("signed", [False, True], ids=["u8u8", "u8s8"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per_tensor", "per_column"])
@pytest.mark.parametrize("zero_points", [True, False])
def test_qattention_projection(signed, per_column, zero_points):
    rng = np.random.default_rng(int(signed) * 4 + int(per_column) * 2 + int(zero_points))
    model, feeds = _qattention(rng, signed=signed, per_column=per_column, zero_points=zero_points)
    check_lowering(model, feeds, **TOL)


@pytest.mark.parametrize("mask", ["end", "raw2d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_qattention_masks_past_and_attributes(mask, unidirectional):
    rng = np.random.default_rng(7)
    total = 3 + S
    masks = {"end": (np.array([total, 4], np.int32), ["b"]),
             "raw2d": ((rng.random((B, total)) > 0.3).astype(np.int32), ["b", "t"])}
    model, feeds = _qattention(rng, mask=masks[mask], past=3, present=True, unidirectional=unidirectional,
                               scale=0.3, mask_filter_value=-500.0)
    check_lowering(model, feeds, **TOL)


def test_qattention_refusals():
    rng = np.random.default_rng(9)
    model, _ = _qattention(rng, do_rotary=1)
    with pytest.raises(RewriterError, match="do_rotary"):
        lower_ops(model)
