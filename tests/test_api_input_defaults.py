"""``freeze_input_defaults=True | [names]`` in the public functions and the passes: the graph inputs
that have an initializer become constants first, as ``--freeze-input-defaults`` does on the
command line (the same model). Oracle: ONNX Runtime on the original (it takes the default)."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

import rewriter
from rewriter import cli
from rewriter.graph.input_defaults import default_note
from tests.graph.input_default_models import IR3_FEEDS, X, ir3_model, ort_run, reduce_model, reference_run
from tests.oracle import assert_same_outputs, assert_valid


def _inputs(model) -> list[str]:
    return [i.name for i in model.graph.input]


@pytest.fixture
def seed(tmp_path):
    path = str(tmp_path / "seed.onnx")
    onnx.save(reduce_model("ReduceProd"), path)
    return path


def test_convert_opset_without_freezing_says_why(seed):
    with pytest.raises(rewriter.RewriterError, match=r"'b' is a graph input; its initializer is only a default"):
        rewriter.convert_opset(seed, 13)


def test_convert_opset_gives_what_the_cli_writes(seed, tmp_path):
    out = str(tmp_path / "out.onnx")
    assert cli.main(["convert", seed, "--opset", "13", "-o", out, "--freeze-input-defaults", "-q"]) == 0
    result = rewriter.convert_opset(seed, 13, freeze_input_defaults=True)
    assert result.graph.SerializeToString() == onnx.load(out).graph.SerializeToString()
    assert_same_outputs(ort_run(onnx.load(seed), {"x": X}), ort_run(result, {"x": X}))


def test_convert_opset_leaves_its_argument_and_takes_names():
    m = reduce_model("ReduceL2")
    before = m.SerializeToString()
    result = rewriter.convert_opset(m, 13, freeze_input_defaults=["b"])
    assert m.SerializeToString() == before and _inputs(result) == ["x"]
    with pytest.raises(rewriter.RewriterError, match=r"'c' is not a graph input with an initializer"):
        rewriter.convert_opset(m, 13, freeze_input_defaults=["c"])


def test_convert_opset_an_ir3_model_down():
    m = ir3_model()
    result = rewriter.convert_opset(m, 4, freeze_input_defaults=True)
    assert_valid(result)
    assert result.ir_version == 4 and _inputs(result) == ["x"]
    assert_same_outputs(ort_run(m, IR3_FEEDS), reference_run(result, IR3_FEEDS))
    with pytest.raises(rewriter.RewriterError, match=r"IR 3 has no initializers outside the graph inputs"):
        rewriter.convert_opset(m, 4, ir_version=3, freeze_input_defaults=True)


def test_fold_reduce_prod_freezes(tmp_path):
    m = reduce_model()
    m.graph.initializer.append(onnx.numpy_helper.from_array(X, "c"))
    m.graph.node[0].input[0] = "c"
    del m.graph.input[0]
    assert rewriter.fold_reduce_prod(m).graph.node  # skipped: 'b' may be overridden
    folded = rewriter.fold_reduce_prod(m, freeze_input_defaults=True)
    assert not folded.graph.node and _inputs(folded) == []
    assert_same_outputs(ort_run(m, {}), ort_run(folded, {}))


def test_optimize_model_gives_what_the_cli_writes(tmp_path):
    src, out = str(tmp_path / "ir3.onnx"), str(tmp_path / "out.onnx")
    onnx.save(ir3_model(), src)
    assert cli.main(["optimize", src, "-o", out, "--freeze-input-defaults", "-q"]) == 0
    result = rewriter.optimize_model(src, freeze_input_defaults=True)
    assert result.graph.SerializeToString() == onnx.load(out).graph.SerializeToString()
    assert result.ir_version == 4 and _inputs(result) == ["x"]
    assert_same_outputs(ort_run(ir3_model(), IR3_FEEDS), ort_run(result, IR3_FEEDS))


def test_verify_reduce_prod_shapes_reads_frozen_axes():
    m = reduce_model("ReduceProd", axes=(2,))
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 4  # the default axes give [2, 3]
    problems = rewriter.verify_reduce_prod_shapes(m, freeze_input_defaults=True)
    assert len(problems) == 1 and "contradicts the expected [2,3]" in str(problems[0])


def test_the_passes_freeze():
    m = reduce_model()
    with pytest.raises(rewriter.RewriterError, match=default_note("b").replace("(", r"\(").replace(")", r"\)")):
        rewriter.ConvertOpsetPass(13)(ir.from_proto(m))
    result = rewriter.ConvertOpsetPass(13, freeze_input_defaults=True)(ir.from_proto(m))
    assert [v.name for v in result.model.graph.inputs] == ["x"]
    assert_same_outputs(ort_run(m, {"x": X}), ort_run(ir.to_proto(result.model), {"x": X}))

    c = reduce_model()
    c.graph.initializer.append(onnx.numpy_helper.from_array(X, "c"))
    c.graph.node[0].input[0] = "c"
    del c.graph.input[0]
    folded = rewriter.FoldReduceProdPass(freeze_input_defaults=True)(ir.from_proto(c))
    assert len(folded.model.graph) == 0

    bad = reduce_model("ReduceProd", axes=(2,))
    bad.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 4
    with pytest.raises(rewriter.RewriterError, match=r"contradicts the expected \[2,3\]"):
        rewriter.VerifyReduceProdShapesPass(freeze_input_defaults=True)(ir.from_proto(bad))

    optimized = rewriter.OptimizePass(freeze_input_defaults=True)(ir.from_proto(ir3_model()))
    assert [v.name for v in optimized.model.graph.inputs] == ["x"]
