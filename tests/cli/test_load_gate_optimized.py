"""The final load check loads the result the way users run it: ONNX Runtime's default session
options (graph optimizations on), not only with them off (issue 39: silero-vad's static-shape
float16 result loaded with optimizations off, and ORT's default options refused it).

Oracles: ONNX Runtime itself, loading each model both ways (premises asserted in each test);
ORT's own message in the error; the output file, never written on a refusal.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter import cli

ort.set_default_logger_severity(4)


def _loads(model, optimized: bool) -> str | None:
    """None when ORT loads ``model`` (a proto or a path), else its message."""
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, str) else model.SerializeToString()
    try:
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - any refusal
        return str(e)
    return None


def _cast_div(divisor_is_input: bool, opset: int = 9, ir: int = 4) -> onnx.ModelProto:
    """x // int64(w), w a float initializer of zeros: an input ORT may override (so never
    constant-folded) when ``divisor_is_input``, else a constant ORT's optimizer folds into the
    Div, whose kernel then refuses an integer division by zero at load."""
    inputs = [h.make_tensor_value_info("x", T.INT64, [4])]
    if divisor_is_input:
        inputs.append(h.make_tensor_value_info("w", T.FLOAT, [4]))
    graph = h.make_graph([h.make_node("Cast", ["w"], ["wi"], to=T.INT64, name="cast"),
                          h.make_node("Div", ["x", "wi"], ["q"], name="div")], "g", inputs,
                         [h.make_tensor_value_info("q", T.INT64, [4])], [nh.from_array(np.zeros(4, np.float32), "w")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


def _run(tmp_path, capsys, model, *argv, external=False):
    path, out = str(tmp_path / "in.onnx"), tmp_path / "out.onnx"
    if external:
        onnx.save(model, path, save_as_external_data=True, location="in.data", size_threshold=0)
    else:
        onnx.save(model, path)
    rc = cli.main(["convert", path, *argv, "-o", str(out)])
    return rc, capsys.readouterr().err, out


def test_a_result_only_ort_optimizer_refuses_is_not_written(tmp_path, capsys):
    """Going to opset 8 makes the model IR 3, where every initializer is a constant: ORT's
    constant folding then hands Div a zero divisor. With optimizations off it loads."""
    model = _cast_div(divisor_is_input=True)
    assert _loads(model, True) is None and _loads(model, False) is None  # the premise: the input loads
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "8")
    assert rc == 1, err
    assert "default session options" in err and "Integer division by zero" in err, err
    assert "with graph optimizations off it loads; it loads the input)" in err, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert not out.exists()
    from rewriter.convert import convert_model

    result, _ = convert_model(model, 8)  # the oracle: ORT refuses this result only when optimizing
    assert _loads(result, False) is None and "Integer division by zero" in _loads(result, True)


def test_a_result_refused_as_the_input_is_refused_is_written_with_a_warning(tmp_path, capsys):
    model = _cast_div(divisor_is_input=False)
    assert _loads(model, False) is None and "Integer division by zero" in _loads(model, True)  # the premise
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "10")
    assert rc == 0, err
    assert "warning: ONNX Runtime refuses the result with its default session options" in err, err
    assert "as it refuses the input, so the rewrite is not the cause" in err and "Integer division by zero" in err
    assert out.exists() and _loads(str(out), False) is None


def _static_shape_divisor() -> onnx.ModelProto:
    """y // (len(x) - 4): with x's length fixed at 4 ORT folds the divisor to 0 and refuses the
    Div at load; with x dynamic (or optimizations off) it loads."""
    graph = h.make_graph(
        [h.make_node("Shape", ["x"], ["s"], name="shape"), h.make_node("Sub", ["s", "four"], ["d"], name="sub"),
         h.make_node("Div", ["y", "d"], ["q"], name="div"), h.make_node("Relu", ["x"], ["r"], name="relu")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, ["N"]), h.make_tensor_value_info("y", T.INT64, [1])],
        [h.make_tensor_value_info("q", T.INT64, [1]), h.make_tensor_value_info("r", T.FLOAT, ["N"])],
        [nh.from_array(np.array([4], np.int64), "four")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=7)


def test_a_refusal_caused_by_input_shape_says_so(tmp_path, capsys):
    model = _static_shape_divisor()
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    assert _loads(model, True) is None and _loads(fixed, False) is None  # the premises
    assert "Integer division by zero" in _loads(fixed, True)
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "14", "--input-shape", "x:4")
    assert rc == 1, err
    assert "not with the static shapes --input-shape / --fix-dim give it" in err and "division by zero" in err, err
    assert not out.exists()
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "14", "--input-shape", "x:5")
    assert rc == 0 and out.exists(), err


def test_half_weights_not_yet_written_are_loaded_with_their_values_before_a_refusal(tmp_path, capsys):
    """A float16 weight kept as its float32 bytes until written stands in as zeros for the
    load; ORT's optimizer folds this one into an integer divisor (3, not 0): the refusal zeros
    would cause is asked again with its values, and the result is written."""
    w = np.full(1024, 3.0, np.float32)
    graph = h.make_graph(
        [h.make_node("Cast", ["w"], ["wi"], to=T.INT64, name="cast"), h.make_node("Div", ["x", "wi"], ["q"], name="div"),
         h.make_node("Add", ["f", "w"], ["a"], name="add"), h.make_node("Relu", ["a"], ["o"], name="relu")], "g",
        [h.make_tensor_value_info("x", T.INT64, [1024]), h.make_tensor_value_info("f", T.FLOAT, [1024])],
        [h.make_tensor_value_info("q", T.INT64, [1024]), h.make_tensor_value_info("o", T.FLOAT, [1024])],
        [nh.from_array(w, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    rc, err, out = _run(tmp_path, capsys, model, "--dtype", "float16", external=True)
    assert rc == 0 and "warning" not in err, err
    written = onnx.load(str(out))
    assert {t.name: t.data_type for t in written.graph.initializer}["w"] == T.FLOAT16  # the premise: w in half
    assert _loads(str(out), True) is None
    zeroed = onnx.load(str(out))
    for t in zeroed.graph.initializer:
        t.raw_data = bytes(len(t.raw_data))
    assert "Integer division by zero" in _loads(zeroed, True)  # what zeros alone would have said


def _divide_in_a_branch_not_taken() -> onnx.ModelProto:
    """If(c) then x // int64(w) else x, w an initializer of zeros the input declares as a graph
    input (so overridable: ORT folds nothing from it). Fed c = false, ORT runs it."""
    then = h.make_graph([h.make_node("Cast", ["w"], ["wi"], to=T.INT64, name="cast"),
                         h.make_node("Div", ["x", "wi"], ["t"], name="div")], "then", [],
                        [h.make_tensor_value_info("t", T.INT64, [4])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"], name="id")], "else", [],
                         [h.make_tensor_value_info("e", T.INT64, [4])])
    inputs = [h.make_tensor_value_info("x", T.INT64, [4]), h.make_tensor_value_info("w", T.FLOAT, [4]),
              h.make_tensor_value_info("c", T.BOOL, [])]
    graph = h.make_graph([h.make_node("If", ["c"], ["q"], then_branch=then, else_branch=other, name="if")], "g",
                         inputs, [h.make_tensor_value_info("q", T.INT64, [4])],
                         [nh.from_array(np.zeros(4, np.float32), "w")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 9)], ir_version=4)


def test_verify_running_the_result_in_ort_does_not_spare_the_optimized_load(tmp_path, capsys):
    """--verify runs the result in ORT with optimizations off (each model as ONNX defines it),
    which spares the gate that load, not the one with ORT's default options."""
    model = _divide_in_a_branch_not_taken()
    assert _loads(model, True) is None  # the premise: the input loads as users run it
    path, out = str(tmp_path / "in.onnx"), tmp_path / "out.onnx"
    onnx.save(model, path)
    rc = cli.main(["convert", path, "--opset", "8", "--verify", "--input-value", "c:0", "-o", str(out)])
    printed = capsys.readouterr()
    err = printed.err
    assert "(seed 0, onnxruntime)" in printed.out and "q (int64): max abs diff 0" in printed.out  # ORT ran it
    assert rc == 1, err
    assert "default session options" in err and "Integer division by zero" in err, err
    assert not out.exists()


def test_a_model_over_the_gate_limits_is_loaded_optimized_under_verify_only(tmp_path, capsys, monkeypatch):
    """Beyond ORT_GATE_NODES the gate asks ORT nothing unless --verify ran the result there
    (then the optimized load follows at any size)."""
    from rewriter.cli import runner

    monkeypatch.setattr(runner, "ORT_GATE_NODES", 1)
    model = _divide_in_a_branch_not_taken()
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "8")
    assert rc == 0 and out.exists(), err  # not asked: written
    out.unlink()
    rc, err, out = _run(tmp_path, capsys, model, "--opset", "8", "--verify", "--input-value", "c:0")
    assert rc == 1 and "default session options" in err and not out.exists(), err

