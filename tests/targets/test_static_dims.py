"""Forms a release refuses over symbolic dims (needs_static_dims, rewriter/targets/static_dims.py):
the data as tools/runtime_probe_symbolic.py recorded it, each form's recognizer on the probe's own
models (named with symbolic dims, not with static ones, never the controls), convert / check naming
the node, --input-shape lifting it, value_info symbols tract cannot unify cleared; and, in the
releases' venvs (skipped without them), that what convert writes runs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rewriter.convert import convert_for
from rewriter.convert.planner import ConversionBlocked
from rewriter.graph.inferred import LazyInference
from rewriter.graph.static_shapes import fix_shapes
from rewriter.targets import parse_target
from rewriter.targets.static_dims import (
    FORMS,
    clear_declared_symbols,
    dynamic_inputs,
    static_dims_blockers,
)
from tests.targets.runtime_runs import ROOT, run_in, tool

forms = tool("symbolic_forms")
RELEASES = {"tract": "0.23", "tvm": "0.27"}
CONTROLS = ["flatten_one_symbol", "reshape_shape_of", "constant_of_shape_symbols", "resize_symbolic"]


def _entry(runtime: str) -> dict:
    data = json.loads((ROOT / "rewriter" / "targets" / "data" / f"{runtime}.json").read_text())
    return data["releases"][RELEASES[runtime]]["needs_static_dims"]


def _static(model, feeds):
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fix_shapes(fixed, {k: list(v.shape) for k, v in feeds.items()})
    return fixed


def _blocked(model, target):
    return static_dims_blockers(model, target.needs_static_dims, target.name, LazyInference(model)())


@pytest.mark.parametrize("runtime", sorted(RELEASES))
def test_the_data_says_how_it_was_measured_and_every_needed_form_is_recognized(runtime):
    entry = _entry(runtime)
    assert entry["probe"]["command"].startswith("python tools/runtime_probe_symbolic.py")
    assert entry["probe"]["date"] and entry["probe"]["versions"][runtime]
    assert set(entry["forms"]) == set(forms.FORMS)
    for name in entry["needed"]:
        form = entry["forms"][name]
        assert form["symbolic"] != "match" and form["static"] == "match"
        assert FORMS[name][0] == form["op"] == forms.FORMS[name][0]
    target = parse_target(f"{runtime}=={RELEASES[runtime]}")
    assert set(target.needs_static_dims) == set(entry["needed"])


def test_tract_needs_static_dims_for_the_forms_real_models_showed():
    assert {"flatten_two_symbols", "reshape_shape_through_cast", "expand_shape_through_cast",
            "gru_shape_seq_lens", "concat_resized"} <= set(parse_target("tract==0.23").needs_static_dims)
    assert set(parse_target("tvm==0.27").needs_static_dims) == {"concat_resized", "add_resized", "pad_pads_of_shape",
                                                                "concat_symbol_meets_value", "sub_of_shifted_slices"}
    assert not parse_target("openvino==2026.4").needs_static_dims


@pytest.mark.parametrize("runtime", sorted(RELEASES))
def test_each_needed_form_is_named_with_symbolic_dims_and_not_with_static_ones(runtime):
    target = parse_target(f"{runtime}=={RELEASES[runtime]}")
    for name in target.needs_static_dims:
        model, feeds = forms.FORMS[name][1]()
        for i, node in enumerate(model.graph.node):
            node.name = f"n{i}"
        found = _blocked(model, target)
        assert [b[1] for b in found] == [FORMS[name][0]], name
        assert [b[4] for b in found] == [n.name for n in model.graph.node if n.op_type == FORMS[name][0]][:1], name
        assert "--input-shape" in found[0][3] and target.name in found[0][3]
        assert _blocked(_static(model, feeds), target) == [], name


def test_the_controls_and_the_forms_a_release_runs_are_not_named():
    tract, tvm = parse_target("tract==0.23"), parse_target("tvm==0.27")
    for name in CONTROLS + ["add_resized"]:
        assert _blocked(forms.FORMS[name][1]()[0], tract) == [], name
    for name in CONTROLS + ["flatten_two_symbols", "expand_shape_through_cast"]:
        assert _blocked(forms.FORMS[name][1]()[0], tvm) == [], name


def test_a_flatten_of_a_single_symbol_and_a_static_model_are_not_named():
    target = parse_target("tract==0.23")
    model, _ = forms.flatten_one_symbol()
    assert _blocked(model, target) == []
    model, feeds = forms.flatten_two_symbols()
    assert dynamic_inputs(model) == ["'x' [batch, seq, 4]"]
    assert dynamic_inputs(_static(model, feeds)) == []


def test_gru_sequence_lens_fed_from_an_input_is_not_a_static_dims_matter():
    model, _ = forms.gru_shape_seq_lens()
    gru = model.graph.node[-1]
    model.graph.input.append(onnx.helper.make_tensor_value_info("lens_in", onnx.TensorProto.INT32, ["batch"]))
    gru.input[4] = "lens_in"
    assert _blocked(model, parse_target("tract==0.23")) == []


def test_convert_names_the_node_and_input_shape_lifts_it():
    model, feeds = forms.concat_resized()
    concat = next(n for n in model.graph.node if n.op_type == "Concat")
    concat.name = "concat"
    _, report = convert_for(model, runtime="tract==0.23", plan_only=True)
    lines = [b.line() for b in report.blockers]
    assert len(lines) == 1 and "node 'concat' (Concat)" in lines[0] and "needs static dims" in lines[0]
    dims = ", ".join(d.dim_param or str(d.dim_value) for d in model.graph.input[0].type.tensor_type.shape.dim)
    assert f"--input-shape NAME:DIMS for 'x' [{dims}]" in lines[0]
    with pytest.raises(ConversionBlocked):
        convert_for(model, runtime="tract==0.23")
    result, _ = convert_for(_static(model, feeds), runtime="tract==0.23")
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ort.InferenceSession(result.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)


def test_cli_check_and_convert(tmp_path):
    model, _ = forms.reshape_shape_through_cast()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    run = lambda *a: subprocess.run([sys.executable, "-m", "rewriter", *a], capture_output=True, text=True,
                                    cwd=tmp_path, check=False)
    check = run("check", str(path), "--target", "tract==0.23")  # the model as it is; convert reads it in int64
    assert "needs static dims" in check.stdout + check.stderr and "[convert may rewrite it]" in check.stdout + check.stderr
    done = run("convert", str(path), "--target", "tract==0.23", "-o", str(tmp_path / "o.onnx"))
    assert done.returncode == 0 and "shape chain(s) computed in int32" in done.stdout + done.stderr, done.stderr
    cast_through_float = onnx.load(path)  # a dim through a float: not a move, still named
    next(n for n in cast_through_float.graph.node if n.op_type == "Cast").attribute[0].i = onnx.TensorProto.FLOAT
    onnx.save(cast_through_float, tmp_path / "f.onnx")
    refused = run("convert", str(tmp_path / "f.onnx"), "--target", "tract==0.23", "-o", str(tmp_path / "g.onnx"))
    assert refused.returncode == 2 and "needs static dims" in refused.stderr and not (tmp_path / "g.onnx").exists()
    done = run("convert", str(tmp_path / "f.onnx"), "--target", "tract==0.23", "--input-shape", "x:2,3,6,7", "-o",
               str(tmp_path / "g.onnx"))
    assert done.returncode == 0, done.stderr
    # TVM 0.27 refuses the form static too: named with symbolic dims; with static ones the shape is folded
    tvm = run("convert", str(path), "--target", "tvm==0.27", "-o", str(tmp_path / "v.onnx"))
    assert tvm.returncode == 2 and "with symbolic and with static dims alike" in tvm.stderr, tvm.stderr
    assert "Reshape" in tvm.stderr and not (tmp_path / "v.onnx").exists()
    tvm = run("convert", str(path), "--target", "tvm==0.27", "--input-shape", "x:2,3,6,7", "-o", str(tmp_path / "v.onnx"))
    assert tvm.returncode == 0 and "shape chains folded" in tvm.stdout + tvm.stderr, tvm.stderr
    folded = onnx.load(tmp_path / "v.onnx")
    reshape = next(n for n in folded.graph.node if n.op_type == "Reshape")
    assert reshape.input[1] in {t.name for t in folded.graph.initializer}
    check = run("check", str(path), "--target", "tvm==0.27")
    assert "with symbolic and with static dims alike" in check.stdout + check.stderr
    assert "give --input-shape NAME:DIMS for 'x'" in check.stdout and "convert folds it into one" in check.stdout
    assert check.stdout.split("would ")[1].startswith("not help"), check.stdout
    # check with the dims convert is given: what the release makes of that model, and the fold planned
    check = run("check", str(path), "--target", "tvm==0.27", "--input-shape", "x:2,3,6,7", "--json")
    doc = json.loads(check.stdout)
    assert check.returncode == 1 and doc["static_shapes"][0] == "input 'x' fixed to [2, 3, 6, 7]"
    assert doc["target"]["convert"]["ok"] and any("shape chains folded" in line for line in doc["target"]["convert"]["lines"])
    assert not any("give --input-shape" in line for line in doc["target"]["blockers"])
    check = run("check", str(path), "--target", "tvm==0.27", "--input-shape", "y:2")
    assert check.returncode == 2 and "no graph input 'y'" in check.stderr


def test_a_form_refused_static_too_is_named_only_where_measured_so():
    model, _ = forms.reshape_shape_through_cast()
    tvm = parse_target("tvm==0.27")
    assert "reshape_shape_through_cast" in tvm.refused_forms
    found = static_dims_blockers(model, {}, tvm.name, LazyInference(model)(), tvm.refused_forms)
    assert [b[1] for b in found] == ["Reshape"] and "alike" in found[0][3]
    tract = parse_target("tract==0.23")
    assert not set(tract.refused_forms) & {"reshape_shape_through_cast", "expand_shape_through_cast"}
    plain, _ = forms.reshape_shape_of()  # a shape read from a Shape without a Cast: TVM runs it (measured)
    assert static_dims_blockers(plain, {}, tvm.name, LazyInference(plain)(), tvm.refused_forms) == []


def test_value_info_symbols_are_cleared_for_tract_and_outputs_keep_the_inputs():
    model, _ = forms.conv_value_info_symbol()
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, ["n", 2, 4, 4]))
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "n"
    model.graph.output.append(onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, ["other", 2]))
    notes = clear_declared_symbols(model)
    dims = {v.name: [d.dim_param for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info}
    assert dims == {"c": ["", "", "", ""], "z": ["", "", "", ""]}
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim][0] == "n"
    assert [d.dim_param for d in model.graph.output[1].type.tensor_type.shape.dim] == ["", ""]
    assert len(notes) == 2 and "DynamicDimension.0" in notes[0] and "other" in notes[0]
    assert notes[1].startswith("1 value_info dim(s) named by the graph inputs' symbols")
    assert clear_declared_symbols(model) == []
    result, report = convert_for(forms.conv_value_info_symbol()[0], runtime="tract==0.23")
    assert any("DynamicDimension.0" in n for n in report.target_notes)
    assert not any(d.dim_param == "DynamicDimension.0" for v in result.graph.value_info
                   for d in v.type.tensor_type.shape.dim)
    _, report = convert_for(forms.conv_value_info_symbol()[0], runtime="tvm==0.27")
    assert not any("DynamicDimension.0" in n for n in report.target_notes)


def test_in_tract_the_forms_run_as_convert_writes_them():
    model, feeds = forms.conv_value_info_symbol()
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    result, _ = convert_for(model, runtime="tract==0.23")
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got
    np.testing.assert_allclose(got["values"][0], want, rtol=1e-5, atol=1e-6)
    model, feeds = forms.flatten_two_symbols()
    assert not run_in("tract", "0.23", model, feeds)["ok"]  # (still what the data says)
    result, _ = convert_for(_static(model, feeds), runtime="tract==0.23")
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got


def test_a_shape_read_through_a_cast_from_static_dims_only_is_not_named():
    """(torch's legacy ShuffleNet: the channel count read by Shape and Gather, cast twice: tract folds it)."""
    target = parse_target("tract==0.23")
    model, _ = forms.reshape_shape_through_cast()
    starts = {t.name: t for t in model.graph.initializer}
    starts["st"].CopyFrom(onnx.helper.make_tensor("st", onnx.TensorProto.INT32, [1], [1]))
    starts["en"].CopyFrom(onnx.helper.make_tensor("en", onnx.TensorProto.INT32, [1], [2]))
    assert _blocked(model, target) == []
    starts["st"].CopyFrom(onnx.helper.make_tensor("st", onnx.TensorProto.INT32, [1], [0]))
    assert len(_blocked(model, target)) == 1  # dims 0 and 1: the batch among them


def test_a_shape_of_static_dims_read_through_a_cast_is_not_named_in_a_model_with_symbolic_inputs():
    h = onnx.helper
    nodes = [h.make_node("Shape", ["z"], ["s"]), h.make_node("Cast", ["s"], ["s32"], to=onnx.TensorProto.INT32),
             h.make_node("Cast", ["s32"], ["s64"], to=onnx.TensorProto.INT64),
             h.make_node("Reshape", ["z", "s64"], ["y"]), h.make_node("Relu", ["x"], ["r"])]
    f = onnx.TensorProto.FLOAT
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", f, ["batch", 4]),
                                      h.make_tensor_value_info("z", f, [2, 6])],
                         [h.make_tensor_value_info("y", f, [2, 6]), h.make_tensor_value_info("r", f, ["batch", 4])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    assert _blocked(model, parse_target("tract==0.23")) == []
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "n"
    assert len(_blocked(model, parse_target("tract==0.23"))) == 1


def test_a_comparison_of_dims_is_named_for_tvm_only_and_input_shape_lifts_it():
    """TVM 0.27 refuses a LessOrEqual of a dim read by Shape (measured: symbolic and static alike); the
    QLinearAdd lowering writes one when the span order depends on dims not known when converting."""
    model, feeds = forms.lessorequal_dim_of_shape()
    tvm, tract = parse_target("tvm==0.27"), parse_target("tract==0.23")
    assert "lessorequal_dim_of_shape" in tvm.refused_forms and "lessorequal_dim_of_shape" not in tract.refused_forms
    for m in (model, _static(model, feeds)):
        found = static_dims_blockers(m, {}, tvm.name, LazyInference(m)(), tvm.refused_forms)
        assert [b[1] for b in found] == ["LessOrEqual"] and "computed from dims read by Shape" in found[0][3]
        assert "--input-shape" in found[0][3]
    for first, extra in (("one", []),  # a comparison of constants, and one of the input's values: not named
                         ("mix", [onnx.helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
                                  onnx.helper.make_node("Cast", ["mx"], ["mi"], to=onnx.TensorProto.INT64),
                                  onnx.helper.make_node("Add", ["d", "mi"], ["mix"])])):
        other = onnx.ModelProto()
        other.CopyFrom(model)
        other.graph.node[2].input[0] = first
        other.graph.node.extend(extra)
        nodes = sorted(other.graph.node, key=lambda n: n.op_type not in ("Shape", "Gather", "ReduceMax", "Cast", "Add"))
        del other.graph.node[:]
        other.graph.node.extend(nodes)
        onnx.checker.check_model(other, full_check=True)
        assert static_dims_blockers(other, {}, tvm.name, LazyInference(other)(), tvm.refused_forms) == [], first
    assert _blocked(model, tract) == []


def test_qlinear_add_over_symbolic_dims_is_named_for_tvm_and_runs_with_input_shape():
    from rewriter.convert.for_target import convert_for
    from rewriter.convert.planner import ConversionBlocked
    from tests.convert.support.contrib_oracle import com_model, qparams

    elem = onnx.TensorProto.UINT8
    # scales whose two span orders round some pair of codes otherwise (with equal tables nothing is decided at run time)
    inits = qparams("a", 0.23000059, 171, elem) + qparams("b", 0.18409485, 117, elem) + qparams("c", 0.03636105, 255, elem)

    def qadd(a, b, out):
        return com_model("QLinearAdd", [("A", elem, a), "a_s", "a_z", ("B", elem, b), "b_s", "b_z", "c_s", "c_z"],
                         [("C", elem, out)], initializers=inits)

    with pytest.raises(ConversionBlocked) as e:
        convert_for(qadd(["n", "w"], [], ["n", "w"]), runtime="tvm==0.27")
    assert "(LessOrEqual)" in str(e.value) and "--input-shape" in str(e.value)
    result, _ = convert_for(qadd([2, 5], [], [2, 5]), runtime="tvm==0.27")
    assert "LessOrEqual" not in {n.op_type for n in result.graph.node}
    result, _ = convert_for(qadd(["n", "w"], [], ["n", "w"]), runtime="tract==0.23")  # tract runs it (measured)
    assert "LessOrEqual" in {n.op_type for n in result.graph.node}


def test_a_wrong_declaration_of_an_input_symbol_is_refused_by_tract_and_runs_converted():
    """onnxruntime-genai's float16 Llama in small: a Concat of the past and the new key declared as long as
    the new one ([batch, seq] where it is [batch, past + seq]); ONNX Runtime ignores it, tract refuses it."""
    h, T = onnx.helper, onnx.TensorProto
    nodes = [h.make_node("Concat", ["past", "x"], ["c"], axis=1), h.make_node("Relu", ["c"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("past", T.FLOAT, ["batch", "past_seq"]),
                                      h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq"])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", "total"])],
                         value_info=[h.make_tensor_value_info("c", T.FLOAT, ["batch", "seq"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    feeds = {"past": np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32),
             "x": np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    as_is = run_in("tract", "0.23", model, feeds)
    assert not as_is["ok"] and "unify" in as_is["error"], as_is
    result, report = convert_for(model, runtime="tract==0.23")
    assert any("2 value_info dim(s) named by the graph inputs' symbols" in n for n in report.target_notes)
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0], want)
