"""--freeze-input-defaults [NAME,...] on convert, fold, optimize and check: graph inputs with an
initializer become constants before any work, the summary and --json list them, --plan and
check --target say what the option would unlock, bad names are exit 2. Oracle: ONNX Runtime on
the original (it takes the default when the input is not fed)."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest

from rewriter import cli
from rewriter.convert import convert_for
from rewriter.graph.input_defaults import default_note, freeze_input_defaults
from tests.graph.input_default_models import IR3_FEEDS, X, ir3_model, ort_run, reduce_model, upsample_model
from tests.oracle import assert_same_outputs, assert_valid


@pytest.fixture
def seed(tmp_path):
    path = str(tmp_path / "seed.onnx")
    onnx.save(reduce_model("ReduceProd"), path)
    return path


@pytest.fixture
def ir3(tmp_path):
    path = str(tmp_path / "ir3.onnx")
    onnx.save(ir3_model(), path)
    return path


def _inputs(path) -> list[str]:
    return [i.name for i in onnx.load(path).graph.input]


def test_without_the_option_the_refusal_says_why(seed, tmp_path, capsys):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["convert", seed, "--opset", "13", "-o", out]) == 2
    err = capsys.readouterr().err
    assert "axes input 'b' is not a constant" in err and default_note("b") in err
    assert not os.path.exists(out)


@pytest.mark.parametrize("flag", [["--freeze-input-defaults"], ["--freeze-input-defaults=b"],
                                  ["--freeze-input-defaults", "b"]])
def test_convert_the_seed_with_the_option(seed, tmp_path, capsys, flag):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["convert", seed, *flag, "--opset", "13", "-o", out]) == 0
    stdout = capsys.readouterr().out
    assert "input defaults frozen into constants: b" in stdout
    result = onnx.load(out)
    assert_valid(result)
    assert _inputs(out) == ["x"]
    assert_same_outputs(ort_run(onnx.load(seed), {"x": X}), ort_run(result, {"x": X}))


def test_the_cli_writes_what_the_library_makes(seed, tmp_path):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["convert", seed, "--opset", "13", "-o", out, "--freeze-input-defaults"]) == 0
    library, _ = convert_for(freeze_input_defaults(onnx.load(seed))[0], 13)
    assert onnx.load(out).graph.SerializeToString() == library.graph.SerializeToString()


def test_the_flag_before_model_is_a_usage_error(seed, capsys):
    assert cli.main(["convert", "--freeze-input-defaults", seed, "--opset", "13", "--plan"]) == 2
    assert "put the flag after MODEL, or give names as --freeze-input-defaults=NAME,..." in capsys.readouterr().err


@pytest.mark.parametrize("command", [["convert", "--opset", "13"], ["fold"], ["optimize"], ["check"]])
def test_a_bad_name_is_exit_2_naming_it_and_the_valid_ones(seed, tmp_path, capsys, command):
    out = str(tmp_path / "out.onnx")
    args = [command[0], seed, "--freeze-input-defaults=b,zz", *command[1:]] + (["-o", out] if command[0] != "check" else [])
    assert cli.main(args) == 2
    assert "'zz' is not a graph input with an initializer (those with one: 'b')" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_json_lists_what_was_frozen_and_the_table_the_ir_as_read(ir3, tmp_path, capsys):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["optimize", ir3, "-o", out, "--freeze-input-defaults", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["frozen_input_defaults"] == ["W", "s", "B"]
    assert doc["before"]["ir_version"] == 3 and doc["after"]["ir_version"] == 4
    assert doc["after"]["ops"] == {"Add": 1, "MatMul": 1, "Reshape": 1}  # W's Transpose folded
    assert_same_outputs(ort_run(ir3_model(), IR3_FEEDS), ort_run(onnx.load(out), IR3_FEEDS))


def test_optimize_an_ir3_model_without_the_option_says_what_it_left(ir3, tmp_path, capsys):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["optimize", ir3, "-o", out]) == 0
    stdout = capsys.readouterr().out
    assert f"not folded: node 't' (Transpose): input 'W' is not a constant: {default_note('W')}" in stdout
    assert "frozen" not in stdout and _inputs(out) == ["x", "W", "s", "B"] and onnx.load(out).ir_version == 3


def test_convert_an_ir3_model_down(ir3, tmp_path, capsys):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["convert", ir3, "--opset", "4", "-o", out]) == 2
    assert default_note("s") in capsys.readouterr().err
    assert cli.main(["convert", ir3, "--opset", "4", "-o", out, "--freeze-input-defaults"]) == 0
    stdout = capsys.readouterr().out
    assert "input defaults frozen into constants: W, s, B (IR 3 -> 4: IR 3 has no initializers outside the graph " \
           "inputs)" in stdout
    assert onnx.load(out).ir_version == 4 and _inputs(out) == ["x"]


def test_ir3_pinned_cannot_hold_frozen_defaults(ir3, tmp_path, capsys):
    out = str(tmp_path / "out.onnx")
    args = ["convert", ir3, "--opset", "4", "--ir-version", "3", "--freeze-input-defaults"]
    assert cli.main([*args, "-o", out]) == 2
    message = "IR 3 has no initializers outside the graph inputs, so 'W', 'B' cannot stay constant there"
    assert message in capsys.readouterr().err and not os.path.exists(out)
    assert cli.main([*args, "--plan"]) == 2
    assert f"blocked by the IR version: --freeze-input-defaults: {message}" in capsys.readouterr().out
    # freezing only what blocks keeps IR 3's form for the rest
    assert cli.main(["convert", ir3, "--opset", "4", "--ir-version", "3", "--freeze-input-defaults=s", "-o", out]) == 0
    assert _inputs(out) == ["x", "W", "B"]


def test_plan_says_what_the_option_would_unlock(seed, capsys):
    assert cli.main(["convert", seed, "--opset", "13", "--plan"]) == 2
    assert "--freeze-input-defaults=b would unlock it: the conversion is then possible" in capsys.readouterr().out
    assert cli.main(["convert", seed, "--opset", "13", "--plan", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["input_defaults"] == {"names": ["b"], "blocked": 1, "blocked_after": 0, "possible": True,
                                     "why_not": None}
    assert cli.main(["convert", seed, "--opset", "13", "--plan", "--freeze-input-defaults"]) == 0
    stdout = capsys.readouterr().out
    assert ": possible" in stdout and "input defaults frozen into constants: b" in stdout


def test_plan_when_the_option_unlocks_part(tmp_path, capsys):
    m = reduce_model("ReduceMean")  # a second node reads axes a caller gives
    m.graph.input.append(onnx.helper.make_tensor_value_info("k", onnx.TensorProto.INT64, [1]))
    m.graph.node.append(onnx.helper.make_node("ReduceMax", ["x", "k"], ["z"], name="other"))
    m.graph.output.append(onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, ["d0", "d1", "d2"]))
    path = str(tmp_path / "m.onnx")
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    assert cli.main(["convert", path, "--opset", "13", "--plan"]) == 2
    assert "--freeze-input-defaults=b would unblock 1 of 2 node(s); 1 node(s) would still block it" \
        in capsys.readouterr().out


def test_check_target_says_what_the_option_would_unlock(seed, capsys):
    assert cli.main(["check", seed, "--target", "onnxruntime==1.12"]) == 1
    assert ("convert --target onnxruntime==1.12: blocked by 1 node(s); --freeze-input-defaults=b would unlock it"
            in capsys.readouterr().out)
    assert cli.main(["check", seed, "--target", "onnxruntime==1.12", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["target"]["input_defaults"]["possible"] is True


def test_check_with_the_option(seed, capsys):
    assert cli.main(["check", seed, "--freeze-input-defaults", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["frozen_input_defaults"] == ["b"]
    assert cli.main(["check", seed, "--freeze-input-defaults"]) == 0
    assert "input defaults frozen into constants: b" in capsys.readouterr().out


def test_fold_with_and_without_the_option(tmp_path, capsys):
    m = reduce_model()
    m.graph.initializer.append(onnx.numpy_helper.from_array(X, "c"))
    m.graph.node[0].input[0] = "c"
    del m.graph.input[0]
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    assert cli.main(["fold", src, "-o", out]) == 0
    assert f"axes 'b' is not a constant: {default_note('b')}" in capsys.readouterr().out
    assert _inputs(out) == ["b"]  # without the option nothing changes
    assert cli.main(["fold", src, "-o", out, "--freeze-input-defaults"]) == 0
    assert "folded 1 ReduceProd node(s)" in capsys.readouterr().out
    assert _inputs(out) == [] and not onnx.load(out).graph.node
    assert_same_outputs(ort_run(m, {}), ort_run(onnx.load(out), {}))


def test_a_model_without_defaults_says_nothing_was_frozen(tmp_path, capsys):
    m = upsample_model()
    del m.graph.input[1]
    path, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, path)
    assert cli.main(["convert", path, "--opset", "8", "-o", out, "--freeze-input-defaults"]) == 0
    assert "input defaults: no graph input has an initializer, nothing frozen" in capsys.readouterr().out


def test_upsample_9_to_8(tmp_path, capsys):
    path, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(upsample_model(), path)
    assert cli.main(["convert", path, "--opset", "8", "-o", out]) == 2
    assert default_note("s") in capsys.readouterr().err
    assert cli.main(["convert", path, "--opset", "8", "-o", out, "--freeze-input-defaults=s"]) == 0
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    assert_same_outputs(ort_run(upsample_model(), {"x": x}), ort_run(onnx.load(out), {"x": x}))


def test_plan_says_when_the_ir_version_keeps_the_option_from_unlocking(tmp_path, capsys):
    m = ir3_model()  # 's' is read by a second node: it stays, and IR 3 makes it an input again
    m.graph.node.append(onnx.helper.make_node("Identity", ["s"], ["s_out"]))
    m.graph.output.append(onnx.helper.make_tensor_value_info("s_out", onnx.TensorProto.INT64, [1]))
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    assert cli.main(["convert", path, "--opset", "4", "--ir-version", "3", "--plan"]) == 2
    assert ("--freeze-input-defaults=s would not unlock it: --freeze-input-defaults: IR 3 has no initializers "
            "outside the graph inputs, so 's' cannot stay constant there") in capsys.readouterr().out
    assert cli.main(["convert", path, "--opset", "4", "--plan"]) == 2  # the IR version chosen: 4
    assert "--freeze-input-defaults=s would unlock it" in capsys.readouterr().out
