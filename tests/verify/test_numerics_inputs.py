"""Random inputs for --verify: declared dims, dynamic dims (a declared -1 included) and pinned shapes.

Oracle: the shapes of the arrays generated, and ONNX Runtime running the model on them."""

from __future__ import annotations

import onnx


def _minus_one_model():
    """An input declared [-1, 3, ?, ?], as Paddle exports write it (rapidocr's classifier)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 3, None, None])
    x.type.tensor_type.shape.dim[0].dim_value = -1
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])


def test_a_declared_minus_one_is_a_dynamic_dim():
    from rewriter.verify.numerics import random_inputs, verify_numerics

    model = _minus_one_model()
    assert random_inputs(model)["x"].shape == (2, 3, 2, 2)
    assert random_inputs(model, input_shapes={"x": [1, 3, 48, 192]})["x"].shape == (1, 3, 48, 192)
    report = verify_numerics(model, model)  # every dynamic dim defaulted: said, and no pass
    assert report.status == "not verified" and report.defaulted == "x: dim 0, dim 2, dim 3"
    assert verify_numerics(model, model, input_shapes={"x": [1, 3, 48, 192]}).ok


def test_a_fallback_to_onnx_reference_says_why():
    from rewriter.verify.numerics import verify_numerics

    # ONNX Runtime's CPU kernels have no int16 Relu; onnx.reference runs it
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.INT16, [3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT16, [3])
    model = onnx.helper.make_model(onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 14)])
    report = verify_numerics(model, model)
    assert report.ok and report.backend_original == "reference"
    assert "Could not find an implementation" in report.fallback
    assert "onnx.reference because ONNX Runtime could not" in report.summary_lines()[0]
    assert report.to_dict()["fallback"] == report.fallback
    assert "--input-shape" not in report.fallback  # static dims: sizes are not the question

    dynamic = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.INT16, ["n"])
    model.graph.input[0].CopyFrom(dynamic)
    report = verify_numerics(model, model)  # (its one dynamic dim defaulted: not verified, no mismatch)
    assert report.status == "not verified" and "give real sizes with --input-shape NAME:DIMS" in report.fallback


def test_pinned_values_are_fed_as_given():
    import numpy as np
    import pytest

    from rewriter.errors import RewriterError
    from rewriter.verify.numerics import verify_numerics

    sr = onnx.helper.make_tensor_value_info("sr", onnx.TensorProto.INT64, [])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [])
    check = onnx.helper.make_node("Sub", ["sr", "k"], ["y"])
    k = onnx.numpy_helper.from_array(np.array(16000, np.int64), "k")
    model = onnx.helper.make_model(onnx.helper.make_graph([check], "g", [sr], [y], [k]),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    # Sub(sr, 16000) is 0 only for the pinned value; both models agree either way, so run one
    from rewriter.verify.numerics import compare as numerics

    feeds = {}
    real = numerics._run_pair

    def spy(first, second, f, seed):
        feeds.update(f)
        return real(first, second, f, seed)

    numerics._run_pair = spy
    try:
        assert verify_numerics(model, model, input_values={"sr": [16000]}).ok
    finally:
        numerics._run_pair = real
    assert feeds["sr"].shape == () and int(feeds["sr"]) == 16000
    with pytest.raises(RewriterError, match="no graph input 'rate'"):
        verify_numerics(model, model, input_values={"rate": [1]})


def test_an_original_that_does_not_run_on_the_default_sizes_gets_a_hint(tmp_path, capsys):
    from rewriter import cli

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", "t"])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 2])
    shape = onnx.numpy_helper.from_array(__import__("numpy").array([3, 2], "int64"), "shape")
    reshape = onnx.helper.make_node("Reshape", ["x", "shape"], ["y"])  # 6 elements: not a 2x2 input
    model = onnx.helper.make_model(onnx.helper.make_graph([reshape], "g", [x], [y], [shape]),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    assert cli.main(["convert", path, "--opset", "11", "-o", str(tmp_path / "o.onnx"), "--verify"]) == 2
    assert "give real sizes with --input-shape NAME:DIMS" in capsys.readouterr().err
    assert cli.main(["convert", path, "--opset", "11", "-o", str(tmp_path / "o.onnx"), "--verify",
                     "--input-shape", "x:2,3"]) == 0
