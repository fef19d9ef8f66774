"""The public Python API: what it accepts, what it returns, what it refuses, and that the
passes compose with onnx_ir's PassManager and onnxscript's optimizer.

Oracles: ONNX Runtime runs the models; onnx.checker (full_check) validates them.
"""

from __future__ import annotations

import inspect
import os
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter

MODELS = pathlib.Path(__file__).resolve().parents[1] / "models"
MIXED = MODELS / "mixed_opset13.onnx"
FOLDABLE = MODELS / "foldable_opset13.onnx"


def _run(model, feeds):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(model):
    graph = (model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))).graph
    rng = np.random.default_rng(0)
    return {i.name: rng.uniform(0.5, 1.5, [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in graph.input}


# rewriter.reduce_prod is the kernel's own signature (rewriter/kernels), typed by its docstring
UNANNOTATED_ELSEWHERE = {"reduce_prod"}


def test_public_names_have_docstrings_and_complete_type_hints():
    for name in rewriter.__all__:
        obj = getattr(rewriter, name)
        assert inspect.getdoc(obj), name
        if inspect.isfunction(obj) and name not in UNANNOTATED_ELSEWHERE:
            sig = inspect.signature(obj)
            assert sig.return_annotation is not inspect.Signature.empty, name
            for p in sig.parameters.values():
                assert p.annotation is not inspect.Parameter.empty, (name, p.name)
        if inspect.isclass(obj) and name.endswith("Pass"):
            assert inspect.getdoc(obj.call) or inspect.getdoc(obj.__init__), name
    assert (pathlib.Path(rewriter.__file__).parent / "py.typed").exists()


def test_version_comes_from_package_metadata():
    from importlib.metadata import version

    assert rewriter.__version__ == version("rewriter")


@pytest.mark.parametrize("as_path", [str, pathlib.Path])
def test_paths_are_accepted_and_give_a_model_proto(as_path):
    converted = rewriter.convert_opset(as_path(MIXED), 18)
    assert isinstance(converted, onnx.ModelProto) and converted.opset_import[0].version == 18
    onnx.checker.check_model(converted, full_check=True)
    feeds = _feeds(MIXED)
    np.testing.assert_allclose(_run(converted, feeds)[0], _run(MIXED, feeds)[0], rtol=1e-6)
    folded = rewriter.fold_reduce_prod(as_path(FOLDABLE))
    assert isinstance(folded, onnx.ModelProto)
    assert not [n for n in folded.graph.node if n.op_type == "ReduceProd"]
    feeds = _feeds(FOLDABLE)
    np.testing.assert_allclose(_run(folded, feeds)[0], _run(FOLDABLE, feeds)[0], rtol=1e-5)
    assert rewriter.verify_reduce_prod_shapes(as_path(MIXED)) == []
    assert rewriter.verify_numerics(as_path(MIXED), converted).ok


def test_model_proto_in_model_proto_out_and_not_mutated():
    model = onnx.load(str(MIXED))
    before = model.SerializeToString()
    out = rewriter.convert_opset(model, 18)
    assert isinstance(out, onnx.ModelProto) and model.SerializeToString() == before


def test_onnx_ir_model_in_onnx_ir_model_out():
    model = ir.load(str(FOLDABLE))
    folded = rewriter.fold_reduce_prod(model)
    assert isinstance(folded, ir.Model)
    assert "ReduceProd" not in {n.op_type for n in folded.graph}
    converted = rewriter.convert_opset(ir.load(str(MIXED)), 18)
    assert isinstance(converted, ir.Model) and converted.opset_imports[""] == 18
    feeds = _feeds(MIXED)
    np.testing.assert_allclose(_run(ir.to_proto(converted), feeds)[0], _run(MIXED, feeds)[0], rtol=1e-6)


def _external_model(d) -> str:
    w = numpy_helper.from_array(np.linspace(0.9, 1.1, 4 * 256, dtype=np.float32).reshape(4, 256), "w")
    graph = helper.make_graph([helper.make_node("ReduceProd", ["w"], ["p"], name="rp", axes=[0], keepdims=0),
                               helper.make_node("Mul", ["x", "p"], ["y"], name="mul")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])], [w])
    path = os.path.join(d, "ext.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path,
              save_as_external_data=True, location="ext.bin", size_threshold=0)
    return path


@pytest.mark.parametrize("kind", ["path", "onnx_ir"])
def test_external_data_beside_a_path_or_an_onnx_ir_model(tmp_path, monkeypatch, kind):
    path = _external_model(str(tmp_path))
    monkeypatch.chdir("/")  # the data is found beside the model, not in the working directory
    model = path if kind == "path" else ir.load(path)
    folded = rewriter.fold_reduce_prod(model)
    converted = rewriter.convert_opset(model, 18)
    proto = folded if kind == "path" else ir.to_proto(folded)
    feeds = {"x": np.linspace(1, 2, 256, dtype=np.float32)}
    np.testing.assert_allclose(_run(proto, feeds)[0], _run(path, feeds)[0], rtol=1e-5)
    assert rewriter.verify_numerics(path, converted).ok  # an onnx_ir result still finds its data


@pytest.mark.parametrize("bad", [b"bytes", 13, None, ["model.onnx"]])
def test_wrong_model_type_is_a_type_error_saying_what_is_accepted(bad):
    for fn in (lambda m: rewriter.convert_opset(m, 13), rewriter.fold_reduce_prod, rewriter.verify_reduce_prod_shapes,
               lambda m: rewriter.verify_numerics(m, m)):
        with pytest.raises(TypeError, match="onnx.ModelProto, an onnx_ir.Model or a path"):
            fn(bad)


@pytest.mark.parametrize("opset", ["13", 13.0, True, None])
def test_target_opset_of_the_wrong_type_is_a_clear_type_error(opset):
    with pytest.raises(TypeError, match="target_opset must be an int"):
        rewriter.convert_opset(str(MIXED), opset)


def test_missing_file_is_a_rewriter_error_naming_it(tmp_path):
    with pytest.raises(rewriter.RewriterError, match="no such file"):
        rewriter.convert_opset(tmp_path / "nope.onnx", 13)


def test_passes_compose_with_pass_manager_and_onnxscript_optimizer():
    """The README's pipeline: rewriter's passes between onnx_ir's and onnxscript's."""
    import onnxscript.optimizer
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    class OnnxscriptOptimize(ir.passes.InPlacePass):
        def call(self, model):
            onnxscript.optimizer.optimize_ir(model)
            return ir.passes.PassResult(model, modified=True)

    model = ir.load(str(FOLDABLE))
    manager = ir.passes.PassManager([rewriter.FoldReduceProdPass(), RemoveUnusedNodesPass(),
                                     OnnxscriptOptimize(), rewriter.ConvertOpsetPass(18),
                                     rewriter.VerifyReduceProdShapesPass()])
    result = manager(model)
    assert result.modified
    proto = ir.to_proto(result.model)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == 18 and "ReduceProd" not in {n.op_type for n in proto.graph.node}
    feeds = _feeds(FOLDABLE)
    np.testing.assert_allclose(_run(proto, feeds)[0], _run(FOLDABLE, feeds)[0], rtol=1e-5)


def test_fold_constants_is_the_deprecated_name_of_fold_reduce_prod():
    import warnings

    model = onnx.load(FOLDABLE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = rewriter.fold_constants(model)
    assert any(issubclass(w.category, DeprecationWarning) and "fold_reduce_prod" in str(w.message) for w in caught)
    assert old.SerializeToString() == rewriter.fold_reduce_prod(model).SerializeToString()


def test_verify_shapes_is_the_deprecated_name_of_verify_reduce_prod_shapes():
    import warnings

    from onnx import TensorProto, helper

    bad = onnx.load(MIXED)
    reduce_out = next(n.output[0] for n in bad.graph.node if n.op_type == "ReduceProd")
    bad.graph.value_info.append(helper.make_tensor_value_info(reduce_out, TensorProto.FLOAT, [97, 97, 97, 97, 97]))
    for model, clean in ((onnx.load(MIXED), True), (bad, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = rewriter.verify_shapes(model)
        assert any(issubclass(w.category, DeprecationWarning) and "verify_reduce_prod_shapes" in str(w.message)
                   for w in caught)
        new = rewriter.verify_reduce_prod_shapes(model)
        assert [str(p) for p in old] == [str(p) for p in new] and (not new) == clean


def test_verify_shapes_pass_is_the_deprecated_name_of_verify_reduce_prod_shapes_pass():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = rewriter.VerifyShapesPass()
    assert any(issubclass(w.category, DeprecationWarning) and "VerifyReduceProdShapesPass" in str(w.message)
               for w in caught)
    assert isinstance(old, rewriter.VerifyReduceProdShapesPass)
    assert not old(ir.load(str(MIXED))).modified


def test_convert_opset_pass_takes_convert_opsets_parameters():
    """ConvertOpsetPass(...) and convert_opset(...) take the same arguments and agree."""
    import inspect

    import onnx_ir as ir
    from onnx import TensorProto, helper

    assert list(inspect.signature(rewriter.ConvertOpsetPass).parameters) == \
        list(inspect.signature(rewriter.convert_opset).parameters)[1:]
    model = helper.make_model(helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]), opset_imports=[helper.make_opsetid("", 21)])
    for kwargs in ({"target": "onnxruntime==1.15"}, {"target_opset": 11, "ir_version": 6}, {"target_opset": "latest"}):
        by_function = rewriter.convert_opset(model, **kwargs)
        by_pass = rewriter.ConvertOpsetPass(**kwargs)(ir.from_proto(model))
        got = ir.to_proto(by_pass.model)
        assert dict((o.domain, o.version) for o in got.opset_import) == \
            dict((o.domain, o.version) for o in by_function.opset_import)
        assert got.ir_version == by_function.ir_version
        assert by_pass.modified == (by_function.SerializeToString() != model.SerializeToString())
    with pytest.raises(TypeError, match="target_opset must be an int or 'latest'"):
        rewriter.ConvertOpsetPass()
    with pytest.raises(TypeError, match="ml_opset must be an int"):
        rewriter.ConvertOpsetPass(13, ml_opset="3")
