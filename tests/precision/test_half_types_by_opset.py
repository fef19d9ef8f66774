"""convert --dtype where the model's opset decides whether an op takes the half type: ops whose
output type an attribute sets (ConstantOfShape-9 and Cast-9 make no bfloat16; ConstantOfShape-20
and Cast-13 do), Loop states (Loop-13 takes no bfloat16, Loop-16 does), and a bfloat16 result
ONNX Runtime's CPU provider refuses for want of a kernel (written with a warning). Found on real
models: every bfloat16 conversion of a model with such a ConstantOfShape below opset 20, or a
tf2onnx LSTM loop below opset 16, was refused as invalid."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from rewriter.precision import convert_precision_proto

RNG = np.random.default_rng(5)


def _vi(name, shape, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def _fill_model(opset):
    """y = x * ConstantOfShape(shape(x), 0.5) + x."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("ConstantOfShape", ["s"], ["half"], value=nh.from_array(np.array([0.5], np.float32)),
                         name="fill"),
             h.make_node("Mul", ["x", "half"], ["xh"], name="mul"),
             h.make_node("Add", ["xh", "x"], ["y"], name="add")]
    m = h.make_model(h.make_graph(nodes, "g", [_vi("x", [2, 3])], [_vi("y", [2, 3])]),
                     opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _valid(model):
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def _kept(report):
    return {k.label.split("'")[1]: k.reason for k in report.kept if "'" in k.label}


@pytest.mark.parametrize("dtype, opset, makes_half", [("bfloat16", 13, False), ("bfloat16", 20, True),
                                                      ("float16", 13, True)])
def test_constant_of_shape_makes_half_only_where_its_schema_allows(dtype, opset, makes_half):
    m = _fill_model(opset)
    r, report = convert_precision_proto(m, dtype)
    _valid(r)
    fill = next(n for n in r.graph.node if n.op_type == "ConstantOfShape")
    made = fill.attribute[0].t.data_type
    if makes_half:
        assert made == (T.BFLOAT16 if dtype == "bfloat16" else T.FLOAT16) and "fill" not in _kept(report)
    else:
        assert made == T.FLOAT and _kept(report)["fill"] == f"ConstantOfShape-9 cannot make {dtype}"
        assert report.half_by_op == {"Mul": 1, "Add": 1}  # its reader takes it through a Cast
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(ReferenceEvaluator(r).run(None, {"x": x})[0], 1.5 * x, rtol=2e-2)


def _carried_weight_loop(opset):
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("MatMul", ["acc_in", "w_in"], ["prod"], name="step"),
                         h.make_node("Tanh", ["prod"], ["acc_out"])], "body",
                        [_vi("i", [], T.INT64), _vi("cond_in", [], T.BOOL), _vi("acc_in", [1, 4]), _vi("w_in", [4, 4])],
                        [_vi("cond_out", [], T.BOOL), _vi("acc_out", [1, 4]), _vi("w_in", [4, 4])])
    inits = [nh.from_array((RNG.standard_normal((4, 4)) * 0.5).astype(np.float32), "W"),
             nh.from_array(np.array(3, np.int64), "trip"), nh.from_array(np.array(True), "cond")]
    m = h.make_model(h.make_graph([h.make_node("Loop", ["trip", "cond", "x", "W"], ["y", "w_last"], body=body)], "g",
                                  [_vi("x", [1, 4])], [_vi("y", [1, 4]), _vi("w_last", [4, 4])], inits),
                     opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("dtype, opset, carried", [("bfloat16", 13, False), ("bfloat16", 16, True),
                                                   ("float16", 13, True)])
def test_loop_states_carry_half_only_where_the_loop_takes_it(dtype, opset, carried):
    m = _carried_weight_loop(opset)
    r, _ = convert_precision_proto(m, dtype)
    _valid(r)
    body = next(n for n in r.graph.node if n.op_type == "Loop").attribute[0].g
    state = next(v for v in body.input if v.name == "w_in").type.tensor_type.elem_type
    assert state == ((T.BFLOAT16 if dtype == "bfloat16" else T.FLOAT16) if carried else T.FLOAT)
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = ReferenceEvaluator(r).run(None, {"x": x})[0].astype(np.float32)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 3e-2


def test_cli_writes_a_bfloat16_result_onnx_runtime_cannot_expand_with_a_warning(tmp_path):
    """Clip-13 in bfloat16 is valid ONNX; ONNX Runtime's CPU provider has no kernel for it and,
    expanding its function body, finds a Where-9 that takes no bfloat16 ('Type Error' at load)."""
    inits = [nh.from_array(np.array(-1.0, np.float32), "lo"), nh.from_array(np.array(1.0, np.float32), "hi")]
    m = h.make_model(h.make_graph([h.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], "g",
                                  [_vi("x", [4])], [_vi("y", [4])], inits), opset_imports=[h.make_opsetid("", 13)])
    src, out = tmp_path / "m.onnx", tmp_path / "b.onnx"
    onnx.save(m, src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "bfloat16", "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "ONNX Runtime's CPU provider cannot run this bfloat16 result" in run.stderr and "Type Error" in run.stderr
    r = onnx.load(out)
    onnx.checker.check_model(r, full_check=True)
    x = np.array([-3.0, -0.5, 0.25, 2.0], np.float32)
    np.testing.assert_allclose(ReferenceEvaluator(r).run(None, {"x": x})[0].astype(np.float32), np.clip(x, -1, 1),
                               rtol=1e-2)


@pytest.mark.parametrize("problem, dtype, lacks", [
    ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for MatMul(13)", "bfloat16", True),
    ("INVALID_GRAPH : Type Error: Type 'tensor(bfloat16)' of input parameter (a) of operator (Where)", "bfloat16", True),
    ("INVALID_GRAPH : Type Error: Type 'tensor(float)' of input parameter (a) of operator (Where)", "bfloat16", False),
    ("INVALID_GRAPH : Type Error: Type 'tensor(bfloat16)' of input parameter (a)", "float16", False),
    ("INVALID_ARGUMENT : Failed to load model: the graph is not acyclic", "float16", False)])
def test_only_a_missing_half_kernel_turns_a_refusal_into_a_warning(problem, dtype, lacks):
    from rewriter.cli.runner import _lacks_half_kernel

    assert _lacks_half_kernel(problem, dtype) is lacks
