"""TensorRT's per-op restrictions: the data against onnx-tensorrt's operators.md, and one small
model per restriction, refused (naming the node and the restriction) or rewritten exactly.

Oracles: the extracts of operators.md kept in ``tools/runtime_data/trt_operators/`` (read here
with their own small parser) for the data; ONNX Runtime running the source and the rewritten
model for the rewrites; the rule's clause in the error for refusals."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from rewriter import cli
from rewriter.convert import convert_for
from rewriter.errors import RewriterError
from rewriter.targets import blockers, parse_target, releases, restriction_violations
from rewriter.targets.restrictions import CHECKS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTRACTS = os.path.join(ROOT, "tools", "runtime_data", "trt_operators")
with open(os.path.join(ROOT, "rewriter", "targets", "data", "tensorrt.json"), encoding="utf-8") as _f:
    TABLE = json.load(_f)["releases"]
F, I64, U8, I8 = T.FLOAT, T.INT64, T.UINT8, T.INT8


# ------------------------------------------------------------ the data against operators.md

TYPES = "Supported Types: "  # how a rule from the Supported Types column quotes it


def _extract(release: str, column: int = 4) -> tuple[str, dict]:
    """(header line, {op: restrictions cell}) of the kept extract of a release's operators.md
    (``column`` 3: the Supported Types cells)."""
    with open(os.path.join(EXTRACTS, f"{release}.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = next(line for line in lines if line.startswith("TensorRT "))
    cells = {}
    for line in lines:
        parts = [p.strip() for p in line.split("|")]
        if line.startswith("| ") and len(parts) > 4 and parts[2] == "Y":
            cells[parts[1]] = parts[column]
    return header, cells


def _column_rules(entry, op):
    """The rules of the Restrictions column (not the Supported Types ones)."""
    return [r for r in entry["rules"].get(op, []) if not r["text"].startswith(TYPES)]


def test_every_release_has_an_extract_and_its_column_is_the_datas():
    assert sorted(TABLE, key=lambda r: tuple(map(int, r.split(".")))) == releases("tensorrt")
    for release, entry in TABLE.items():
        header, cells = _extract(release)
        assert header == entry["header"], release
        assert cells == {op: t for op, t in entry["restrictions"].items() if op in entry["supported"]}, release
        with open(os.path.join(EXTRACTS, f"{release}.md"), encoding="utf-8") as f:
            assert entry["commit"] in f.readline(), release  # the extract names the commit it was read at


def test_every_rule_and_note_quotes_its_releases_operators_md():
    for release, entry in TABLE.items():
        _, cells = _extract(release)
        _, types = _extract(release, column=3)
        for key in ("rules", "unchecked"):
            for op, items in entry[key].items():
                for item in items:
                    if item["text"].startswith(TYPES):
                        assert item["text"] == TYPES + types[op], (release, op, item["text"])
                        assert op in ("QuantizeLinear", "DequantizeLinear") and item["kind"] == "input_type"
                    else:
                        assert item["text"] in cells[op], (release, op, item["text"])


def test_every_clause_of_the_column_is_a_rule_or_a_note():
    """Nothing of a cell is left over once its rules' and notes' clauses are taken out: the
    coverage is the whole column (the unchecked part named, with why)."""
    for release, entry in TABLE.items():
        _, cells = _extract(release)
        for op, cell in cells.items():
            rest = cell
            for item in _column_rules(entry, op) + entry["unchecked"].get(op, []):
                rest = rest.replace(item["text"], "", 1)
            assert re.fullmatch(r"(?:[\s.]|<br\s*/?>)*", rest), (release, op, rest)
            assert all(n["note"] for n in entry["unchecked"].get(op, [])), (release, op)


def test_rule_kinds_are_known_and_the_counts_are_as_documented():
    counts = {}
    for release, entry in TABLE.items():
        for rules in entry["rules"].values():
            assert all(r["kind"] in CHECKS for r in rules), release
        counts[release] = (sum(map(len, entry["rules"].values())), sum(map(len, entry["unchecked"].values())))
    # the Restrictions column's clauses plus the two Supported Types rules (QuantizeLinear, DequantizeLinear)
    assert counts == {"8.5": (24, 4), "8.6": (20, 4), "10.0": (38, 4), "10.1": (49, 6), "10.16": (56, 7)}
    assert sorted(TABLE["10.16"]["unchecked"]) == ["Attention", "Loop", "RandomNormal", "RandomNormalLike",
                                                   "RandomUniform", "RandomUniformLike"]


def test_tensorrt_10_16_has_an_ir_version_and_says_where_it_comes_from():
    entry = TABLE["10.16"]
    assert entry["ir_version"] == 12 and entry["onnx"] == "1.18.0"
    assert "Changelog.md" in entry["ir_version_from"] and "onnx==1.18.0" in entry["ir_version_from"]
    # its newest opset needs that IR version (else no model of opset 24 could be written for it)
    assert helper.find_min_ir_version_for([helper.make_opsetid("", 24)]) == entry["ir_version"]
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2])], ["y"], opset=24)
    model.ir_version = 13
    result, _ = convert_for(model, runtime="tensorrt==10.16")
    assert result.ir_version == 12 and result.opset_import[0].version == 24
    assert any("IR version 13" in b for b in blockers(model, parse_target("tensorrt==10.16")))


def test_a_release_between_two_known_ones_uses_the_older_ones_restrictions_and_the_plan_says_so():
    between, older = parse_target("tensorrt==10.8"), parse_target("tensorrt==10.1")
    assert between.rules == older.rules and between.data_release == "tensorrt 10.1"
    _, report = convert_for(_maxpool(used=True), runtime="tensorrt==10.8", plan_only=True)
    assert any("tensorrt 10.8 (as 10.1, the newest older release known) uses the data of tensorrt 10.1" in n
               for n in report.target_notes)
    assert [b.op for b in report.blockers] == ["MaxPool"] and "tensorrt 10.1's operators.md" in report.blockers[0].reason


# ------------------------------------------------------------ small models

def _model(nodes, inputs, outputs, inits=(), opset=17):
    """A model of ``nodes``; inputs as (name, type, shape); outputs by name (typed by inference) or
    as (name, type, shape) where inference cannot tell the rank (None: an unknown dim)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(*o) if isinstance(o, tuple)
                               else helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=max(8, helper.find_min_ir_version_for([helper.make_opsetid("", opset)])))
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
    for out in model.graph.output:
        if not out.type.HasField("tensor_type") and out.name in types and types[out.name].type.tensor_type.elem_type:
            out.type.CopyFrom(types[out.name].type)
    onnx.checker.check_model(model, full_check=True)
    return model


def _node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name="n", **attrs)


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name + "_v"))


def _maxpool(used=False, rank=4, indices=True, **attrs):
    shape = [1, 1, 4, 4, 4][:rank] if rank != 3 else [1, 1, 8]
    k = [2] * (len(shape) - 2)
    return _model([_node("MaxPool", ["x"], ["y", "idx"] if indices else ["y"], kernel_shape=k, strides=k, **attrs)],
                  [("x", F, shape)], ["y", "idx"] if used else ["y"])


def _reduce(op):
    return lambda: _model([_node(op, ["x", "axes"], ["y"])], [("x", F, [2, 3]), ("axes", I64, [1])],
                          [("y", F, [None, None])], opset=18)


def _rnn(op, gates, acts, **attrs):
    h = 2
    return _model([_node(op, ["x", "w", "r"], ["y"], hidden_size=h, direction="bidirectional", activations=acts,
                         **attrs)],
                  [("x", F, [2, 1, 3])], ["y"],
                  {"w": np.ones((2, gates * h, 3), np.float32), "r": np.ones((2, gates * h, h), np.float32)})


def _resize(opset=18, sizes=False, **attrs):
    scales = {} if sizes else {"scales": np.array([1, 1, 2, 2], np.float32)}
    ins = ["x", "", "", "sizes"] if sizes else ["x", "", "scales"]
    inits = {"sizes": np.array([1, 1, 8, 6], np.int64)} if sizes else scales
    return _model([_node("Resize", ins, ["y"], **attrs)], [("x", F, [1, 1, 4, 4])], ["y"], inits, opset=opset)


def _attention(rank=4, past=False, softcap=None, present=False):
    q = [1, 2, 4, 8] if rank == 4 else [1, 4, 16]
    attrs = {"q_num_heads": 2, "kv_num_heads": 2} if rank == 3 else {}
    if softcap is not None:
        attrs["softcap"] = softcap
    ins = ["q", "k", "v"] + (["", "pk", "pv"] if past else [])
    outs = ["y"] + (["pko", "pvo"] if present else [])  # present outputs made, none read
    inputs = [("q", F, q), ("k", F, q), ("v", F, q)] + ([("pk", F, [1, 2, 3, 8]), ("pv", F, [1, 2, 3, 8])] if past else [])
    return _model([_node("Attention", ins, outs, **attrs)], inputs, ["y"], opset=23)


def _if(then_shape, else_shape, same_names=False):
    def branch(tag, shape):
        out = "r" if same_names else f"r_{tag}"
        return helper.make_graph([_const(out, np.ones(shape, np.float32))], tag, [],
                                 [helper.make_tensor_value_info(out, F, shape)])
    return _model([_node("If", ["c"], ["y"], then_branch=branch("then", then_shape),
                         else_branch=branch("else", else_shape))], [("c", T.BOOL, [])],
                  ["y"] if then_shape == else_shape else [("y", F, [None] * len(then_shape))])


def _topk(k, sorted_=1, dim=8, k_input=False):
    inits = {} if k_input else {"k": np.array([k], np.int64)}
    ins = [("x", F, [1, dim])] + ([("k", I64, [1])] if k_input else [])
    return _model([_node("TopK", ["x", "k"], ["v", "i"], sorted=sorted_)], ins, ["v", "i"], inits)


# (release, op, the clause's start, builder): a model that breaks the restriction and no other,
# refused by convert --target naming the node and the clause
REFUSED = [
    ("10.16", "Attention", "`Q`, `K`, `V`", lambda: _attention(rank=3)),
    ("10.16", "Attention", "`past_key`", lambda: _attention(past=True)),
    ("10.16", "Attention", "`qk_matmul_output_mode`", lambda: _attention(softcap=2.0)),
    ("10.16", "AveragePool", "2D or 3D", lambda: _model([_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2, 2])],
                                                        [("x", F, [1, 1, 3, 3, 3, 3])], ["y"])),
    ("10.0", "AveragePool", "`dilations`", lambda: _model(
        [_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])], [("x", F, [1, 1, 6, 6])], ["y"],
        opset=19)),
    ("10.1", "Constant", "`sparse_value`", lambda: _model(
        [_node("Constant", [], ["y"], sparse_value=helper.make_sparse_tensor(
            numpy_helper.from_array(np.array([1.0], np.float32), "sv"),
            numpy_helper.from_array(np.array([1], np.int64), "si"), [3]))], [], ["y"])),
    ("8.5", "CumSum", "`axis` must be an initializer", lambda: _model(
        [_node("CumSum", ["x", "a"], ["y"])], [("x", F, [2, 3]), ("a", I64, [])], ["y"])),
    ("10.16", "CumSum", "`axis` must be a build-time", lambda: _model(
        [_node("CumSum", ["x", "a"], ["y"])], [("x", F, [2, 3]), ("a", I64, [])], ["y"])),
    ("10.1", "DeformConv", "`input` must have", lambda: _model(
        [_node("DeformConv", ["x", "w", "off"], ["y"])],
        [("x", F, [1, 1, 4, 4, 4]), ("off", F, [1, 24, 3, 3, 3])], ["y"], {"w": np.ones((1, 1, 2, 2, 2), np.float32)},
        opset=19)),
    ("10.1", "DeformConv", "`pads` for the", lambda: _model(
        [_node("DeformConv", ["x", "w", "off"], ["y"], pads=[1, 0, 0, 1])],
        [("x", F, [1, 1, 4, 4]), ("off", F, [1, 8, 4, 4])], ["y"], {"w": np.ones((1, 1, 2, 2), np.float32)}, opset=19)),
    ("10.16", "DequantizeLinear", "`x_zero_point`", lambda: _model(
        [_node("DequantizeLinear", ["x", "s", "zp"], ["y"])], [("x", I8, [3])], ["y"],
        {"s": np.float32(0.5), "zp": np.int8(3)})),
    ("8.5", "DequantizeLinear", TYPES, lambda: _model(  # a uint8 one TensorRT would compute as int8
        [_node("DequantizeLinear", ["x", "s"], ["y"])], [("x", U8, [3])], ["y"], {"s": np.float32(0.5)})),
    ("10.16", "DequantizeLinear", TYPES, lambda: _model(
        [_node("DequantizeLinear", ["x", "s"], ["y"])], [("x", U8, [3])], ["y"], {"s": np.float32(0.5)})),
    ("10.0", "DequantizeLinear", TYPES, lambda: _model(
        [_node("DequantizeLinear", ["x", "s"], ["y"])], [("x", T.INT32, [3])], ["y"], {"s": np.float32(0.5)})),
    ("8.5", "QuantizeLinear", TYPES, lambda: _model(
        [_node("QuantizeLinear", ["x", "s"], ["y"])], [("x", T.INT32, [3])], ["y"], {"s": np.float32(0.5)}, opset=13)),
    ("10.0", "QuantizeLinear", TYPES, lambda: _model(
        [_node("QuantizeLinear", ["x", "s"], ["y"])], [("x", T.INT32, [3])], ["y"], {"s": np.float32(0.5)}, opset=13)),
    ("10.16", "Dropout", "`is_training`", lambda: _model(
        [_node("Dropout", ["x", "", "t"], ["y"])], [("x", F, [2, 3])], ["y"], {"t": np.bool_(True)})),
    ("10.1", "Dropout", "`is_traning`", lambda: _model(
        [_node("Dropout", ["x", "", "t"], ["y"])], [("x", F, [2, 3]), ("t", T.BOOL, [])], ["y"])),
    ("8.5", "Einsum", "Ellipsis and diagonal", lambda: _model(
        [_node("Einsum", ["x"], ["y"], equation="ii->i")], [("x", F, [3, 3])], ["y"])),
    ("8.6", "Einsum", "Broadcasting", lambda: _model(
        [_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")], [("a", F, [2, 1]), ("b", F, ["m", 4])], ["y"])),
    ("10.16", "EyeLike", "`input` must have static", lambda: _model(
        [_node("EyeLike", ["x"], ["y"])], [("x", F, ["n", 3])], ["y"])),
    ("10.16", "GRU", "For bidirectional GRUs", lambda: _rnn("GRU", 3, ["Sigmoid", "Tanh", "Sigmoid", "Relu"])),
    ("10.16", "RNN", "For bidirectional RNNs", lambda: _rnn("RNN", 1, ["Tanh", "Relu"])),
    ("8.5", "LSTM", "For bidirectional LSTMs", lambda: _rnn("LSTM", 4, ["Sigmoid", "Tanh", "Tanh",
                                                                          "Sigmoid", "Tanh", "Relu"])),
    ("10.16", "LSTM", "`input_forget`", lambda: _rnn("LSTM", 4, ["Sigmoid", "Tanh", "Tanh"] * 2, input_forget=1)),
    ("10.16", "LSTM", "`layout`", lambda: _rnn("LSTM", 4, ["Sigmoid", "Tanh", "Tanh"] * 2, layout=1)),
    ("10.1", "GridSample", "Input must be 4D", lambda: _model(
        [_node("GridSample", ["x", "g"], ["y"])], [("x", F, [1, 1, 2, 2, 2]), ("g", F, [1, 2, 2, 2, 3])], ["y"],
        opset=20)),
    ("10.16", "Hardmax", "`axis` dimension", lambda: _model(
        [_node("Hardmax", ["x"], ["y"])], [("x", F, [2, "n"])], ["y"])),
    ("8.5", "If", "Output tensors of the two conditional branches must have broadcastable",
     lambda: _if([2], [3])),
    ("10.16", "If", "Output tensors of the two conditional branches must have the same rank",
     lambda: _if([2], [2, 2])),
    ("8.5", "InstanceNormalization", "Scales `scale`", lambda: _model(
        [_node("InstanceNormalization", ["x", "s", "b"], ["y"])], [("x", F, [1, 2, 3]), ("s", F, [2])], ["y"],
        {"b": np.zeros(2, np.float32)})),
    ("8.5", "InstanceNormalization", "Input rank", lambda: _model(
        [_node("InstanceNormalization", ["x", "s", "b"], ["y"])], [("x", F, [1, 2, 2, 2, 2, 2])], ["y"],
        {"s": np.ones(2, np.float32), "b": np.zeros(2, np.float32)})),
    ("10.16", "LayerNormalization", "Only the first output", lambda: _model(
        [_node("LayerNormalization", ["x", "s"], ["y", "mean"])], [("x", F, [2, 3])], ["y", "mean"],
        {"s": np.ones(3, np.float32)})),
    ("10.0", "LpPool", "`dilations`", lambda: _model(
        [_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])], [("x", F, [1, 1, 6, 6])], ["y"],
        opset=18)),
    ("8.5", "MaxPool", "2D or 3D pooling", lambda: _model([_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2, 2])],
                                                         [("x", F, [1, 1, 3, 3, 3, 3])], ["y"])),
    ("10.16", "MaxPool", "`Indices` output", lambda: _maxpool(used=True)),
    ("10.0", "MaxPool", "`dilations`", lambda: _maxpool(indices=False, dilations=[2, 2])),
    ("10.16", "OneHot", "`depth`", lambda: _model(
        [_node("OneHot", ["i", "d", "v"], ["y"])], [("i", I64, [3]), ("d", I64, [])], ["y"],
        {"v": np.array([0, 1], np.float32)})),
    ("10.0", "Pad", "`axes` must be an initializer", lambda: _model(
        [_node("Pad", ["x", "p", "", "a"], ["y"])], [("x", F, [2, 3]), ("a", I64, [1])], [("y", F, [None, None])],
        {"p": np.array([1, 1], np.int64)}, opset=18)),
    ("10.16", "QuantizeLinear", "`y_zero_point`", lambda: _model(
        [_node("QuantizeLinear", ["x", "s", "zp"], ["y"])], [("x", F, [3])], ["y"],
        {"s": np.float32(0.5), "zp": np.int8(3)})),
    *[("10.0", op, "`axes` must be an initializer", _reduce(op))
      for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                 "ReduceProd", "ReduceSum", "ReduceSumSquare")],
    ("10.16", "ReduceSum", "`axes` must be an initializer", _reduce("ReduceSum")),
    ("8.5", "Resize", "Supported resize transformation modes", lambda: _resize(
        opset=13, coordinate_transformation_mode="tf_crop_and_resize")),
    ("10.16", "Resize", "Supported resize modes", lambda: _resize(mode="cubic")),
    ("10.16", "Resize", "Supported aspect ratio policy", lambda: _resize(sizes=True, keep_aspect_ratio_policy="not_larger")),
    ("10.0", "Resize", "When `scales` is a tensor input", lambda: _model(
        [_node("Resize", ["x", "", "s"], ["y"], axes=[2, 3])], [("x", F, [1, 1, 4, 4])], ["y"],
        {"s": np.array([2, 2], np.float32)}, opset=18)),
    ("10.16", "Resize", "Antialiasing", lambda: _resize(mode="linear", antialias=1)),
    ("8.5", "ReverseSequence", "Dynamic input shapes", lambda: _model(
        [_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)], [("x", F, ["t", 2])], ["y"],
        {"l": np.array([1, 1], np.int64)})),
    ("10.16", "STFT", "`frame_step` and `window`", lambda: _model(
        [_node("STFT", ["x", "fs", "", "fl"], ["y"])], [("x", F, [1, 16, 1]), ("fs", I64, [])],
        [("y", F, [None, None, None, None])],
        {"fl": np.int64(4)})),
    ("10.16", "STFT", "Input must be real", lambda: _model(
        [_node("STFT", ["x", "fs", "", "fl"], ["y"], onesided=0)], [("x", F, [1, 16, 2])], ["y"],
        {"fs": np.int64(4), "fl": np.int64(4)})),
    ("10.0", "ScatterND", "`reduction` is not", lambda: _model(
        [_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")], [("x", F, [4]), ("u", F, [1])], ["y"],
        {"i": np.array([[1]], np.int64)}, opset=16)),
    ("10.16", "ScatterND", "`reduction` other than", lambda: _model(
        [_node("ScatterND", ["x", "i", "u"], ["y"], reduction="mul")], [("x", F, [4]), ("u", F, [1])], ["y"],
        {"i": np.array([[1]], np.int64)}, opset=18)),
    ("8.5", "Slice", "`axes` must be an initializer", lambda: _model(
        [_node("Slice", ["x", "st", "en", "a"], ["y"])], [("x", F, [4, 4]), ("a", I64, [1])], ["y"],
        {"st": np.array([1], np.int64), "en": np.array([3], np.int64)})),
    ("8.5", "Squeeze", "`axes` must be an initializer", lambda: _model(
        [_node("Squeeze", ["x", "a"], ["y"])], [("x", F, [1, 3]), ("a", I64, [1])], [("y", F, [None])])),
    ("10.16", "Squeeze", "`axes` must be resolvable", lambda: _model(
        [_node("Squeeze", ["x", "a"], ["y"])], [("x", F, [1, 3]), ("a", I64, [1])], [("y", F, [None])])),
    ("8.5", "Unsqueeze", "`axes` must be a constant", lambda: _model(
        [_node("Unsqueeze", ["x", "a"], ["y"])], [("x", F, [3]), ("a", I64, [1])], [("y", F, [None, None])])),
    ("10.16", "Unsqueeze", "`axes` must be resolvable", lambda: _model(
        [_node("Unsqueeze", ["x", "a"], ["y"])], [("x", F, [3]), ("a", I64, [1])], [("y", F, [None, None])])),
    ("10.16", "TensorScatter", "`past_cache` and `update`", lambda: _model(
        [_node("TensorScatter", ["c", "u"], ["y"])], [("c", F, [1, 4, 8]), ("u", F, [1, 1, 8])], ["y"], opset=24)),
    ("10.16", "TensorScatter", "`axis` must be -2", lambda: _model(
        [_node("TensorScatter", ["c", "u"], ["y"], axis=-1)], [("c", F, [1, 2, 8, 4]), ("u", F, [1, 2, 8, 1])], ["y"],
        opset=24)),
    ("8.5", "TopK", "`K` input must be an initializer", lambda: _topk(2, k_input=True)),
    ("10.1", "TopK", "`sorted` must be 1", lambda: _topk(2, sorted_=0)),
    ("10.16", "TopK", "`K` input must be less than 3840", lambda: _topk(4000, dim=5000)),
    ("10.16", "TopK", "`K` input must be less than 3840", lambda: _topk(4000, dim=5000, k_input=True)),
]


def _clause(release, op, start):
    texts = [r["text"] for r in TABLE[release]["rules"][op] if r["text"].startswith(start)]
    assert len(texts) == 1, (release, op, start, texts)
    return texts[0]


@pytest.mark.parametrize("release, op, start, build", REFUSED, ids=[f"{r}-{o}-{s[:24]}" for r, o, s, _ in REFUSED])
def test_a_node_breaking_a_restriction_is_refused_naming_it(release, op, start, build):
    clause, model = _clause(release, op, start), build()
    found = restriction_violations(model, parse_target(f"tensorrt=={release}"))
    assert [(v.op, v.restriction) for v in found] == [(op, clause)], found
    assert found[0].node == "node 'n' (%s) in main graph" % op
    with pytest.raises(RewriterError, match=re.escape(clause)) as e:
        convert_for(model, runtime=f"tensorrt=={release}")
    assert "node 'n'" in str(e.value) and f"tensorrt {release}'s operators.md" in str(e.value)


def test_every_structured_restriction_has_a_model_here():
    tested = {(op, _clause(r, op, s)) for r, op, s, _ in REFUSED} | {(op, t) for op, t in REWRITTEN_CLAUSES} \
        | {(op, t) for op, t in NOT_BREAKABLE}
    in_data = {(op, r["text"]) for e in TABLE.values() for op, rules in e["rules"].items() for r in rules}
    assert in_data - tested == set()


# ------------------------------------------------------------ rewritten exactly

def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _q_dq_pair():
    return _model([_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
                   helper.make_node("DequantizeLinear", ["q", "s", "zp2"], ["y"], name="dq")],
                  [("x", F, [6])], ["y"], {"s": np.float32(0.5), "zp": np.uint8(128), "zp2": np.uint8(128)})


def _dq_of_constant():
    w = np.array([[0, 128, 255], [100, 129, 30]], np.uint8)
    return _model([_node("DequantizeLinear", ["w", "s", "zp"], ["d"], axis=0), helper.make_node("Add", ["d", "x"], ["y"])],
                  [("x", F, [2, 3])], ["y"], {"w": w, "s": np.array([0.5, 0.25], np.float32),
                                               "zp": np.array([128, 100], np.uint8)})


def _folded_axes():
    return _model([_const("a32", np.array([0], np.int32)), helper.make_node("Cast", ["a32"], ["a"], to=I64, name="c"),
                   _node("Unsqueeze", ["x", "a"], ["y"])], [("x", F, [3])], [("y", F, [1, 3])])


# (release, op, the clause's start, builder, feeds, the op's node count after): rewritten exactly
REWRITTEN = [
    ("10.16", "MaxPool", "`Indices` output", lambda: _maxpool(), {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)}),
    ("8.5", "MaxPool", "`Indices` output", lambda: _maxpool(), {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)}),
    ("10.1", "LayerNormalization", "Only the first output", lambda: _model(
        [_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"])], [("x", F, [2, 3])], ["y"],
        {"s": np.ones(3, np.float32)}), {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}),
    ("10.16", "Attention", "`present_key`", lambda: _attention(present=True),
     {k: np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32) for k in "qkv"}),
    ("10.16", "QuantizeLinear", "`y_zero_point`", _q_dq_pair,
     {"x": np.array([-70.0, -64.2, -1.3, 0.25, 63.4, 99.0], np.float32)}),
    ("8.5", "DequantizeLinear", "`x_zero_point`", _dq_of_constant, {"x": np.ones((2, 3), np.float32)}),
    ("10.16", "DequantizeLinear", TYPES, lambda: _model(
        [_node("DequantizeLinear", ["w", "s"], ["d"]), helper.make_node("Add", ["d", "x"], ["y"])],
        [("x", F, [3])], ["y"], {"w": np.array([0, 7, 127], np.uint8), "s": np.float32(0.5)}),
     {"x": np.ones(3, np.float32)}),
    ("10.16", "Unsqueeze", "`axes` must be resolvable", _folded_axes, {"x": np.arange(3, dtype=np.float32)}),
    ("10.16", "If", "Output tensors of the two conditional branches must have the same rank",
     lambda: _if([2], [2], same_names=True), {"c": np.array(False)}),
    ("10.16", "MaxPool", "2D or 3D pooling", lambda: _maxpool(rank=3, indices=False, pads=[1, 0]),
     {"x": np.arange(8, dtype=np.float32).reshape(1, 1, 8)}),
    ("8.5", "AveragePool", "2D or 3D", lambda: _model(
        [_node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1], count_include_pad=1)],
        [("x", F, [1, 2, 9])], ["y"], opset=11), {"x": np.arange(18, dtype=np.float32).reshape(1, 2, 9)}),
    ("10.16", "AveragePool", "2D or 3D", lambda: _model(
        [_node("AveragePool", ["x"], ["y"], kernel_shape=[3], auto_pad="SAME_UPPER", ceil_mode=1)],
        [("x", F, [2, 1, 7])], ["y"]), {"x": np.arange(14, dtype=np.float32).reshape(2, 1, 7)}),
    ("8.5", "If", "Output tensors of the two conditional branches must have broadcastable",
     lambda: _if([2], [2], same_names=True), {"c": np.array(True)}),
    ("10.16", "CumSum", "`axis` must be a build-time", lambda: _model(
        [_const("a", np.int64(0)), helper.make_node("Identity", ["a"], ["a2"], name="id"),
         _node("CumSum", ["x", "a2"], ["y"])], [("x", F, [2, 3])], ["y"]),
     {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}),
]
REWRITTEN_CLAUSES = [(op, _clause(r, op, s)) for r, op, s, _, _ in REWRITTEN]


@pytest.mark.parametrize("release, op, start, build, feeds", REWRITTEN,
                         ids=[f"{r}-{o}-{s[:20]}" for r, o, s, _, _ in REWRITTEN])
def test_a_node_breaking_a_restriction_an_exact_rewrite_meets_is_rewritten(release, op, start, build, feeds):
    model, target = build(), parse_target(f"tensorrt=={release}")
    assert _clause(release, op, start) in [v.restriction for v in restriction_violations(model, target)]
    result, report = convert_for(model, runtime=target)
    assert restriction_violations(result, target) == [] and not blockers(result, target)
    onnx.checker.check_model(result, full_check=True)
    assert any(op in n for n in report.target_notes[1:]), report.target_notes
    for got, want in zip(_run(result, feeds), _run(model, feeds)):
        np.testing.assert_array_equal(got, want)


def test_the_q_dq_rewrite_is_int8_with_zero_points_of_zero():
    result, _ = convert_for(_q_dq_pair(), runtime="tensorrt==10.16")
    zps = {n.op_type: numpy_helper.to_array(next(t for t in result.graph.initializer if t.name == n.input[2]))
           for n in result.graph.node}
    assert all(v.dtype == np.int8 and v == 0 for v in zps.values())
    assert {t.name for t in result.graph.initializer} == {"s", *(n.input[2] for n in result.graph.node)}


def test_a_dq_whose_shifted_constant_does_not_fit_int8_is_refused():
    model = _model([_node("DequantizeLinear", ["w", "s", "zp"], ["y"])], [], ["y"],
                   {"w": np.array([0, 255], np.uint8), "s": np.float32(1.0), "zp": np.uint8(10)})
    with pytest.raises(RewriterError, match="x_zero_point"):
        convert_for(model, runtime="tensorrt==10.16")


@pytest.mark.parametrize("w, zp, fits", [
    (255, 128, True), (255, 127, False),  # x - zp = 127 fits int8; 128 would wrap to -128
    (0, 128, True), (0, 129, False),  # -128 fits; -129 would wrap to 127
])
def test_the_dq_int8_rewrite_stops_exactly_at_int8s_range(w, zp, fits):
    model = _model([_node("DequantizeLinear", ["w", "s", "zp"], ["d"]), helper.make_node("Add", ["d", "x"], ["y"])],
                   [("x", F, [2])], ["y"], {"w": np.array([w, 128], np.uint8), "s": np.float32(0.5),
                                            "zp": np.uint8(zp)})
    if not fits:
        with pytest.raises(RewriterError, match="x_zero_point"):
            convert_for(model, runtime="tensorrt==10.16")
        return
    result, _ = convert_for(model, runtime="tensorrt==10.16")
    dq = next(n for n in result.graph.node if n.op_type == "DequantizeLinear")
    shifted = numpy_helper.to_array(next(t for t in result.graph.initializer if t.name == dq.input[0]))
    assert shifted.dtype == np.int8 and shifted.tolist() == [w - zp, 128 - zp] and len(dq.input) == 2
    x = np.array([1.0, -2.0], np.float32)
    want = (np.array([w, 128], np.float64) - zp) * 0.5 + x  # exact in float32 at these values
    np.testing.assert_array_equal(_run(result, {"x": x})[0], want.astype(np.float32))
    np.testing.assert_array_equal(_run(model, {"x": x})[0], want.astype(np.float32))


def test_a_q_whose_quantized_value_another_node_reads_stays_and_is_refused():
    model = _q_dq_pair()
    model.graph.output.append(helper.make_tensor_value_info("q", U8, [6]))
    with pytest.raises(RewriterError, match="y_zero_point"):
        convert_for(model, runtime="tensorrt==10.16")


def test_a_float_input_computed_from_constants_is_not_folded():
    # STFT's window: a float computation stays as it is (folding it here could round otherwise)
    model = _model([_const("w0", np.ones(4, np.float32)), helper.make_node("Relu", ["w0"], ["w"], name="r"),
                    _node("STFT", ["x", "fs", "w"], ["y"])], [("x", F, [1, 16, 1])], [("y", F, [None, None, None, None])],
                   {"fs": np.int64(4)})
    with pytest.raises(RewriterError, match="`frame_step` and `window`"):
        convert_for(model, runtime="tensorrt==10.16")


# ------------------------------------------------------------ restrictions no valid model breaks, and passes

def _nearest_modes():
    return [_resize(opset=13, mode="nearest", nearest_mode=m) for m in
            ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")]


# every value ONNX allows is one TensorRT takes, or the type ONNX allows is the one TensorRT wants
NOT_BREAKABLE = [
    ("Resize", _clause("10.16", "Resize", "Supported nearest modes")),
    ("RotaryEmbedding", _clause("10.16", "RotaryEmbedding", "`position_ids`")),
]


def test_restrictions_valid_models_meet_are_still_checked():
    t = parse_target("tensorrt==10.16")
    for model in _nearest_modes():
        assert restriction_violations(model, t) == []
    rope = _model([_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"])],
                  [("x", F, [1, 2, 3, 4]), ("c", F, [8, 2]), ("s", F, [8, 2]), ("p", I64, [1, 3])], ["y"], opset=23)
    assert restriction_violations(rope, t) == []
    rope.graph.input[3].type.tensor_type.elem_type = T.INT32  # not valid ONNX, but the rule sees it
    assert [v.restriction for v in restriction_violations(rope, t, inferred=rope)] == ["`position_ids` must be INT64"]


def test_nodes_that_meet_the_restrictions_pass():
    t = parse_target("tensorrt==10.16")
    fine = [_topk(3), _topk(2, dim=100, k_input=True), _maxpool(), _resize(), _if([2], [3]),
            _model([_node("Dropout", ["x", "", "t"], ["y"])], [("x", F, [2])], ["y"], {"t": np.bool_(False)}),
            _model([_node("ReduceSum", ["x", "a"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 1])],
                   {"a": np.array([1], np.int64)}, opset=18),
            _model([_node("QuantizeLinear", ["x", "s", "zp"], ["y"])], [("x", F, [3])], ["y"],
                   {"s": np.float32(0.5), "zp": np.int8(0)})]
    for model in fine:
        got = restriction_violations(model, t)
        assert got == [] or [v.kind for v in got] == ["outputs_unused"], got  # _maxpool's Indices: dropped
    assert restriction_violations(_if([2], [2, 2]), t)[0].reason.startswith("output 0 has rank 1")
    assert restriction_violations(_if([2], [3]), parse_target("tensorrt==8.5"))[0].reason.endswith("(not broadcastable)")


def test_restrictions_hold_in_subgraphs_and_functions():
    pool = _node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], strides=[2, 2])
    pool.name = "inner"
    fn = helper.make_function("local", "f", ["x"], ["y", "idx"], [pool], [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("f", ["x"], ["y", "idx"], domain="local", name="call")], "g",
                              [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", F, [1, 1, 2, 2]),
                               helper.make_tensor_value_info("idx", I64, [1, 1, 2, 2])])
    model = helper.make_model(graph, functions=[fn], ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    found = restriction_violations(model, parse_target("tensorrt==10.16"))
    assert [(v.where, v.reason) for v in found] == [("function 'local:f'", "its output Indices ('idx') is used")]


# ------------------------------------------------------------ the command line

def test_check_target_names_each_restriction_and_convert_writes_nothing_when_refused(tmp_path, capsys):
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_topk(2, sorted_=0), path)
    assert cli.main(["check", path, "--target", "tensorrt==10.16"]) == 1
    text = capsys.readouterr().out
    assert "node 'n' (TopK) in main graph: sorted is 0 (operators.md: \"`sorted` must be 1\")" in text
    assert cli.main(["check", path, "--target", "tensorrt==10.0"]) == 0  # 10.0's operators.md does not state it
    capsys.readouterr()
    assert cli.main(["convert", path, "--target", "tensorrt==10.16", "-o", out]) == 2
    err = capsys.readouterr().err
    assert "node 'n' (TopK)" in err and "`sorted` must be 1" in err and not os.path.exists(out)
    assert cli.main(["convert", path, "--target", "tensorrt==10.16", "--plan", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [(b["op"], b["step"]) for b in doc["blockers"]] == [("TopK", "restriction")]
    assert "tensorrt 8.5, 8.6, 10.0" in doc["blockers"][0]["works"]


def test_convert_target_rewrites_and_says_so(tmp_path, capsys):
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_maxpool(), path)
    assert cli.main(["convert", path, "--target", "tensorrt==10.16", "-o", out, "--verify"]) == 0
    assert "MaxPool: unused optional output(s) dropped x1" in capsys.readouterr().out
    written = onnx.load(out)
    assert list(written.graph.node[0].output) == ["y"] and not blockers(written, parse_target("tensorrt==10.16"))


def test_blocked_conversions_name_the_restricted_nodes_too():
    # an op TensorRT 8.5 lacks without a function body, beside a MaxPool whose Indices is used
    model = _maxpool(used=True)
    model.graph.node.append(helper.make_node("Det", ["m"], ["d"], name="det"))
    model.graph.input.append(helper.make_tensor_value_info("m", F, [2, 2]))
    model.graph.output.append(helper.make_tensor_value_info("d", F, []))
    with pytest.raises(RewriterError) as e:
        convert_for(model, runtime="tensorrt==8.5")
    assert "node 'det'" in str(e.value) and "`Indices` output tensor unsupported" in str(e.value)


# ------------------------------------------------------------ edges

def test_a_rank_shape_inference_cannot_tell_counts_as_breaking_the_rule():
    model = _maxpool(indices=False)
    model.graph.input[0].type.tensor_type.ClearField("shape")  # no rank: not a valid model any more
    found = restriction_violations(model, parse_target("tensorrt==10.16"), inferred=model)
    assert [v.reason for v in found] == ["the rank of input X ('x') is not known (shape inference gives none; "
                                         "--input-shape may tell)"]


def test_an_initializer_that_is_also_a_graph_input_is_one_the_parser_takes_as_weights():
    model = _model([_node("Unsqueeze", ["x", "a"], ["y"])], [("x", F, [3])], [("y", F, [1, 3])],
                   {"a": np.array([0], np.int64)})
    model.graph.input.append(helper.make_tensor_value_info("a", I64, [1]))  # IR 3's form
    assert restriction_violations(model, parse_target("tensorrt==8.5")) == []


@pytest.mark.parametrize("zp, zp2, scale2", [(100, 100, 0.5), (100, 128, 0.5), (128, 128, 0.25)],
                         ids=["other-zero-point", "other-q-zero-point", "other-scale"])
def test_a_uint8_q_dq_pair_that_is_not_exactly_int8_is_refused(zp, zp2, scale2):
    # zero points other than 128 clamp to another range; another scale is another computation
    model = _model([_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
                    helper.make_node("DequantizeLinear", ["q", "s2", "zp2"], ["y"], name="dq")],
                   [("x", F, [6])], ["y"], {"s": np.float32(0.5), "zp": np.uint8(zp), "s2": np.float32(scale2),
                                            "zp2": np.uint8(zp2)})
    with pytest.raises(RewriterError, match="y_zero_point"):
        convert_for(model, runtime="tensorrt==10.16")


def test_a_zero_point_that_is_not_a_constant_is_refused():
    model = _model([_node("DequantizeLinear", ["x", "s", "zp"], ["y"])], [("x", I8, [3]), ("zp", I8, [])], ["y"],
                   {"s": np.float32(0.5)})
    found = restriction_violations(model, parse_target("tensorrt==10.16"))
    assert [v.reason for v in found] == ["input x_zero_point ('zp') is not a constant"]


def test_the_shipped_rules_are_what_the_clause_table_makes_of_the_shipped_text():
    import importlib.util

    spec = importlib.util.spec_from_file_location("trt_restrictions",
                                                  os.path.join(ROOT, "tools", "runtime_data", "trt_restrictions.py"))
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    for release, entry in TABLE.items():
        text = {op: t for op, t in entry["restrictions"].items() if op in entry["supported"]}
        assert table.structure(text, _extract(release, column=3)[1]) == (entry["rules"], entry["unchecked"]), release
    with pytest.raises(ValueError, match="is in no clause"):
        table.structure({"TopK": "`sorted` must be 1. `largest` must be 1."})


def test_a_k_computed_at_run_time_passes_when_constants_bound_it_below_the_limit():
    # torchvision's detection heads: K = ReduceMin(Concat([150], Unsqueeze(Shape(x)[1]))) over a dynamic dim
    def topk(cap, dim="anchors"):
        return _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                       helper.make_node("Gather", ["s", "at"], ["n"], axis=0, name="g"),
                       helper.make_node("Unsqueeze", ["n", "zero"], ["n1"], name="u"),
                       helper.make_node("Concat", ["cap", "n1"], ["both"], axis=0, name="c"),
                       helper.make_node("ReduceMin", ["both"], ["k0"], keepdims=0, name="m"),
                       helper.make_node("Reshape", ["k0", "one"], ["k"], name="r"),
                       _node("TopK", ["x", "k"], ["v", "i"])],
                      [("x", F, [1, dim])], [("v", F, [1, None]), ("i", I64, [1, None])],
                      {"one": np.array([1], np.int64), "zero": np.array([0], np.int64), "at": np.int64(1),
                       "cap": np.array([cap], np.int64)})
    t = parse_target("tensorrt==10.16")
    assert restriction_violations(topk(150), t) == []
    assert restriction_violations(topk(150, dim=5000), t) == []  # min(150, 5000), though the dim is over the limit
    assert len(restriction_violations(topk(5000, dim=6000), t)) == 1  # min(5000, 6000): the dim picked, not the 1
    assert [v.reason for v in restriction_violations(topk(5000), t)] == [
        "K is computed at run time, and neither a bound on it nor the dim it selects from is known below 3840"]


def test_a_k_exactly_at_the_less_than_limit_is_refused():
    """operators.md: K "must be less than 3840": 3840 itself breaks it, 3839 meets it; as a constant,
    as a bound of a K computed at run time (Min of 3840 and a dynamic dim), and as the static dim
    a run-time K selects from."""
    t = parse_target("tensorrt==10.16")

    def bounded(cap):
        return _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                       helper.make_node("Gather", ["s", "at"], ["n"], axis=0, name="g"),
                       helper.make_node("Min", ["n", "cap"], ["k0"], name="m"),
                       helper.make_node("Reshape", ["k0", "one"], ["k"], name="r"),
                       _node("TopK", ["x", "k"], ["v", "i"])],
                      [("x", F, [1, "anchors"])], [("v", F, [1, None]), ("i", I64, [1, None])],
                      {"one": np.array([1], np.int64), "at": np.int64(1), "cap": np.int64(cap)})

    for limit_minus in (0, 1):
        k = 3840 - limit_minus
        for model in (_topk(k, dim=5000), bounded(k), _topk(None, dim=k, k_input=True)):
            found = restriction_violations(model, t)
            if limit_minus:
                assert found == [], (k, found)
            else:
                assert [v.restriction for v in found] == [_clause("10.16", "TopK", "`K` input")], (k, found)
    with pytest.raises(RewriterError, match="K is 3840, not below 3840"):
        convert_for(_topk(3840, dim=5000), runtime="tensorrt==10.16")


def test_a_signal_without_its_last_axis_is_real():
    # [batch, length]: what exporters of speech front ends give STFT, and what ONNX Runtime reads as real
    model = _model([_node("STFT", ["x", "fs", "", "fl"], ["y"])], [("x", F, [1, "n"])],
                   [("y", F, [None, None, None, None])], {"fs": np.int64(4), "fl": np.int64(4)})
    assert restriction_violations(model, parse_target("tensorrt==10.16")) == []
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_param = "c"
    assert [v.reason for v in restriction_violations(model, parse_target("tensorrt==10.16"))] == [
        "input signal ('x') has shape [1, 'n', 'c']: not known to be real"]


def test_convert_dtype_for_tensorrt_writes_no_half_type_its_ops_refuse(tmp_path, capsys, monkeypatch):
    """The half rewrite runs after the restrictions were met: a type it makes that a rule refuses
    stops the command. (No shipped rule is broken so: TensorRT's Q/DQ take the half types its
    opsets allow. So the rule here is made up: a Relu in float32 only.)"""
    import dataclasses

    import rewriter.targets.spec as spec_module  # the one parser of --target (TargetSpec.parse) reads it

    real = spec_module.parse_target
    rule = {"text": "Supported Types: FP32", "kind": "input_type", "input": 0, "types": ["FLOAT"]}
    monkeypatch.setattr(spec_module, "parse_target",
                        lambda spec: dataclasses.replace(real(spec), rules={"Relu": [rule]}))
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_model([_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"], name="n2")],
                     [("x", F, [3])], ["y"]), path)
    assert cli.main(["convert", path, "--target", "tensorrt==10.16", "-o", out]) == 0
    capsys.readouterr()
    assert cli.main(["convert", path, "--dtype", "float16", "--target", "tensorrt==10.16", "-o", out,
                     "--no-keep-io-types"]) == 2
    err = capsys.readouterr().err
    assert "cannot write float16 for tensorrt 10.16" in err and "Supported Types: FP32" in err
