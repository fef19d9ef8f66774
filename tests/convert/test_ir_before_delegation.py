"""What the planner's ``find_min_ir_version_for`` call before delegation is for (issue 27).

Before a step goes to onnx's converter, the planner raises the model's IR version to the one
the target opset needs. onnx's converter cannot parse a model whose IR version is unset (0) or 1
("unable to parse input model"): the Python API takes such a model (a ModelProto built by
hand or by a tool that never set ``ir_version``), as does the command line with
--allow-invalid-input, and without the raise the delegated step fails. (The IR version of the
result is chosen again at the end, so the raise changes nothing else.)

Oracles: ONNX Runtime running the same graph with a proper IR version (the source) and the
result; onnx.checker on the result; onnx.helper.find_min_ir_version_for for the IR the result
ends at.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import rewriter
from rewriter.convert import convert_model
from tests.oracle import assert_valid

SCALARS = [("as", T.FLOAT, 0.1), ("az", T.UINT8, 1), ("bs", T.FLOAT, 0.2), ("bz", T.UINT8, 2),
           ("ys", T.FLOAT, 0.3), ("yz", T.UINT8, 3)]


def _qlinear_matmul(opset: int, ir_version: int) -> onnx.ModelProto:
    """QLinearMatMul, whose 10 <-> 21 step only onnx's converter takes; every input a graph
    input (no initializer, which would make the planner raise the IR to 4 for its own reason)."""
    inputs = [h.make_tensor_value_info("a", T.UINT8, [2, 3]), h.make_tensor_value_info("b", T.UINT8, [3, 2])]
    inputs += [h.make_tensor_value_info(name, elem, []) for name, elem, _ in SCALARS]
    node = h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="q")
    graph = h.make_graph([node], "g", inputs, [h.make_tensor_value_info("y", T.UINT8, [2, 2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def _feeds():
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(0, 40, size=[2, 3]).astype(np.uint8), "b": rng.integers(0, 40, size=[3, 2]).astype(np.uint8)}
    for name, elem, value in SCALARS:
        feeds[name] = np.array(value, onnx.helper.tensor_dtype_to_np_dtype(elem))
    return feeds


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("source,target", [(10, 21), (21, 10)])
@pytest.mark.parametrize("ir_version", [0, 1])
def test_a_delegated_step_of_a_model_without_a_usable_ir_version_converts(source, target, ir_version):
    model = _qlinear_matmul(source, ir_version)
    result, report = convert_model(model, target)
    assert report.version_converter_called and report.delegated["QLinearMatMul"] == 1  # the premise
    assert_valid(result)
    wanted = onnx.helper.find_min_ir_version_for([h.make_opsetid("", target)])
    assert result.ir_version == wanted
    feeds = _feeds()
    proper = _qlinear_matmul(source, onnx.helper.find_min_ir_version_for([h.make_opsetid("", source)]))
    (expected,) = _ort(proper, feeds)
    (got,) = _ort(result, feeds)
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(rewriter.ModelLoadError, match="allow_invalid_input=True processes it anyway"):
        rewriter.convert_opset(model, target)  # onnx.checker refuses the input, as the CLI does
    public = rewriter.convert_opset(model, target, allow_invalid_input=True)
    np.testing.assert_array_equal(_ort(public, feeds)[0], expected)


def test_onnx_converter_itself_refuses_those_ir_versions():
    """The premise, shown on onnx's converter directly: IR 0 and 1 it cannot parse, IR 2 it can."""
    from onnx import version_converter

    for ir_version in (0, 1):
        with pytest.raises(Exception, match="unable to parse|IR version"):
            version_converter.convert_version(_qlinear_matmul(10, ir_version), 21)
    converted = version_converter.convert_version(_qlinear_matmul(10, 2), 21)
    assert converted.graph.node[0].op_type == "QLinearMatMul"
