"""Every public entry point checks its input as the command line does: a malformed model is the
input's fault, raised as ``rewriter.ModelLoadError`` (a ``RewriterError``) naming the node or
tensor, never an IndexError / ValueError / KeyError from inside, and never "the converted model
is not valid". ``allow_invalid_input=True`` mirrors ``--allow-invalid-input``.

Oracles: ``onnx.checker`` decides independently whether each malformed model is invalid; the CLI's
message for the same file is the reference text.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.errors import ModelLoadError


def _base() -> onnx.ModelProto:
    """x -> Relu -> Softmax -> Mul(w) -> ReduceProd(axes) -> y, opset 13; every node named."""
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4), "w")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=-1),
             helper.make_node("Mul", ["s", "w"], ["m"], name="mul"),
             helper.make_node("ReduceProd", ["m"], ["y"], name="prod", axes=[1], keepdims=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _node(m, name):
    return next(n for n in m.graph.node if n.name == name)


def missing_input(m, i):
    name = ["relu", "softmax", "mul", "prod"][i % 4]
    del _node(m, name).input[:]
    return name


def undefined_input(m, i):
    name = ["relu", "softmax", "mul", "prod"][i % 4]
    _node(m, name).input[0] = f"undefined_{i}"
    return f"undefined_{i}"


def dangling_output(m, i):
    m.graph.output.append(helper.make_tensor_value_info(f"dangling_{i}", TensorProto.FLOAT, [3]))
    return f"dangling_{i}"


def raw_data_size(m, i):
    w = m.graph.initializer[0]
    w.raw_data = w.raw_data[: 4 * (i % 11)]
    return "'w'"


def attribute_type(m, i):
    node = _node(m, "softmax")
    del node.attribute[:]
    node.attribute.append(helper.make_attribute("axis", [1.5, 2.5] if i % 2 else "one"))
    return "softmax"


def unknown_op(m, i):
    node = _node(m, ["relu", "softmax", "mul"][i % 3])
    node.op_type = f"NoSuchOp{i}"
    return node.name


def cycle(m, i):
    _node(m, "relu").input[0] = "y" if i % 2 else "m"
    return "relu"


def duplicate_output(m, i):
    m.graph.node.append(helper.make_node("Identity", ["x"], ["r"], name=f"dup{i}"))
    return (f"dup{i}", "'r'")


MUTATIONS = [missing_input, undefined_input, dangling_output, raw_data_size, attribute_type, unknown_op, cycle,
             duplicate_output]

ENTRY_POINTS = {
    "convert_opset_up": lambda m, **kw: rewriter.convert_opset(m, 18, **kw),
    "convert_opset_down": lambda m, **kw: rewriter.convert_opset(m, 11, **kw),
    "convert_opset_target": lambda m, **kw: rewriter.convert_opset(m, target="onnxruntime==1.15", **kw),
    "convert_precision": lambda m, **kw: rewriter.convert_precision(m, "float16", **kw),
    "optimize_model": lambda m, **kw: rewriter.optimize_model(m, **kw),
    "fold_reduce_prod": lambda m, **kw: rewriter.fold_reduce_prod(m, **kw),
    "fold_constants": lambda m, **kw: rewriter.fold_constants(m, **kw),
    "verify_reduce_prod_shapes": lambda m, **kw: rewriter.verify_reduce_prod_shapes(m, **kw),
    "verify_shapes": lambda m, **kw: rewriter.verify_shapes(m, **kw),
    "verify_numerics": lambda m, **kw: rewriter.verify_numerics(m, _base(), **kw),
    "verify_numerics_rewritten": lambda m, **kw: rewriter.verify_numerics(_base(), m, **kw),
}


def _call(entry, model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return ENTRY_POINTS[entry](model, **kw)


def test_the_base_model_is_valid_and_every_entry_point_takes_it():
    onnx.checker.check_model(_base(), full_check=True)
    for entry in ENTRY_POINTS:
        _call(entry, _base())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation=st.sampled_from(MUTATIONS), i=st.integers(0, 40), entry=st.sampled_from(sorted(ENTRY_POINTS)))
def test_a_malformed_model_is_the_inputs_fault_naming_the_node_or_tensor(mutation, i, entry):
    model = _base()
    named = mutation(model, i)
    with pytest.raises(Exception) as caught:
        onnx.checker.check_model(model, full_check=True)  # the oracle: the model is invalid
    assert caught.value is not None
    with pytest.raises(ModelLoadError) as raised:
        _call(entry, model)
    message = str(raised.value)
    assert any(n in message for n in ((named,) if isinstance(named, str) else named)), message
    assert "converted model is not valid" not in message


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_the_message_is_the_command_lines(entry, tmp_path):
    """The same file through the CLI and the API: the same text after the file name."""
    model = _base()
    raw_data_size(model, 1)
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    cli = subprocess.run([sys.executable, "-m", "rewriter", "convert", path, "--opset", "18", "-o",
                          str(tmp_path / "out.onnx")], capture_output=True, text=True)
    assert cli.returncode == 2
    with pytest.raises(ModelLoadError) as raised:
        _call(entry, path)
    assert str(raised.value) in cli.stderr, (str(raised.value), cli.stderr)
    assert not os.path.exists(tmp_path / "out.onnx")


def _checker_only_invalid() -> onnx.ModelProto:
    """A model whose only problem is one onnx.checker refuses (a graph output with no type) and
    that every engine can still process."""
    model = _base()
    model.graph.output[0].ClearField("type")
    return model


@pytest.mark.parametrize("entry", ["optimize_model", "fold_reduce_prod", "verify_reduce_prod_shapes", "convert_precision"])
def test_allow_invalid_input_processes_what_the_checker_refuses(entry):
    model = _checker_only_invalid()
    with pytest.raises(ModelLoadError, match="allow_invalid_input=True processes it anyway"):
        _call(entry, model)
    _call(entry, model, allow_invalid_input=True)


def test_a_conversion_the_checker_stops_blames_the_input_not_the_conversion():
    """A conversion holds its result to the checker: converting a model the checker refuses
    (let in by allow_invalid_input) fails as the input's fault, as the CLI says it."""
    with pytest.raises(ModelLoadError) as raised:
        rewriter.convert_opset(_checker_only_invalid(), 18, allow_invalid_input=True)
    message = str(raised.value)
    assert "the input is not a valid ONNX model" in message and "cannot convert it" in message
    assert "converted model" not in message


@pytest.mark.parametrize("make", [lambda **kw: rewriter.ConvertOpsetPass(18, **kw),
                                  lambda **kw: rewriter.ConvertPrecisionPass("float16", **kw),
                                  lambda **kw: rewriter.FoldReduceProdPass(**kw),
                                  lambda **kw: rewriter.VerifyReduceProdShapesPass(**kw),
                                  lambda **kw: rewriter.OptimizePass(**kw)],
                         ids=["convert", "precision", "fold", "verify", "optimize"])
@pytest.mark.parametrize("mutation", [raw_data_size, undefined_input, unknown_op], ids=lambda f: f.__name__)
def test_every_pass_checks_its_input(make, mutation):
    model = _base()
    named = mutation(model, 3)
    with warnings.catch_warnings():  # onnx_ir warns of what it reads; the pass must refuse it
        warnings.simplefilter("ignore")
        ir_model = ir.serde.deserialize_model(model)
    with pytest.raises(ModelLoadError) as raised:
        make()(ir_model)
    assert named in str(raised.value)


@pytest.mark.parametrize("make", [lambda **kw: rewriter.FoldReduceProdPass(**kw),
                                  lambda **kw: rewriter.VerifyReduceProdShapesPass(**kw),
                                  lambda **kw: rewriter.OptimizePass(**kw)], ids=["fold", "verify", "optimize"])
def test_a_pass_allows_invalid_input_when_asked(make):
    with pytest.raises(ModelLoadError, match="allow_invalid_input=True processes it anyway"):
        make()(ir.serde.deserialize_model(_checker_only_invalid()))
    make(allow_invalid_input=True)(ir.serde.deserialize_model(_checker_only_invalid()))


def test_the_convert_pass_blames_the_input_when_the_checker_stops_it():
    with pytest.raises(ModelLoadError, match="cannot convert it") as raised:
        rewriter.ConvertOpsetPass(18, allow_invalid_input=True)(ir.serde.deserialize_model(_checker_only_invalid()))
    assert "converted model" not in str(raised.value)
