"""--keep-op-types / keep_op_types: a misspelled op type is refused naming the nearest valid
names (CLI: exit 2, nothing written; Python: RewriterError), a str is one op type, and what
the model could hold is accepted: ops of the domains it imports, its functions' names, op
types of custom domains present in it."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import rewriter
from rewriter.cli import main
from rewriter.errors import RewriterError
from rewriter.passes import ConvertPrecisionPass
from rewriter.precision import convert_precision_proto


def _vi(name, shape=(2, 3)):
    return h.make_tensor_value_info(name, T.FLOAT, list(shape))


def _model(nodes, functions=(), imports=(("", 17),)):
    m = h.make_model(h.make_graph(nodes, "g", [_vi("x")], [_vi("y")]),
                     opset_imports=[h.make_opsetid(d, v) for d, v in imports], functions=list(functions))
    onnx.checker.check_model(m)
    return m


def _softmax_model():
    """x -> Relu -> Softmax -> Relu -> y: every node runs in half unless kept."""
    return _model([h.make_node("Relu", ["x"], ["a"], name="r1"), h.make_node("Softmax", ["a"], ["b"], name="sm"),
                   h.make_node("Relu", ["b"], ["y"], name="r2")])


def _elem_into(model, op):
    """The element type a node of ``op`` reads, from the result's own value types."""
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.value_info) + list(model.graph.input)}
    node = next(n for n in model.graph.node if n.op_type == op)
    return types[node.input[0]]


def test_a_str_is_one_op_type_and_the_node_stays_float32():
    m = _softmax_model()
    assert _elem_into(rewriter.convert_precision(m, "float16"), "Softmax") == T.FLOAT16
    assert _elem_into(rewriter.convert_precision(m, "float16", keep_op_types=["Softmax"]), "Softmax") == T.FLOAT
    assert _elem_into(rewriter.convert_precision(m, "float16", keep_op_types="Softmax"), "Softmax") == T.FLOAT
    _, report = convert_precision_proto(m, "float16", keep_op_types="Softmax")
    assert [(k.label, k.op, k.code, k.reason) for k in report.kept] == [("node 'sm' (Softmax)", "Softmax", "keep-op-types", "--keep-op-types")]
    p = ConvertPrecisionPass("float16", keep_op_types="Softmax")
    p(ir.serde.deserialize_model(m))
    assert [k.op for k in p.report.kept] == ["Softmax"]
    _, report = convert_precision_proto(m, "float16", keep_nodes="sm")  # a str is one node name too
    assert [(k.label, k.op, k.code, k.reason) for k in report.kept] == [("node 'sm' (Softmax)", "Softmax", "keep-nodes", "--keep-nodes")]


@pytest.mark.parametrize("convert", [
    lambda m, keep: rewriter.convert_precision(m, "float16", keep_op_types=keep),
    lambda m, keep: ConvertPrecisionPass("float16", keep_op_types=keep)(ir.serde.deserialize_model(m)),
], ids=["api", "pass"])
def test_a_misspelled_op_type_is_refused_naming_the_nearest(convert):
    m = _softmax_model()
    with pytest.raises(RewriterError) as e:
        convert(m, ["Relu", "Softmx", "LAYERNORMALIZATION"])
    text = str(e.value)
    assert text.startswith("--keep-op-types: ")
    assert "'Softmx' (did you mean Softmax" in text
    assert "'LAYERNORMALIZATION' (did you mean LayerNormalization" in text  # case alone first
    assert "'Relu'" not in text
    with pytest.raises(RewriterError, match="'Zzqqxx' [(]no near name[)]"):
        convert(m, "Zzqqxx")
    with pytest.raises(RewriterError, match="expected names [(]str[)], got int 3"):
        convert(m, ["Softmax", 3])


def test_cli_exits_2_naming_the_bad_names_and_writes_nothing(tmp_path, capsys):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_softmax_model(), src)
    code = main(["convert", str(src), "--dtype", "float16", "--keep-op-types", "Softmx,layernormalization",
                 "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert len(err) == 1 and err[0].startswith("error: --keep-op-types: ")
    assert "'Softmx' (did you mean Softmax" in err[0]
    assert "'layernormalization' (did you mean LayerNormalization" in err[0]
    assert main(["convert", str(src), "--dtype", "float16", "--keep-op-types", "Softmax", "-o", str(out)]) == 0
    assert _elem_into(onnx.load(out), "Softmax") == T.FLOAT


def test_ops_of_the_domains_imported_are_accepted_and_no_others():
    """LayerNormalization is not in the model (nor in opset 13) but is an ONNX op; LabelEncoder is
    an op of ai.onnx.ml, valid only when the model imports it."""
    m = _softmax_model()
    convert_precision_proto(m, "float16", keep_op_types=("LayerNormalization",))
    with pytest.raises(RewriterError, match="'LabelEncoder'"):
        convert_precision_proto(m, "float16", keep_op_types=("LabelEncoder",))
    ml = _model(list(m.graph.node), imports=(("", 17), ("ai.onnx.ml", 3)))
    convert_precision_proto(ml, "float16", keep_op_types=("LabelEncoder",))


def test_an_op_of_a_custom_domain_in_the_model_is_accepted():
    m = _model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Gadget", ["a"], ["y"], domain="com.example")],
               imports=(("", 17), ("com.example", 1)))
    _, report = convert_precision_proto(m, "float16", keep_op_types="Gadget")
    with pytest.raises(RewriterError, match="'Gadgt' [(]did you mean Gadget"):
        convert_precision_proto(m, "float16", keep_op_types="Gadgt")


def test_function_op_types_are_accepted_and_kept():
    """A call's op type (kept float32), an op type of a custom domain used only in a body, a
    function defined but not called; a name checked against the whole model, not each body."""
    body = [h.make_node("Relu", ["a"], ["r"]), h.make_node("Gizmo", ["r"], ["g"], domain="com.example"),
            h.make_node("Add", ["g", "a"], ["b"])]
    fn = h.make_function("local", "Doubled", ["a"], ["b"], body,
                         [h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])
    spare = h.make_function("local", "Spare", ["a"], ["b"], [h.make_node("Relu", ["a"], ["b"])],
                            [h.make_opsetid("", 17)])
    m = _model([h.make_node("Doubled", ["x"], ["d"], domain="local", name="call"),
                h.make_node("Gadget", ["d"], ["y"], domain="com.example", name="gadget")], functions=[fn, spare],
               imports=(("", 17), ("local", 1), ("com.example", 1)))
    _, report = convert_precision_proto(m, "float16", keep_op_types="Gadget")  # (the body has no Gadget)
    assert report.applied.function_calls == 1
    _, report = convert_precision_proto(m, "float16", keep_op_types="Doubled")
    assert ("node 'call' (Doubled)", "Doubled", "keep-op-types", "--keep-op-types") in [
        (k.label, k.op, k.code, k.reason) for k in report.kept]
    assert report.applied.function_calls == 0
    convert_precision_proto(m, "float16", keep_op_types=("Gizmo", "Spare"))
    with pytest.raises(RewriterError, match="'doubled' [(]did you mean Doubled"):
        convert_precision_proto(m, "float16", keep_op_types="doubled")
