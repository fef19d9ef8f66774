"""One half-precision pipeline: ``convert --dtype``, ``rewriter.convert_precision`` and
``rewriter.ConvertPrecisionPass`` give byte-identical models for the same arguments (migration
for a target first, --optimize, calibration, --max-error, --keep-op-types).

Oracles: the CLI's written file (loaded by plain onnx) for the API; the API's onnx_ir result for
the pass; ONNX Runtime on the source for what the result computes; onnx.defs' opset of the target.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.cli.main import main

X = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)


def _model(opset: int) -> onnx.ModelProto:
    """MatMul, Add, LayerNormalization (opset 17+), Softmax: float32 throughout."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32) / 4, "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    scale = numpy_helper.from_array(np.ones(16, np.float32), "scale")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("LayerNormalization", ["a", "scale"], ["n"], name="ln", axis=-1),
             helper.make_node("Softmax", ["n"], ["y"], name="sm", axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], [w, b, scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


CASES = {
    "plain": ([], {}),
    "keep_softmax": (["--keep-op-types", "Softmax"], {"keep_op_types": "Softmax"}),
    "target_old_ort": (["--target", "onnxruntime==1.15"], {"target": "onnxruntime==1.15"}),
    "opset_17": (["--opset", "17"], {"opset": 17}),
    "optimize": (["--optimize"], {"optimize": True}),
    "calibrate": (["--calibrate"], {"calibrate": True}),
    "io_half": (["--no-keep-io-types"], {"keep_io_types": False}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_api_and_pass_give_the_same_model(case, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_model(21), path)
    flags, kwargs = CASES[case]
    out = str(tmp_path / "cli.onnx")
    assert main(["convert", path, "--dtype", "float16", "-o", out, "-q", "--no-verify", *flags]) == 0
    api = rewriter.convert_precision(path, "float16", **kwargs)
    assert api.SerializeToString() == onnx.load(out).SerializeToString()
    from_ir = rewriter.convert_precision(ir.load(path), "float16", **kwargs)
    from_pass = rewriter.ConvertPrecisionPass("float16", **kwargs)(ir.load(path)).model
    assert ir.to_proto(from_pass).SerializeToString() == ir.to_proto(from_ir).SerializeToString()
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    if case != "io_half":
        got = ort.InferenceSession(api.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def test_the_api_migrates_for_its_target_first():
    """An opset-21 model for ONNX Runtime 1.15 (which implements opset 19 at most, IR 9): the API
    converts it to the release's opsets first, as the CLI does, instead of returning opset 21."""
    result = rewriter.convert_precision(_model(21), "float16", target="onnxruntime==1.15")
    default = next(o.version for o in result.opset_import if o.domain in ("", "ai.onnx"))
    assert default <= 19 and result.ir_version <= 9
    from rewriter.targets import blockers, parse_target

    assert blockers(result, parse_target("onnxruntime==1.15")) == []
    p = rewriter.ConvertPrecisionPass("float16", target="onnxruntime==1.15")(ir.serde.deserialize_model(_model(21)))
    assert p.model.opset_imports[""] == default


def test_max_error_through_the_api_and_the_cli_agree(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_model(17), path)
    sample = str(tmp_path / "s.npz")
    np.savez(sample, x=X)
    out = str(tmp_path / "cli.onnx")
    assert main(["convert", path, "--dtype", "float16", "-o", out, "-q", "--no-verify", "--max-error", "1e-3",
                 "--calibration-data", sample]) == 0
    api = rewriter.convert_precision(path, "float16", max_error=1e-3, calibration_data=[{"x": X}])
    assert api.SerializeToString() == onnx.load(out).SerializeToString()
