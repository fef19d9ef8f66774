"""Messages that said something other than what happened (issue 39 §2).

- bfloat16 that changes nothing: refused, naming the ``--opset`` whose schemas give the nodes a
  bfloat16 type; when some nodes do run in it, the summary names the opset for the rest.
- ``--verify`` where no engine could run the result (ONNX Runtime lacks the half kernel,
  onnx.reference cannot run the float32 source): "not verified", not a mismatch.
- ``check DIR``: a failing file's line says why; ``check DIR -j N`` works.
- ``--calibrate`` failing: one line, no ONNX Runtime log line, ``--calibration-data`` suggested.
- ``--target onnxruntime==1.28``: the plan and the summary say whose data it uses; TensorRT's
  unchecked restrictions are listed only for ops the model has; no "clamped to float16's range"
  in a bfloat16 summary.

Oracles: ``onnx.defs`` (which opset first gives an op bfloat16), ONNX Runtime and onnx.reference
run directly on the files, the file system, the runtime data's own release fields.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.defs
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.cli import main
from rewriter.errors import RewriterError
from rewriter.verify.numerics import compare as numerics_compare
from rewriter.verify.numerics import verify_numerics


def _model(nodes, inputs, outputs, inits=(), opset=13, ir=8, extra=()) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                         [h.make_tensor_value_info(*o) for o in outputs],
                         [nh.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *extra], ir_version=ir)


def _save(tmp_path, model, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _first_bfloat16(op: str, after: int) -> int:
    """The first opset after ``after`` whose schema of ``op`` lets its type T be bfloat16 (onnx.defs)."""
    for version in range(after + 1, onnx.defs.onnx_opset_version() + 1):
        schema = onnx.defs.get_schema(op, version)
        if any(c.type_param_str == "T" and "tensor(bfloat16)" in c.allowed_type_strs for c in schema.type_constraints):
            return version
    raise AssertionError(f"no opset gives {op} bfloat16")


W4 = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


# ---------------------------------------------------------------- bfloat16 that changes nothing

def _add_relu(opset: int) -> onnx.ModelProto:
    return _model([h.make_node("Add", ["x", "w"], ["a"]), h.make_node("Relu", ["a"], ["y"])],
                  [("x", T.FLOAT, [2, 4])], [("y", T.FLOAT, [2, 4])], {"w": W4}, opset=opset, ir=6)


def test_bfloat16_that_would_change_nothing_is_refused_naming_the_opset(tmp_path, capsys):
    opset = max(_first_bfloat16("Add", 11), _first_bfloat16("Relu", 11))
    src, out = _save(tmp_path, _add_relu(11)), str(tmp_path / "o.onnx")
    rc, _, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "-o", out)
    assert rc == 2 and not os.path.exists(out), err
    assert err.startswith("error: --dtype bfloat16 would change nothing") and err.count("\n") == 1
    assert f"--opset {opset} --dtype bfloat16" in err and "at opset 11" in err
    by_opset: dict = {}
    for op in ("Add", "Relu"):
        by_opset.setdefault(_first_bfloat16(op, 11), []).append(op)
    assert "(" + "; ".join(f"{', '.join(ops)} from opset {v}" for v, ops in sorted(by_opset.items())) + ")" in err
    with pytest.raises(RewriterError, match=f"opset={opset}"):  # the API, through the same pipeline
        rewriter.convert_precision(_add_relu(11), "bfloat16")
    # the opset named does it: every node in bfloat16, the weight stored in it
    rc, stdout, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "--opset", str(opset), "-o", out)
    assert rc == 0, err
    assert "2 node(s) run in bfloat16" in stdout
    assert {t.data_type for t in onnx.load(out).graph.initializer} == {T.BFLOAT16}


def _conv_matmul() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    return _model([h.make_node("Conv", ["x", "k"], ["c"]), h.make_node("Flatten", ["c"], ["f"]),
                   h.make_node("MatMul", ["f", "w"], ["y"])],
                  [("x", T.FLOAT, [1, 2, 4, 4])], [("y", T.FLOAT, [1, 4])],
                  {"k": rng.standard_normal((2, 2, 1, 1)).astype(np.float32),
                   "w": rng.standard_normal((32, 4)).astype(np.float32)}, opset=13)


def test_a_bfloat16_summary_names_the_opset_for_the_nodes_kept_for_want_of_the_type(tmp_path, capsys):
    src = _save(tmp_path, _conv_matmul())
    conv = _first_bfloat16("Conv", 13)
    rc, out, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "-o", str(tmp_path / "b.onnx"))
    assert rc == 0, err
    assert f"--opset {conv} gives bfloat16 types to the 1 node(s) kept float32 for want of one (Conv from opset " \
           f"{conv})" in out
    assert "clamped to float16's range" not in out  # bfloat16 has float32's range: nothing is clamped
    rc, out, err = _run(capsys, "convert", src, "--dtype", "float16", "-o", str(tmp_path / "h.onnx"))
    assert rc == 0, err
    assert "clamped to float16's range 0" in out and "gives float16 types" not in out


# ---------------------------------------------------------------- --verify: no engine could run the result

def _gelu_after_add() -> onnx.ModelProto:
    """Add (bfloat16 in the result: ONNX Runtime's CPU provider has no kernel) then com.microsoft's
    Gelu (stays float32; onnx.reference does not know it, so it cannot run the source)."""
    return _model([h.make_node("Add", ["x", "w"], ["a"]), h.make_node("Gelu", ["a"], ["y"], domain="com.microsoft")],
                  [("x", T.FLOAT, [2, 4])], [("y", T.FLOAT, [2, 4])], {"w": W4}, opset=17,
                  extra=[h.make_opsetid("com.microsoft", 1)])


def test_verify_where_no_engine_can_run_the_result_is_not_verified_not_a_mismatch(tmp_path, capsys):
    from onnx.reference import ReferenceEvaluator

    src, out = _save(tmp_path, _gelu_after_add()), str(tmp_path / "o.onnx")
    x = {"x": np.ones((2, 4), np.float32)}
    ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, x)  # the premises: ORT runs the source,
    with pytest.raises(Exception):
        ReferenceEvaluator(src).run(None, x)  # onnx.reference does not
    rc, stdout, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "--verify", "-o", out)
    assert rc == 0, err
    with pytest.raises(Exception, match="NOT_IMPLEMENTED"):  # ...nor does ORT run the result
        ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    assert "warning: numerical check not verified (written all the same): no engine could run the rewritten " \
           "model" in err and "numerical verification failed" not in err
    assert "NOT VERIFIED: no engine could run the rewritten model" in stdout
    rc, stdout, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "--verify", "--json", "-o", out)
    numerics = json.loads(stdout)["verification"]["numerics"]
    assert rc == 0 and numerics["status"] == "not verified" and numerics["ok"] is False
    assert "NOT_IMPLEMENTED" in numerics["unrunnable"] and numerics["error"] is None


def test_verify_where_onnx_reference_runs_both_compares_them(tmp_path, capsys):
    """The same situation for ONNX Runtime, but onnx.reference runs source and result: compared (one rule)."""
    src, out = _save(tmp_path, _add_relu(14)), str(tmp_path / "o.onnx")
    rc, stdout, err = _run(capsys, "convert", src, "--dtype", "bfloat16", "--verify", "--json", "-o", out)
    numerics = json.loads(stdout)["verification"]["numerics"]
    assert rc == 0 and numerics["status"] == "ok" and numerics["backend_rewritten"] == "reference", err
    assert "NOT_IMPLEMENTED" in numerics["fallback"]


class _Engines:
    """Both engines stood in for: what each does with the source (a) and the result (b)."""

    def __init__(self, monkeypatch, a, b, ort_b, ref_a, ref_b):
        self.models = {}
        good = [np.ones((2, 4), np.float32)]

        def engine(outcomes):
            def run(model, feeds):
                what = outcomes[self.models[id(model)] if id(model) in self.models else "a"]
                if isinstance(what, str):
                    raise RuntimeError(what)
                return good

            return run

        monkeypatch.setitem(numerics_compare._BACKENDS, "onnxruntime", engine({"a": None, "b": ort_b}))
        monkeypatch.setitem(numerics_compare._BACKENDS, "reference", engine({"a": ref_a, "b": ref_b}))
        self.models = {id(a): "a", id(b): "b"}


@pytest.mark.parametrize("ort_b, ref_a, verdict", [
    ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Add(14)", "unknown op",
     "not verified"),
    # onnx.reference runs the source but not the result: that is evidence against the result
    ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Add(14)", None, "mismatch"),
    # ONNX Runtime refuses the result for another reason than a missing kernel
    ("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : shape mismatch", "unknown op", "mismatch"),
])
def test_the_not_verified_rule_for_a_result_no_engine_runs(monkeypatch, ort_b, ref_a, verdict):
    a = _add_relu(14)
    b = onnx.ModelProto()
    b.CopyFrom(a)
    _Engines(monkeypatch, a, b, ort_b, ref_a, "reference cannot run it")
    report = verify_numerics(a, b, input_shapes={"x": [2, 4]}, rel_l2=1e-2)
    assert report.status == verdict
    assert report.failed == (verdict == "mismatch")


# ---------------------------------------------------------------- check DIR

def test_check_directory_says_why_a_file_fails_and_takes_jobs(tmp_path, capsys):
    src = tmp_path / "src" / "audio"
    src.mkdir(parents=True)
    relu = _model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])], ir=10)
    onnx.save(relu, str(src / "new.onnx"))
    old = _model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])], ir=7)
    onnx.save(old, str(src / "old.onnx"))
    root = str(tmp_path / "src")
    rc, out, err = _run(capsys, "check", root, "--target", "onnxruntime==1.15")
    assert rc == 1, err
    lines = out.splitlines()
    assert "FAIL  audio/new.onnx: onnxruntime 1.15 cannot load it as it is: IR version 10 (it loads up to 9)" in lines
    assert any(ln.startswith("ok    audio/old.onnx: ") for ln in lines), out
    rc, out, _ = _run(capsys, "check", root, "--target", "onnxruntime==1.15", "--json")
    errors = {f["file"]: f["error"] for f in json.loads(out)["files"]}
    assert errors == {"audio/new.onnx": "onnxruntime 1.15 cannot load it as it is: IR version 10 (it loads up to 9)",
                      "audio/old.onnx": None}
    rc, out, err = _run(capsys, "check", root, "-j", "2")
    assert rc == 0, err
    assert out.splitlines()[-1] == "check: 2 of 2 file(s) succeeded, 0 failed"


# ---------------------------------------------------------------- --calibrate, --target's data

def test_a_failing_calibration_is_one_line_that_suggests_real_inputs(tmp_path):
    """Random indices (from [-3, 3]) are out of range for a Gather over 2 rows: ONNX Runtime fails."""
    model = _model([h.make_node("Gather", ["w", "i"], ["g"]), h.make_node("Add", ["g", "x"], ["y"])],
                   [("x", T.FLOAT, [16, 4]), ("i", T.INT64, [16])], [("y", T.FLOAT, [16, 4])], {"w": W4})
    src = _save(tmp_path, model)
    proc = subprocess.run([sys.executable, "-m", "rewriter", "convert", src, "--dtype", "float16", "--calibrate",
                           "-o", str(tmp_path / "o.onnx")], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "\x1b[" not in proc.stderr, proc.stderr  # no ORT log line
    assert proc.stderr.startswith("error: --calibrate: ONNX Runtime cannot run the float32 model: ")
    assert "--calibration-data NPZ" in proc.stderr


def test_a_release_between_two_known_ones_says_whose_data_in_the_plan_and_the_summary(tmp_path, capsys):
    from rewriter.targets import parse_target

    src = _save(tmp_path, _add_relu(13))
    data = parse_target("onnxruntime==1.28").data_release
    assert data and data != "onnxruntime 1.28"  # the premise: 1.28 is not in the data
    rc, out, err = _run(capsys, "convert", src, "--target", "onnxruntime==1.28", "--plan")
    assert rc == 0 and f"uses the data of {data}" in out, out + err
    rc, out, err = _run(capsys, "convert", src, "--target", "onnxruntime==1.28", "-o", str(tmp_path / "o.onnx"))
    assert rc == 0 and f"uses the data of {data}" in out, out + err
    rc, out, err = _run(capsys, "convert", src, "--target", parse_target("onnxruntime==1.28").data_release.replace(
        " ", "=="), "--plan")
    assert rc == 0 and "uses the data of" not in out  # a release the data knows uses its own


def test_tensorrt_lists_the_unchecked_restrictions_of_the_models_ops_only(tmp_path, capsys):
    from rewriter.targets import parse_target

    unchecked = sorted(parse_target("tensorrt==8.5").unchecked)
    assert "RandomUniformLike" in unchecked and len(unchecked) > 1  # the premise
    rc, out, err = _run(capsys, "convert", _save(tmp_path, _add_relu(13)), "--target", "tensorrt==8.5", "--plan")
    assert rc == 0 and "restrictions of tensorrt 8.5" in out, out + err
    assert "not checked" not in out
    random = _model([h.make_node("RandomUniformLike", ["x"], ["r"]), h.make_node("Add", ["r", "x"], ["y"])],
                    [("x", T.FLOAT, [2, 4])], [("y", T.FLOAT, [2, 4])])
    rc, out, err = _run(capsys, "convert", _save(tmp_path, random, "r.onnx"), "--target", "tensorrt==8.5", "--plan")
    assert rc == 0, out + err
    assert "not checkable statically, not checked: RandomUniformLike\n" in out
