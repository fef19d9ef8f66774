"""The command line as a model engineer expects it (issue 10).

Oracles: ONNX Runtime runs what was written; onnx.checker (full_check) validates it; the file
system says what was written, replaced or left behind; subprocesses show what a terminal shows.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter import cli

F = TensorProto.FLOAT
MODELS = pathlib.Path(__file__).resolve().parents[2] / "models"


def _ext_model(d, name="ext13.onnx", size=(64, 64), data_name=None) -> str:
    """Add + ReduceProd over an input, the weight stored as external data (onnx.save)."""
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, int(np.prod(size)), dtype=np.float32).reshape(size), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
         helper.make_node("ReduceProd", ["s"], ["y"], name="rp", axes=[1], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", F, list(size))], [helper.make_tensor_value_info("y", F, [size[0]])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(d, name)
    onnx.save(model, path, save_as_external_data=True, location=data_name or name + ".data", size_threshold=0)
    return path


def _foldable_ext(d, name="fold.onnx", data_name=None) -> str:
    """A ReduceProd over an external weight (foldable) feeding a Mul."""
    w = numpy_helper.from_array(np.linspace(0.9, 1.1, 8 * 512, dtype=np.float32).reshape(8, 512), "w")
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["w"], ["p"], name="rp", axes=[0], keepdims=0),
         helper.make_node("Mul", ["x", "p"], ["y"], name="mul")], "g",
        [helper.make_tensor_value_info("x", F, [512])], [helper.make_tensor_value_info("y", F, [512])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(d, name)
    onnx.save(model, path, save_as_external_data=True, location=data_name or name + ".data", size_threshold=0)
    return path


def _run(argv, capsys):
    rc = cli.main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _ort(path, feeds):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)


# ---------------------------------------------------------------- --verify

@pytest.mark.parametrize("command", ["convert", "fold"])
@pytest.mark.parametrize("layout", [None, "never", "always"])
def test_verify_works_on_external_data_models(tmp_path, capsys, monkeypatch, command, layout):
    src = _ext_model(tmp_path)
    monkeypatch.chdir("/")  # from any directory
    out = str(tmp_path / "o.onnx")
    argv = [command, src, "-o", out, "--verify"] + (["--opset", "18"] if command == "convert" else [])
    argv += ["--external-data", layout] if layout else []
    rc, stdout, err = _run(argv, capsys)
    assert rc == 0, err
    assert "onnxruntime" in stdout and "MISMATCH" not in stdout
    assert "Ignoring unknown external data key" not in err and "warning" not in err.lower()
    # onnx's shape inference cannot read an axes input stored as external data ("always" puts
    # the 8-byte axes tensor of ReduceProd-18 there too): the full check applies to the others
    onnx.checker.check_model(out, full_check=(layout != "always" or command == "fold"))
    x = np.random.default_rng(0).uniform(0.5, 1.5, (64, 64)).astype(np.float32)
    np.testing.assert_allclose(_ort(out, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-6)


def test_verify_feeds_rank0_inputs_to_onnx_runtime(tmp_path, capsys):
    """An If condition is a rank-0 graph input: ORT must run it, not onnx.reference."""
    branch = lambda n: helper.make_graph([helper.make_node("Identity", ["x"], [n])], n, [],  # noqa: E731
                                         [helper.make_tensor_value_info(n, F, [2, 3])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=branch("t"), else_branch=branch("e"))],
                              "g", [helper.make_tensor_value_info("x", F, [2, 3]),
                                    helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    src = str(tmp_path / "if.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    rc, stdout, err = _run(["convert", src, "--opset", "18", "-o", str(tmp_path / "o.onnx"), "--verify"], capsys)
    assert rc == 0, err
    assert "seed 0, onnxruntime)" in stdout


def _axes_input_model(path):
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x", "axes"], ["y"], name="rp", keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", F, [None, None, None])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@pytest.mark.parametrize("seed", [0, 8, 11])  # 8 and 11 used to exit 2 with ORT's log lines, 0 said ok
def test_verify_refuses_axes_from_a_graph_input_whatever_the_seed(tmp_path, seed):
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    _axes_input_model(src)
    proc = subprocess.run([sys.executable, "-m", "rewriter", "fold", src, "-o", out, "--verify", "--seed", str(seed)],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "'axes' gives node 'rp' (ReduceProd)" in proc.stderr and proc.stderr.rstrip().endswith(")")
    assert not os.path.exists(out)


def test_verify_tolerances_input_shape_and_seed(tmp_path, capsys):
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["y"], name="rp", axes=[1], keepdims=0)], "g",
                              [helper.make_tensor_value_info("x", F, ["batch", "n"])],
                              [helper.make_tensor_value_info("y", F, ["batch"])])
    src = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    out = str(tmp_path / "o.onnx")
    rc, stdout, err = _run(["convert", src, "--opset", "18", "-o", out, "--verify", "--seed", "5", "--rtol", "0",
                            "--atol", "0", "--input-shape", "x:3,7", "--json"], capsys)
    assert rc == 0, err
    doc = json.loads(stdout)
    numerics = doc["verification"]["numerics"]
    assert numerics["seed"] == 5 and numerics["outputs"][0]["tolerance"] == "rtol=0, atol=0"
    rc, _, err = _run(["convert", src, "--opset", "18", "-o", out, "--verify", "--input-shape", "z:3"], capsys)
    assert rc == 2 and "no graph input 'z'" in err


def test_int_overflow_wrap_verify_failure_names_ort_saturation(tmp_path, capsys):
    big = numpy_helper.from_array(np.array([65536, 65536], np.int32), "big")
    graph = helper.make_graph([helper.make_node("ReduceProd", ["big"], ["p"], name="rp", keepdims=0),
                               helper.make_node("Add", ["x", "p"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT32, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [])], [big])
    src = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    rc, _, err = _run(["fold", src, "-o", str(tmp_path / "o.onnx"), "--int-overflow", "wrap", "--verify"], capsys)
    assert rc == 1
    assert "integers differ" in err and "ONNX Runtime saturates" in err and "--int-overflow saturate" in err
    rc, stdout, err = _run(["fold", src, "-o", str(tmp_path / "o.onnx")], capsys)
    assert rc == 0 and "--int-overflow wrap or saturate folds it anyway" in stdout + err
    assert "int_overflow='wrap'" not in stdout + err


# ---------------------------------------------------------------- output files

def test_output_onto_a_read_only_file_is_refused_and_left_untouched(tmp_path, capsys):
    out = tmp_path / "o.onnx"
    out.write_bytes(b"precious")
    out.chmod(0o444)
    rc, _, err = _run(["convert", "models/mixed_opset13.onnx", "--opset", "18", "-o", str(out)], capsys)
    assert rc == 2 and "read-only" in err and err.count("\n") == 1
    assert out.read_bytes() == b"precious" and (out.stat().st_mode & 0o777) == 0o444


def test_output_onto_a_symlink_writes_through_the_link(tmp_path, capsys):
    target = tmp_path / "real" / "target.onnx"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    rc, _, err = _run(["convert", "models/mixed_opset13.onnx", "--opset", "18", "-o", str(link)], capsys)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    onnx.checker.check_model(str(target), full_check=True)
    assert onnx.load(str(target)).opset_import[0].version == 18


def test_dash_output_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = _run(["convert", str(MODELS / "mixed_opset13.onnx"), "--opset", "18", "-o", "-"], capsys)
    assert rc == 2 and "-o -" in err
    assert not (tmp_path / "-").exists()


def test_external_data_size_counts_and_layout_kept(tmp_path, capsys):
    src = _foldable_ext(tmp_path)
    out = str(tmp_path / "o.onnx")
    rc, stdout, err = _run(["fold", src, "-o", out, "--json"], capsys)
    assert rc == 0, err
    doc = json.loads(stdout)
    before = os.path.getsize(src) + os.path.getsize(src + ".data")
    assert doc["before"]["size_bytes"] == before
    assert doc["after"]["size_bytes"] == os.path.getsize(out) + os.path.getsize(out + ".data")
    # the folded value (2 KiB) joins the input's external data instead of going inline
    loaded = onnx.load(out, load_external_data=False)
    assert [t.data_location for t in loaded.graph.initializer] == [TensorProto.EXTERNAL]
    x = np.linspace(1, 2, 512, dtype=np.float32)
    np.testing.assert_allclose(_ort(out, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-6)


def test_in_place_run_removes_the_data_file_it_no_longer_uses(tmp_path, capsys):
    src = _foldable_ext(tmp_path, data_name="weights.bin")
    x = np.linspace(1, 2, 512, dtype=np.float32)
    expected = _ort(src, {"x": x})[0]
    rc, _, err = _run(["fold", src, "-o", src], capsys)
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fold.onnx", "fold.onnx.data"]
    np.testing.assert_allclose(_ort(src, {"x": x})[0], expected, rtol=1e-6)
    rc, _, err = _run(["fold", src, "-o", src, "--external-data", "never"], capsys)
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fold.onnx"]


def test_directory_mode_into_a_read_only_parent_is_one_error_line(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.onnx").write_bytes(open("models/mixed_opset13.onnx", "rb").read())
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        # as root the directory is writable whatever its mode: make creation fail another way
        blocker = parent / "out"
        if os.access(parent, os.W_OK):
            parent.chmod(0o755)
            blocker.write_bytes(b"")  # a file where the directory's parent should be
            target = blocker / "sub"
        else:
            target = parent / "out"
        proc = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--opset", "18", "-o",
                               str(target)], capture_output=True, text=True)
    finally:
        parent.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_in_directory_mode_says_how_many_files_completed(tmp_path, jobs):
    src = tmp_path / "src"
    src.mkdir()
    data = open("models/mixed_opset13.onnx", "rb").read()
    for i in range(300):
        (src / f"m{i:03d}.onnx").write_bytes(data)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "rewriter", "convert", str(src), "--opset", "18", "-o", str(out),
                             "-j", jobs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and len(list(out.iterdir())) >= 3):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: "), err
    completed = int(lines[0].split("interrupted: ")[1].split(" of ")[0])
    written = [p for p in out.iterdir() if p.suffix == ".onnx"]
    assert completed == len(written) and 0 < completed < 300
    assert not [p for p in out.iterdir() if p.name.startswith(".rewriter-")]
    for p in written:
        onnx.checker.check_model(str(p))


# ---------------------------------------------------------------- conventions

def test_version_flag_and_package_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"rewriter {version('rewriter')}" == f"rewriter {rewriter.__version__}"


def test_opset_latest(tmp_path, capsys):
    out = str(tmp_path / "o.onnx")
    rc, _, err = _run(["convert", "models/mixed_opset13.onnx", "--opset", "latest", "-o", out], capsys)
    if rc == 2 and "block" in err:  # a conversion the engine refuses is refused the same way for N
        pytest.skip(err)
    assert rc == 0, err
    assert onnx.load(out).opset_import[0].version == onnx.defs.onnx_opset_version()


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_quiet_before_or_after_the_command(tmp_path, where):
    out = str(tmp_path / "o.onnx")
    base = ["fold", "models/foldable_opset13.onnx", "-o", out]
    for flag in ("-v", "-q"):
        argv = [flag, *base] if where == "before" else [*base, flag]
        proc = subprocess.run([sys.executable, "-m", "rewriter", *argv], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        if flag == "-v":
            assert "info: " in proc.stderr  # INFO logs of rewriter.*
        else:
            assert proc.stdout.count("\n") == 1 and "folded 2 ReduceProd" in proc.stdout


@pytest.mark.parametrize("argv, fragment", [
    (["--verify", "--no-verify"], "contradict"),
    (["--seed", "3"], "--verify"),
    (["--rtol", "0.1"], "--verify"),
    (["-j", "2"], "-j"),
    (["-v", "-q"], "not allowed with"),
])
def test_flags_that_make_no_sense_together_are_refused(tmp_path, capsys, argv, fragment):
    out = tmp_path / "o.onnx"
    rc, _, err = _run(["fold", "models/foldable_opset13.onnx", "-o", str(out), *argv], capsys)
    assert rc == 2 and fragment in err and err.count("\n") == 1, err
    assert not out.exists()


def test_summary_is_a_before_after_table(tmp_path, capsys):
    rc, stdout, err = _run(["fold", "models/foldable_opset13.onnx", "-o", str(tmp_path / "o.onnx")], capsys)
    assert rc == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in stdout.splitlines() if line.startswith("  ") and
            len(line.split()) >= 3}
    assert rows["ReduceProd"][:2] == ["2", "0"] and rows["Shape"][:2] == ["1", "0"]
    assert rows["opset"][:2] == ["13", "13"] and rows["IR"][:3] == ["version", "7", "7"] and "size" in rows
    assert any(line.split()[0] == "time" for line in stdout.splitlines() if line.startswith("  "))


@pytest.mark.parametrize("command", ["convert", "fold", "optimize"])
def test_json_is_one_object_with_changes_verification_and_timings(tmp_path, capsys, command):
    out = str(tmp_path / "o.onnx")
    argv = [command, "models/foldable_opset13.onnx", "-o", out, "--json", "--verify"]
    argv += ["--opset", "18"] if command == "convert" else []
    rc, stdout, err = _run(argv, capsys)
    assert rc == 0, err
    doc = json.loads(stdout)  # exactly one JSON document, nothing else on stdout
    assert doc["ok"] is True and doc["command"] == command and doc["output"] == out
    assert doc["before"]["ops"]["ReduceProd"] == 2 and "size_bytes" in doc["after"]
    assert doc["timings"]["total_s"] > 0 and doc["changes"]
    assert doc["verification"]["numerics"]


@pytest.mark.parametrize("command", ["check", "convert", "fold"])
def test_json_on_bad_input_is_a_json_error_and_exit_2(tmp_path, capsys, command):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    argv = [command, str(bad), "--json"] + ([] if command == "check" else ["-o", str(tmp_path / "o.onnx")])
    argv += ["--opset", "18"] if command == "convert" else []
    rc, stdout, err = _run(argv, capsys)
    assert rc == 2 and err.startswith("error: ")
    doc = json.loads(stdout)
    assert doc["ok"] is False and doc["exit_status"] == 2 and "not an ONNX model" in doc["error"]


def test_check_help_has_description_and_epilog(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    text = capsys.readouterr().out
    assert "strict shape inference" in text and "Exit status" in text


@pytest.mark.parametrize("command", ["convert", "check"])
def test_target_help_names_every_runtime_the_package_has_data_for(command, capsys):
    """Each release table shipped in rewriter/targets/data is named in --target's help."""
    import pathlib
    import re

    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    data = pathlib.Path(cli.__file__).resolve().parents[1] / "targets" / "data"
    runtimes = {f.stem for f in data.glob("*.json") if "_" not in f.stem}  # (not onnxruntime_half's tables)
    assert {"onnxruntime", "tensorrt", "openvino", "tract", "tvm", "litert"} <= runtimes
    for runtime in runtimes:
        assert re.search(rf"\b{runtime}(==|\b)", text), runtime


def test_check_accepts_a_directory(tmp_path, capsys):
    d = tmp_path / "models"
    d.mkdir()
    for name in ("mixed_opset13.onnx", "foldable_opset13.onnx"):
        (d / name).write_bytes(open(f"models/{name}", "rb").read())
    rc, stdout, err = _run(["check", str(d)], capsys)
    assert rc == 0, err
    assert "2 of 2 file(s) succeeded" in stdout


def test_an_input_problem_is_reported_as_the_inputs_in_every_command(tmp_path, capsys):
    """A declared type without a shape field fails onnx.checker: every command says the input is
    invalid (not 'the converted model'), and check no longer says OK."""
    x = onnx.ValueInfoProto(name="x")
    x.type.tensor_type.elem_type = F
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [helper.make_tensor_value_info("y", F, [2])])
    src = str(tmp_path / "noshape.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    with pytest.raises(onnx.checker.ValidationError):  # the oracle agrees it is invalid
        onnx.checker.check_model(src)
    out = str(tmp_path / "o.onnx")
    for argv in (["convert", src, "--opset", "13", "-o", out], ["fold", src, "-o", out],
                 ["optimize", src, "-o", out], ["check", src]):
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and "the input is not a valid ONNX model" in err and "'shape'" in err, (argv, err)
        assert "converted model" not in err
    rc, _, err = _run(["fold", src, "-o", out, "--allow-invalid-input"], capsys)
    assert rc == 0 and "warning: " in err and "--allow-invalid-input" in err
    # convert holds every result to the checker: even allowed in, the input's problem is named as its own
    rc, _, err = _run(["convert", src, "--opset", "14", "-o", str(tmp_path / "c.onnx"), "--allow-invalid-input"],
                      capsys)
    assert rc == 2 and "the input is not a valid ONNX model" in err.splitlines()[-1]
    assert "converted model" not in err and not (tmp_path / "c.onnx").exists()


def test_a_declared_shape_the_input_gets_wrong_is_named_when_folding_moves_it(tmp_path, capsys):
    """The input declares output 'cp' as [2] but ReduceProd gives [3]: folding turns the node
    into an initializer and ONNX's inference then fails elsewhere. Nothing is written (the result
    fails strict inference), and the message points at the input's own problem."""
    c = numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "c")
    graph = helper.make_graph([helper.make_node("ReduceProd", ["c"], ["cp"], name="rp", axes=[0], keepdims=0),
                               helper.make_node("Identity", ["x"], ["y"], name="id")], "g",
                              [helper.make_tensor_value_info("x", F, [2])],
                              [helper.make_tensor_value_info("y", F, [2]), helper.make_tensor_value_info("cp", F, [2])],
                              [c])
    src = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    with pytest.raises(Exception):  # the oracle: ONNX's strict inference refuses the input itself
        onnx.shape_inference.infer_shapes(onnx.load(src), strict_mode=True)
    rc, _, err = _run(["fold", src, "-o", str(tmp_path / "o.onnx")], capsys)
    assert rc == 1 and not (tmp_path / "o.onnx").exists()
    line = [ln for ln in err.splitlines() if ln.startswith("error:")][0]
    assert "the input has shape problems too" in line and "node 'rp' (ReduceProd)" in line


def test_onnx_runtime_telemetry_is_off_unless_asked_for(tmp_path):
    code = ("import os, sys; from rewriter.cli.main import main; main(['check', 'models/mixed_opset13.onnx', '-q']);"
            "print(os.environ.get('ORT_DISABLE_TELEMETRY'))")
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    assert out.strip().splitlines()[-1] == "1"
    env["ORT_DISABLE_TELEMETRY"] = "0"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    assert out.strip().splitlines()[-1] == "0"


def test_an_output_directory_that_is_not_writable_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from rewriter.io import save as save_module

    real_access = os.access
    locked = str(tmp_path / "locked")
    os.mkdir(locked)
    monkeypatch.setattr(save_module.os, "access",
                        lambda p, mode: False if os.path.abspath(p) == locked else real_access(p, mode))
    from rewriter.convert import for_target

    called = []
    monkeypatch.setattr(for_target, "convert_model", lambda *a, **k: called.append(1))
    rc, _, err = _run(["convert", "models/mixed_opset13.onnx", "--opset", "18", "-o", os.path.join(locked, "o.onnx")],
                      capsys)
    assert rc == 2 and "is not writable; refused before any work" in err and not called
