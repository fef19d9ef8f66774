"""com.microsoft QGemm and QLinearWhere lowered to standard ONNX: ONNX Runtime's integers (and QGemm's
float output) in ONNX Runtime and onnx.reference: per-tensor and per-column B scales and zero points,
transA/transB, alpha, the int32 bias, the float output; QLinearWhere's tables, copies and
broadcasting."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T

from tests.convert.support.contrib_oracle import NP, com_model, const, qparams, random_q
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _qgemm(rng, elem_a, elem_b, m, k, n, *, per_column, trans_a, trans_b, bias, quantized_out, alpha=1.0,
           y_scale_only=False):
    a_shape = [k, m] if trans_a else [m, k]
    b_shape = [n, k] if trans_b else [k, n]
    info_b = np.iinfo(NP[elem_b])
    size = n if per_column else 1
    sb = (rng.random(size) * 0.05 + 0.001).astype(np.float32)
    zb = rng.integers(info_b.min, info_b.max + 1, size=size).astype(NP[elem_b])
    zb = zb if elem_b == T.UINT8 else np.zeros_like(zb)  # onnxruntime: int8 B zero points must be 0
    inits = qparams("a", 0.02, 7 if elem_a == T.UINT8 else 0, elem_a)
    inits += [const("b_s", sb if per_column else sb[0], np.float32),
              const("b_z", zb if per_column else zb[0], NP[elem_b]),
              const("B", random_q(rng, elem_b, b_shape), NP[elem_b])]
    names = [("A", elem_a, a_shape), "a_s", "a_z", "B", "b_s", "b_z", "C" if bias else ""]
    if bias:
        inits.append(const("C", rng.integers(-2000, 2000, size=n), np.int32))
    out = (T.FLOAT, [m, n])
    if quantized_out or y_scale_only:
        names.append("y_s")
        inits.append(const("y_s", 0.05, np.float32))
    if quantized_out:
        names.append("y_z")
        inits.append(const("y_z", 100 if elem_a == T.UINT8 else 5, NP[elem_a]))
        out = (elem_a, [m, n])
    model = com_model("QGemm", names, [("Y", *out)], initializers=inits, alpha=alpha, transA=int(trans_a),
                      transB=int(trans_b))
    return model, {"A": random_q(rng, elem_a, a_shape)}


@pytest.mark.parametrize("elems", [(T.UINT8, T.UINT8), (T.UINT8, T.INT8), (T.INT8, T.INT8)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("trans", [(False, False), (True, True), (False, True)])
@pytest.mark.parametrize("out", ["quantized", "float", "float_scaled"])
def test_qgemm(elems, per_column, trans, out):
    rng = np.random.default_rng(zlib.crc32(repr((elems, per_column, trans, out)).encode()))
    model, feeds = _qgemm(rng, *elems, 5, 9, 7, per_column=per_column, trans_a=trans[0], trans_b=trans[1],
                          bias=per_column, quantized_out=out == "quantized", alpha=0.5 if trans[0] else 1.0,
                          y_scale_only=out == "float_scaled")
    check_lowering(model, feeds)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.integers(1, 40), st.integers(1, 6), st.integers(0, 2 ** 32 - 1))
def test_qgemm_any_shape(m, k, n, seed):
    rng = np.random.default_rng(seed)
    model, feeds = _qgemm(rng, T.UINT8, T.INT8, m, k, n, per_column=bool(seed % 2), trans_a=False,
                          trans_b=bool(seed % 3), bias=True, quantized_out=True)
    check_lowering(model, feeds)


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
@pytest.mark.parametrize("shapes", [([4, 8], [4, 8], [4, 8]), ([4, 1], [1, 8], [4, 8]), ([1], [8], [3, 8])])
def test_qlinear_where(elem, shapes):
    rng = np.random.default_rng(len(str(shapes)) + elem)
    info = np.iinfo(NP[elem])
    for same in (False, True):
        sz, zz = np.float32(0.04), int(rng.integers(info.min, info.max + 1))
        sx, zx = (sz, zz) if same else (sz, zz // 2 + 1)  # Z's scale with another zero point: requantized
        inits = qparams("x", sx, zx, elem) + qparams("y", 0.011, int(rng.integers(info.min, info.max + 1)), elem)
        inits += qparams("z", sz, zz, elem)
        out = list(np.broadcast_shapes(*map(tuple, shapes)))
        model = com_model("QLinearWhere", [("C", T.BOOL, shapes[0]), ("X", elem, shapes[1]), "x_s", "x_z",
                                           ("Y", elem, shapes[2]), "y_s", "y_z", "z_s", "z_z"], [("Z", elem, out)],
                          initializers=inits)
        feeds = {"C": rng.random(shapes[0]) > 0.5, "X": random_q(rng, elem, shapes[1]),
                 "Y": random_q(rng, elem, shapes[2])}
        check_lowering(model, feeds)
