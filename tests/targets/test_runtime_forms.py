"""Forms the measured releases need beyond op versions (rewriter/targets/runtime_forms.py): op
versions run only with constant inputs (``needs_constant``), element types refused
(``types_refused``), tract's named input dims.  The rules are checked without the runtimes; with
tract's venv (tools/runtime_venvs.py; skipped when absent) the converted models run there."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import RewriterError
from rewriter.targets import parse_target
from rewriter.targets.runtime_forms import name_anonymous_dims
from tests.targets.runtime_runs import ROOT, run_in

DATA = ROOT / "rewriter" / "targets" / "data"


def _slice_model(starts: str) -> onnx.ModelProto:
    """y = x[s:] at opset 17 (Slice-13), the start given as ``starts``: "init" an initializer,
    "input" a graph input, "shape" computed from x's shape (Shape -> Slice of it -> Sub)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m"])
    inits = [numpy_helper.from_array(np.array([9], np.int64), "ends"),
             numpy_helper.from_array(np.array([0], np.int64), "axes")]
    inputs, nodes = [x], []
    if starts == "init":
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "starts"))
    elif starts == "input":
        inputs.append(helper.make_tensor_value_info("starts", TensorProto.INT64, [1]))
    else:
        inits.append(numpy_helper.from_array(np.array([3], np.int64), "three"))
        nodes += [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
                  helper.make_node("Sub", ["shape", "three"], ["starts"], name="sub")]
    nodes.append(helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="cut"))
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _string_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [3])
    y = helper.make_tensor_value_info("y", TensorProto.BOOL, [3])
    keys = numpy_helper.from_array(np.array(["a"], dtype=object), "key")
    model = helper.make_model(helper.make_graph([helper.make_node("Equal", ["x", "key"], ["y"], name="same")],
                                                "g", [x], [y], [keys]), opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


# ---------------------------------------------------------------- the data and the Target


def test_a_version_refused_only_with_fed_inputs_is_not_missing():
    """tract 0.23 refused every Slice-13 node test (starts/ends fed at run time) and ran them all
    with those inputs constant: the data lists it in both, and the target does not lack it."""
    entry = json.loads((DATA / "tract.json").read_text())["releases"]["0.23"]
    assert 13 in entry["missing"][""]["Slice"] and 13 in entry["needs_constant"][""]["Slice"]
    tract = parse_target("tract==0.23")
    assert not tract.lacks("", "Slice", 13)
    assert 13 in tract.needs_constant[""]["Slice"]
    # a version missing without that excuse still lacks; a wrong one too
    gone = next((op, vs[0]) for op, vs in entry["missing"][""].items() if op not in entry["needs_constant"][""])
    assert tract.lacks("", *gone)
    wrong_op, wrong_versions = next(iter(entry["wrong"][""].items()))
    assert tract.lacks("", wrong_op, wrong_versions[0])


@pytest.mark.parametrize("target", ["openvino==2026.4", "openvino==2024.6", "tract==0.23", "tvm==0.27"])
def test_every_measured_release_refuses_string_tensors(target):
    assert "string" in parse_target(target).types_refused
    assert "test_equal_string" in parse_target(target).types_refused["string"]


# ---------------------------------------------------------------- convert --target


@pytest.mark.parametrize("starts", ["init", "shape"])
def test_slice_with_constant_or_shape_computed_starts_converts_for_tract(starts):
    result = _convert(_slice_model(starts), "tract==0.23")
    assert [n.op_type for n in result.graph.node if n.name == "cut"] == ["Slice"]
    assert result.opset_import[0].version == 17  # kept: not taken down for Slice's sake


def _convert(model, target):
    from rewriter.convert.for_target import convert_for

    return convert_for(model, runtime=target)[0]


def test_slice_with_starts_fed_at_run_time_is_refused_for_tract_naming_the_node():
    with pytest.raises(RewriterError, match=r"node 'cut' \(Slice\).*only with its inputs after the first constant.*"
                                            r"'starts' is computed from a graph input"):
        _convert(_slice_model("input"), "tract==0.23")
    _convert(_slice_model("input"), "onnxruntime==1.20")  # ONNX Runtime takes it


def _conv_weight_input(default: bool) -> onnx.ModelProto:
    """A Conv whose weight is a graph input, with an initializer as its default or without one."""
    w = numpy_helper.from_array(np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w] if default else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def test_an_input_with_a_default_is_refused_naming_the_flag_that_freezes_it():
    """tract 0.23 runs Slice-13 only with constant starts: a starts that is a graph input with an
    initializer is named with --freeze-input-defaults, which then converts it."""
    import rewriter

    model = _slice_model("input")
    model.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "starts"))
    with pytest.raises(RewriterError, match=r"node 'cut' \(Slice\).*'starts' is computed from a graph input at run "
                                            r"time: 'starts' is a graph input; .*--freeze-input-defaults starts makes"):
        rewriter.convert_opset(model, target="tract==0.23")
    frozen = rewriter.convert_opset(model, target="tract==0.23", freeze_input_defaults=True)
    assert [i.name for i in frozen.graph.input] == ["x"]
    with pytest.raises(RewriterError) as e:
        rewriter.convert_opset(_slice_model("input"), target="tract==0.23")
    assert "'starts' is computed from a graph input at run time" in str(e.value)
    assert "--freeze-input-defaults" not in str(e.value)


def test_litert_takes_an_input_with_a_default_as_the_constant_onnx2tf_makes_it():
    """onnx2tf makes a graph input with an initializer a constant, so a Conv weight that is one
    (torch's keep_initializers_as_inputs) is converted for LiteRT with a note, and runs there as
    ONNX Runtime computes it with the default; a weight input without a default is refused."""
    import rewriter
    from rewriter.convert.for_target import convert_for

    model = _conv_weight_input(True)
    result, report = convert_for(model, runtime="litert==2.6")
    assert [i.name for i in result.graph.input] == ["x", "w"]
    assert any("litert 2.6: onnx2tf makes a graph input that has an initializer a constant" in n and "(w)" in n
               for n in report.target_notes)
    with pytest.raises(RewriterError, match=r"'w' is computed from a graph input at run time"):
        rewriter.convert_opset(_conv_weight_input(False), target="litert==2.6")
    with_bias = _conv_weight_input(True)  # a bias input without a default beside the weight with one
    with_bias.graph.node[0].input.append("b")
    with_bias.graph.input.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [4]))
    with pytest.raises(RewriterError, match=r"'b' is computed from a graph input at run time"):
        rewriter.convert_opset(with_bias, target="litert==2.6")
    assert not [n for n in convert_for(_slice_model("init"), runtime="tract==0.23")[1].target_notes
                if "has an initializer" in n]
    x = np.random.default_rng(8).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ran = run_in("litert", "2.6", result, {"x": x})
    assert ran["ok"], ran
    np.testing.assert_allclose(ran["values"][0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["openvino==2026.4", "tract==0.23", "tvm==0.27"])
def test_string_tensors_are_refused_naming_the_node(target):
    with pytest.raises(RewriterError, match=r"node 'same' \(Equal\).*'x' is a string tensor"):
        _convert(_string_model(), target)


def test_string_tensors_convert_for_onnxruntime():
    _convert(_string_model(), "onnxruntime==1.20")


def test_the_cli_refuses_before_writing(tmp_path):
    import sys

    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_string_model(), src)
    proc = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--target", "tract==0.23", "-o",
                           str(out)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 2 and "node 'same' (Equal)" in proc.stderr and not out.exists()


# ---------------------------------------------------------------- anonymous dims


def _dims(value):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
            for d in value.type.tensor_type.shape.dim]


def test_anonymous_input_dims_get_fresh_names_and_the_rest_stays():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, -1, "?", "n", 3, "a b"])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, "x_d0"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x, z], [y]))
    notes = name_anonymous_dims(model)
    got = _dims(model.graph.input[0])
    assert got[3:5] == ["n", 3]
    names = [got[i] for i in (0, 1, 2, 5)]
    assert names == ["x_d0_1", "x_d1", "x_d2", "x_d5"]  # x_d0 was taken by z: not shared
    assert _dims(model.graph.input[1]) == ["z_d0", "x_d0"]
    assert len(notes) == 2 and "x_d1" in notes[0]


def test_a_dim_of_zero_set_as_a_value_is_kept():
    """An empty past key given by --input-shape (1, 2, 0, 16): tract unifies a name there with
    nothing (llama's repeat_kv: 'Impossible to unify Val(5) with Add([Sym(..._d2), Val(5)])')."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 0, 16])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    assert model.graph.input[0].type.tensor_type.shape.dim[2].HasField("dim_value")
    assert name_anonymous_dims(model) == [] and _dims(model.graph.input[0]) == [1, 2, 0, 16]


def test_convert_for_tract_names_the_dims_and_not_for_others():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert _dims(_convert(model, "tract==0.23").graph.input[0]) == ["x_d0", 2]
    assert _dims(_convert(model, "openvino==2026.4").graph.input[0]) == [None, 2]
    assert _dims(model.graph.input[0]) == [None, 2]  # the argument is not changed


# ---------------------------------------------------------------- in tract (skipped without its venv)


def _tract(model: onnx.ModelProto, feeds: dict) -> dict:
    return run_in("tract", "0.23", model, feeds)


def test_tract_runs_what_convert_writes_and_refuses_the_input():
    """An input dim without a name: tract refuses the model as it is and runs the converted one;
    a Slice-13 with constant starts runs at opset 17; both match ONNX Runtime."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    inits = [numpy_helper.from_array(np.array([1], np.int64), n) for n in ("starts", "axes")] + \
        [numpy_helper.from_array(np.array([3], np.int64), "ends")]
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"], name="cut"),
         helper.make_node("Relu", ["s"], ["y"], name="r")], "g", [x], [y], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {"x": np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert not _tract(model, feeds)["ok"]
    result = _tract(_convert(model, "tract==0.23"), feeds)
    assert result["ok"], result
    np.testing.assert_array_equal(result["values"][0], want)


def test_the_probe_says_a_type_is_refused_only_when_every_case_on_it_was():
    import importlib.util
    import sys

    probe = sys.modules.get("runtime_probe")
    if probe is None:
        spec = importlib.util.spec_from_file_location("runtime_probe", ROOT / "tools" / "runtime_probe.py")
        probe = sys.modules["runtime_probe"] = importlib.util.module_from_spec(spec)  # (its dataclasses)
        sys.path.insert(0, str(ROOT / "tools"))
        try:
            spec.loader.exec_module(probe)
        except BaseException:
            del sys.modules["runtime_probe"]
            raise
        finally:
            sys.path.remove(str(ROOT / "tools"))
    row = {"kind": "node", "domain": "", "verdict": "refused", "detail": "load: unsupported src_prc: string"}
    raw = {"cases": {"test_equal_string": dict(row), "test_cast_FLOAT_to_STRING": dict(row),
                     "test_add": {**row, "verdict": "ok"}}}
    assert probe.types_refused(raw)["string"].startswith("2 of 2 node tests refused, e.g. test_cast_FLOAT_to_STRING")
    raw["cases"]["test_cast_FLOAT_to_STRING"]["const_inputs"] = "ok"  # runs with its inputs constant
    assert probe.types_refused(raw) == {}
    raw["cases"]["test_cast_FLOAT_to_STRING"] = {**row, "verdict": "ok"}
    assert probe.types_refused(raw) == {}


def test_an_op_the_conversion_can_write_otherwise_is_written_so_over_its_constant_form():
    """STFT-17 runs in OpenVINO 2026.4 and tract 0.23 only with its frame inputs constant (and the
    tests' static shapes); the project's decomposition runs with dynamic dims: it is preferred.
    Slice-13, which nothing else writes, keeps the constant form."""
    from rewriter.convert.for_target import expand_over_constant

    for name in ("openvino==2026.4", "tract==0.23"):
        target = parse_target(name)
        assert not target.lacks("", "STFT", 17)
        chosen = expand_over_constant(target)
        assert chosen.lacks("", "STFT", 17) and "STFT" not in chosen.needs_constant[""]
    tract = expand_over_constant(parse_target("tract==0.23"))
    assert not tract.lacks("", "Slice", 13) and 13 in tract.needs_constant[""]["Slice"]
