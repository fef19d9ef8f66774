"""One policy for invalid inputs, in every command (issue 12).

An input onnx.checker refuses is bad input: exit 2, one `error:` line carrying the checker's
complaint, nothing written (``--allow-invalid-input`` processes it with a warning). A result is
never less valid than its input: the final gate refuses it (exit 1, nothing written).
Oracles: onnx.checker (each case is first shown to be invalid by the checker itself) and ONNX Runtime.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli

F = TensorProto.FLOAT
COMMANDS = {
    "convert": ["convert", "{m}", "--opset", "17", "-o", "{o}"],
    "fold": ["fold", "{m}", "-o", "{o}"],
    "optimize": ["optimize", "{m}", "-o", "{o}"],
    "check": ["check", "{m}"],
}


def _base() -> onnx.ModelProto:
    c = numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "c")
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["c"], ["k"], name="const_rp", axes=[1], keepdims=1),
         helper.make_node("Mul", ["x", "k"], ["m"], name="mul"),
         helper.make_node("Relu", ["m"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, [2, 3])], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def _unsorted(m):
    m.graph.node.reverse()


def _dup_input(m):
    m.graph.input.append(m.graph.input[0])


def _no_default_opset(m):
    del m.graph.node[:]
    m.graph.node.extend([helper.make_node("Identity", ["x"], ["y"], name="id")])
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("custom", 1))


def _wrong_attr_type(m):
    m.graph.node[2].attribute.append(helper.make_attribute("alpha", 1.0))  # Relu has none


def _unknown_attr(m):
    m.graph.node[1].attribute.append(helper.make_attribute("bogus", 3))


def _bad_sparse(m):
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sp")
    indices = numpy_helper.from_array(np.array([0, 99], np.int64), "sp_idx")
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [2, 3]))


def _ir(version):
    def mutate(m):
        m.ir_version = version
    return mutate


def _empty_op(m):
    m.graph.node[2].op_type = ""


def _unknown_op(m):
    m.graph.node[2].op_type = "NoSuchOp"


CASES = {"unsorted": _unsorted, "duplicate_input": _dup_input, "no_default_opset": _no_default_opset,
         "wrong_attribute": _wrong_attr_type, "unknown_attribute": _unknown_attr, "bad_sparse_indices": _bad_sparse,
         "ir_version_1": _ir(1), "ir_version_3": _ir(3), "empty_op_type": _empty_op, "unknown_op": _unknown_op}


def _write(tmp_path, mutate) -> str:
    model = _base()
    mutate(model)
    path = str(tmp_path / "in.onnx")
    onnx.save(model, path)
    return path


def _assert_refused(tmp_path, capsys, argv, rc_expected=2, *fragments):
    out = tmp_path / "out.onnx"
    if argv[0] != "check":
        out.write_bytes(b"precious")
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == rc_expected, (argv, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    if argv[0] != "check":
        assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.onnx"] + (["out.onnx"] if argv[0] != "check" else []))
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_an_input_the_checker_refuses_is_refused_by_every_command(tmp_path, capsys, command, case):
    path = _write(tmp_path, CASES[case])
    with pytest.raises(Exception):  # the oracle: onnx's own checker refuses the input
        onnx.checker.check_model(path)
    argv = [a.format(m=path, o=tmp_path / "out.onnx") for a in COMMANDS[command]]
    _assert_refused(tmp_path, capsys, argv, 2, path)


@pytest.mark.parametrize("command", ["fold", "optimize"])
def test_allow_invalid_input_processes_it_with_a_warning(tmp_path, capsys, command):
    path = _write(tmp_path, _unsorted)  # ONNX Runtime sorts the nodes itself; the checker refuses them
    out = str(tmp_path / "out.onnx")
    rc = cli.main([command, path, "-o", out, "--allow-invalid-input"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "warning: " in err and "--allow-invalid-input" in err
    x = np.ones((2, 3), np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_opset_import_older_than_the_nodes_is_refused_naming_the_node(tmp_path, capsys, command):
    """An opset-20 export whose default import was edited to 1 (Gelu exists from 20)."""
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], name="gelu")], "g",
                              [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.opset_import[0].version = 1
    path = str(tmp_path / "in.onnx")
    onnx.save(model, path)
    argv = [a.format(m=path, o=tmp_path / "out.onnx") for a in COMMANDS[command]]
    _assert_refused(tmp_path, capsys, argv, 2, "node 'gelu' (Gelu)", "opset 1", "from opset 20")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_model_without_graph_outputs_is_refused(tmp_path, capsys, command):
    model = _base()
    del model.graph.output[:]
    path = str(tmp_path / "in.onnx")
    onnx.save(model, path)
    argv = [a.format(m=path, o=tmp_path / "out.onnx") for a in COMMANDS[command]]
    _assert_refused(tmp_path, capsys, argv, 2, "no outputs")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_external_data_location_pointing_at_the_model_file_is_refused(tmp_path, capsys, command):
    model = _base()
    c = model.graph.initializer[0]
    c.ClearField("raw_data")
    c.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "in.onnx"), ("offset", "0"), ("length", "24")):
        e = c.external_data.add()
        e.key, e.value = key, value
    path = str(tmp_path / "in.onnx")
    onnx.save(model, path)
    argv = [a.format(m=path, o=tmp_path / "out.onnx") for a in COMMANDS[command]]
    _assert_refused(tmp_path, capsys, argv, 2, "is the model file itself")


def test_the_final_gate_refuses_a_result_the_checker_refuses(tmp_path, capsys, monkeypatch):
    from rewriter import fold

    real = fold.fold_model

    def broken(model, **kwargs):
        result, report = real(model, **kwargs)
        result.graph.node[-1].input[0] = "undefined_value"
        return result, report

    monkeypatch.setattr(fold, "fold_model", broken)
    path = _write(tmp_path, lambda m: None)
    line = _assert_refused(tmp_path, capsys, ["fold", path, "-o", str(tmp_path / "out.onnx"), "--no-verify"], 1)
    assert "fails the ONNX checker (the input passes it)" in line


def test_the_final_gate_refuses_a_result_onnx_runtime_cannot_load(tmp_path, capsys, monkeypatch):
    """A custom-domain op nobody implements passes onnx.checker and its full check, but ONNX
    Runtime cannot load it: a result like that from an input ORT loads is never written."""
    from rewriter import fold

    real = fold.fold_model

    def unknown_custom_op(model, **kwargs):
        result, report = real(model, **kwargs)
        result.graph.node[-1].domain, result.graph.node[-1].op_type = "com.example", "Mystery"
        result.opset_import.append(helper.make_opsetid("com.example", 1))
        return result, report

    monkeypatch.setattr(fold, "fold_model", unknown_custom_op)
    path = _write(tmp_path, lambda m: None)
    probe = _base()
    probe.graph.node[-1].domain, probe.graph.node[-1].op_type = "com.example", "Mystery"
    probe.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.checker.check_model(probe, full_check=True)  # the oracles: valid for onnx ...
    with pytest.raises(Exception):
        ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])  # ... not for ORT
    line = _assert_refused(tmp_path, capsys, ["fold", path, "-o", str(tmp_path / "out.onnx")], 1)
    assert "ONNX Runtime cannot load the result (it loads the input)" in line


def test_valid_inputs_still_pass_every_command(tmp_path, capsys):
    path = _write(tmp_path, lambda m: None)
    onnx.checker.check_model(path, full_check=True)
    for command in COMMANDS:
        out = tmp_path / f"{command}.onnx"
        argv = [a.format(m=path, o=out) for a in COMMANDS[command]]
        assert cli.main(argv) == 0, capsys.readouterr().err
        if command != "check":
            onnx.checker.check_model(str(out), full_check=True)
            ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
