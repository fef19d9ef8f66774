"""Pow with base and exponent of different types (or an integer base) below opset 12, where
Pow-7 takes one float type for both. Oracles: numpy (what the ONNX reference computes), ONNX
Runtime on the original (opset 15) and on the result, onnx.reference on the result."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from tests.convert.support.expressible import why_inexpressible
from tests.convert.support.feature_util import model, reference, refused
from tests.oracle import assert_valid, run

F16, F32, F64 = TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE
I8, I16, I32, I64, U32, U64 = (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
                               TensorProto.UINT32, TensorProto.UINT64)


def _pow_model(base, exponent, shape=(4,), constant=None):
    node = helper.make_node("Pow", ["x", "e"], ["y"], name="pow")
    inputs = [("x", base, list(shape))]
    inits = []
    if constant is None:
        inputs.append(("e", exponent, list(shape)))
    else:
        inits.append(numpy_helper.from_array(np.asarray(constant, helper.tensor_dtype_to_np_dtype(exponent)), "e"))
    return model([node], 15, inputs, [("y", base, None)], initializers=inits)


def _original(m, feeds):
    """The original on ONNX Runtime, or onnx.reference where ONNX Runtime has no kernel for the pairing."""
    try:
        return run(m, feeds)
    except Exception:  # noqa: BLE001  (NOT_IMPLEMENTED: Pow(float, int16) and the like)
        return reference(m, feeds)


def _ops(m):
    return [n.op_type for n in m.graph.node]


def _same(m, result, feeds, exact=True):
    want = _original(m, feeds)[0]
    for got in (run(result, feeds)[0], reference(result, feeds)[0]):
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=2e-7)


@pytest.mark.parametrize("target", [7, 9, 11])
def test_constant_exponent_exact_in_the_base_type_becomes_a_constant(target):
    m = _pow_model(F32, I64, constant=[2, 3, -1, 2 ** 40])
    result, report = convert_model(m, target)
    assert_valid(result)
    assert _ops(result) == ["Pow"]
    e = numpy_helper.to_array(next(t for t in result.graph.initializer if t.name == result.graph.node[0].input[1]))
    assert e.dtype == np.float32 and e.tolist() == [2, 3, -1, 2 ** 40]
    x = np.array([1.5, -2, 0.5, 1], np.float32)
    _same(m, result, {"x": x}, exact=False)


def test_constant_exponent_exact_only_in_double_goes_through_double():
    m = _pow_model(F32, I64, constant=[2 ** 24 + 1, 3, 2, 0])
    result, _ = convert_model(m, 11)
    assert_valid(result)
    assert _ops(result) == ["Cast", "Pow", "Cast"]
    x = np.array([-1, 1.0000001, 2, 3], np.float32)  # (-1) ** odd: the parity survives
    got = reference(result, {"x": x})[0]
    np.testing.assert_array_equal(got, (x.astype(np.float64) ** np.array([2 ** 24 + 1, 3, 2, 0])).astype(np.float32))
    assert got[0] == -1


def test_constant_exponent_exact_in_no_float_is_refused():
    m = _pow_model(F32, I64, constant=[2 ** 53 + 1, 2, 2, 2])
    refused(m, 11, "'pow'", "Pow 12 -> 7", "int64", "exactly", "element by element")


@pytest.mark.parametrize("base, exponent, ops", [
    (F32, I16, ["Cast", "Pow"]), (F32, I8, ["Cast", "Pow"]), (F16, I8, ["Cast", "Pow"]),
    (F64, I32, ["Cast", "Pow"]), (F64, F32, ["Cast", "Pow"]), (F32, F16, ["Cast", "Pow"]),
    (F32, I32, ["Cast", "Cast", "Pow", "Cast"]), (F32, U32, ["Cast", "Cast", "Pow", "Cast"]),
    (F32, F64, ["Cast", "Cast", "Pow", "Cast"]), (F16, I16, ["Cast", "Cast", "Pow", "Cast"])])
@pytest.mark.parametrize("target", [7, 11])
def test_computed_exponents_by_type(base, exponent, ops, target):
    m = _pow_model(base, exponent)
    result, _ = convert_model(m, target)
    assert_valid(result)
    assert sorted(_ops(result)) == sorted(ops)
    assert [n.name for n in result.graph.node if "y" in n.output] == ["pow"]
    xd, ed = (helper.tensor_dtype_to_np_dtype(t) for t in (base, exponent))
    x = np.array([-1, 2, 0.5, 3], xd)
    e = np.array([7, 3, -2, 2], ed) if exponent not in (U32,) else np.array([7, 3, 2, 2], ed)
    if exponent in (I32, U32):
        e[0] = 2 ** 30 + 1  # (-1) ** odd beyond float32's integers
    if exponent in (F32, F64, F16):
        e = np.array([3, 0.5, -1.5, 2], ed)
        x = np.abs(x)
    feeds = {"x": x, "e": e}
    want = np.power(x, e)  # numpy's own promotion: what the ONNX reference computes
    got = reference(result, feeds)[0]
    assert got.dtype == xd
    np.testing.assert_allclose(got.astype(np.float64), want.astype(xd).astype(np.float64), rtol=1e-6)
    if base != F16:  # ONNX Runtime's Pow has no float16 kernel
        np.testing.assert_allclose(run(result, feeds)[0], _original(m, feeds)[0], rtol=1e-6)
    if exponent in (I32, U32):
        assert got[0] == -1


@pytest.mark.parametrize("exponent", [I32, F32, I16])
@pytest.mark.parametrize("target", [7, 11])
def test_int32_base_through_double(exponent, target):
    m = _pow_model(I32, exponent, shape=(6,))
    result, _ = convert_model(m, target)
    assert_valid(result)
    assert _ops(result)[-2:] == ["Pow", "Cast"]
    x = np.array([2, -3, 46340, 7, -2, 10], np.int32)
    if exponent == F32:
        e = np.array([0.5, 3, 2, 1.5, 3, 9], np.float32)  # fractional results truncate toward zero
    else:
        e = np.array([30, 3, 2, 0, 31 if exponent == I32 else 5, 9], helper.tensor_dtype_to_np_dtype(exponent))
    feeds = {"x": x, "e": e}
    want = _original(m, feeds)[0]
    np.testing.assert_array_equal(run(result, feeds)[0], want)
    np.testing.assert_array_equal(reference(result, feeds)[0], want)
    if exponent != F32:
        np.testing.assert_array_equal(want, np.power(x.astype(np.int64), e.astype(np.int64)).astype(np.int32))


@pytest.mark.parametrize("base, exponent, why", [
    (F32, I64, "int64 exponent 'e'"), (F32, U64, "uint64 exponent 'e'"), (I64, I64, "int64 base"),
    (I64, F32, "int64 base")])
def test_refusals_name_the_reason(base, exponent, why):
    refused(_pow_model(base, exponent), 11, "'pow'", "Pow 12 -> 7", "one type" if "exponent" in why else "floats",
            why)


@pytest.mark.parametrize("target", [7, 9, 11])
@pytest.mark.parametrize("m", [
    _pow_model(F32, I64), _pow_model(F32, I32), _pow_model(F32, I16), _pow_model(F16, I16), _pow_model(I32, F32),
    _pow_model(I64, I32), _pow_model(F32, I64, constant=[2, 3, 1, 1]), _pow_model(F32, I64, constant=[2 ** 53 + 1] * 4),
    _pow_model(F32, I64, constant=[2 ** 25 + 1] * 4), _pow_model(F32, F64), _pow_model(F32, F32)],
    ids=lambda m: "-".join(str(i.type.tensor_type.elem_type) for i in m.graph.input) + f"-{len(m.graph.initializer)}")
def test_oracle_routes_match_the_converter(m, target):
    g = onnx.shape_inference.infer_shapes(m).graph
    types = {vi.name: vi.type for vi in [*g.input, *g.output, *g.value_info]}
    types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    why = why_inexpressible(g.node[0], 15, target, types.get, consts.get)
    try:
        convert_model(m, target)
        converted = True
    except Exception:  # noqa: BLE001
        converted = False
    assert converted == (why is None), why
