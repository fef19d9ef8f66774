"""Fuzz every command's entry point with mutated models: success or one ``error:`` line, never a crash.

Hypothesis mutates (a) the serialized bytes of valid models and (b) fields of parsed valid
models (opsets, op types, attributes, names, dims, data types). Each mutant runs through
``rewriter.cli.main`` in-process for convert, fold, optimize and check. Every outcome must be
exit 0/1 or a RewriterError reported as exit 2 with one ``error:`` line; any other exception
fails the test. The number of cases run is printed in the test summary (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli

LATEST = onnx.defs.onnx_opset_version()
RUNS = {"byte mutants": 0, "field mutants": 0, "command runs": 0, "exit 0": 0, "exit 1": 0, "exit 2": 0}


def _seeds() -> list[onnx.ModelProto]:
    w = numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    plain = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
         helper.make_node("ReduceProd", ["s"], ["y"], name="rp", axes=[1], keepdims=0)], "g", [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w]),
        opset_imports=[helper.make_opsetid("", 13)])
    axes_input = helper.make_model(helper.make_graph(
        [helper.make_node("ReduceProd", ["w", "ax"], ["y"], name="rp18", keepdims=1)], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
        [w, numpy_helper.from_array(np.array([-1], np.int64), "ax")]),
        opset_imports=[helper.make_opsetid("", 18)])
    branch = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["b"], axes=[0], keepdims=1)], "b", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3])])
    other = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["o"], axes=[-2], keepdims=1)], "o", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 3])])
    subgraph = helper.make_model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)], "g",
        [x, helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])]), opset_imports=[helper.make_opsetid("", 11)])
    fn = helper.make_function("local", "P", ["a"], ["b"], [helper.make_node("ReduceProd", ["a"], ["b"], axes=[1])],
                              [helper.make_opsetid("", 13)])
    function = helper.make_model(helper.make_graph(
        [helper.make_node("P", ["w"], ["y"], domain="local")], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])], [w]),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)], functions=[fn])
    int_model = helper.make_model(helper.make_graph(
        [helper.make_node("ReduceProd", ["k"], ["y"], axes=[0], keepdims=0)], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [2])],
        [numpy_helper.from_array(np.array([[70000, 3], [70000, -2]], np.int32), "k")]),
        opset_imports=[helper.make_opsetid("", 1)])
    return [plain, axes_input, subgraph, function, int_model]


SEEDS = _seeds()
SEED_BYTES = [m.SerializeToString() for m in SEEDS]


def _run_all_commands(data: bytes, opset: int, files: dict[str, bytes] | None = None) -> None:
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.onnx")
        with open(model, "wb") as f:
            f.write(data)
        for name, content in (files or {}).items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(content)
        for argv in (["convert", model, "--opset", str(opset), "-o", os.path.join(d, "c.onnx")],
                     ["fold", model, "-o", os.path.join(d, "f.onnx")],
                     ["optimize", model, "-o", os.path.join(d, "o.onnx")],
                     ["check", model]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = cli.main(argv)  # anything but a RewriterError propagates and fails the test
            RUNS["command runs"] += 1
            RUNS[f"exit {rc}"] = RUNS.get(f"exit {rc}", 0) + 1
            assert rc in (0, 1, 2), (argv, rc)
            if rc == 2:
                lines = err.getvalue().splitlines()
                assert lines and lines[-1].startswith("error: "), err.getvalue()
            if rc == 0 and argv[0] != "check":
                onnx.load(argv[-1])  # what was written is a loadable model


@st.composite
def _byte_mutant(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEED_BYTES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[pos:]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_byte_mutant(), st.integers(1, LATEST))
def test_fuzz_mutated_bytes(data, opset):
    RUNS["byte mutants"] += 1
    _run_all_commands(data, opset)


def _all_nodes(model):
    graphs = [model.graph]
    nodes = []
    while graphs:
        g = graphs.pop()
        for n in g.node:
            nodes.append(n)
            graphs += [a.g for a in n.attribute if a.HasField("g")]
    for f in model.functions:
        nodes += list(f.node)
    return nodes


@st.composite
def _field_mutant(draw) -> bytes:
    model = onnx.ModelProto()
    model.CopyFrom(draw(st.sampled_from(SEEDS)))
    nodes = _all_nodes(model)
    small_int = st.integers(-4, 4)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["opset", "ir", "op_type", "attr", "axes", "input", "dims", "dtype",
                                     "drop_init", "drop_node", "output_name", "domain"]))
        node = draw(st.sampled_from(nodes)) if nodes else None
        if kind == "opset":
            model.opset_import[0].version = draw(st.integers(-1, LATEST + 3))
        elif kind == "ir":
            model.ir_version = draw(st.integers(0, 14))
        elif kind == "op_type" and node is not None:
            node.op_type = draw(st.sampled_from(["ReduceProd", "ReduceSum", "Identity", "Add", "Nope", ""]))
        elif kind == "attr" and node is not None:
            name = draw(st.sampled_from(["keepdims", "noop_with_empty_axes", "axes", "bogus"]))
            for a in list(node.attribute):
                if a.name == name:
                    node.attribute.remove(a)
            if draw(st.booleans()):
                node.attribute.append(helper.make_attribute(name, draw(small_int)))
            else:
                node.attribute.append(helper.make_attribute(name, draw(st.lists(small_int, max_size=4)),
                                                            attr_type=onnx.AttributeProto.INTS))
        elif kind == "axes" and model.graph.initializer:
            t = draw(st.sampled_from(list(model.graph.initializer)))
            values = draw(st.lists(small_int, max_size=4))
            t.CopyFrom(numpy_helper.from_array(np.array(values, np.int64), t.name))
        elif kind == "input" and node is not None and node.input:
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(["x", "w", "s", "y", "", "q"]))
        elif kind == "dims" and model.graph.initializer:
            t = draw(st.sampled_from(list(model.graph.initializer)))
            del t.dims[:]
            t.dims.extend(draw(st.lists(st.integers(-1, 7), max_size=3)))
        elif kind == "dtype" and model.graph.initializer:
            draw(st.sampled_from(list(model.graph.initializer))).data_type = draw(st.integers(0, 26))
        elif kind == "drop_init" and model.graph.initializer:
            del model.graph.initializer[0]
        elif kind == "drop_node" and model.graph.node:
            del model.graph.node[draw(st.integers(0, len(model.graph.node) - 1))]
        elif kind == "output_name" and node is not None and node.output:
            node.output[0] = draw(st.sampled_from(["x", "w", "s", "y", "z"]))
        elif kind == "domain" and node is not None:
            node.domain = draw(st.sampled_from(["", "ai.onnx", "local", "com.unknown"]))
    return model.SerializeToString()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_field_mutant(), st.integers(1, LATEST))
def test_fuzz_mutated_fields(data, opset):
    RUNS["field mutants"] += 1
    _run_all_commands(data, opset)


WEIGHTS = np.arange(1, 7, dtype=np.float32).tobytes()


@st.composite
def _external_mutant(draw) -> bytes:
    """A seed whose initializer 'w' is external data with fuzzed location / offset / length."""
    model = onnx.ModelProto()
    model.CopyFrom(SEEDS[0])
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    text = st.sampled_from(["w.bin", "./w.bin", "sub/../w.bin", "../w.bin", "/etc/hostname", "", "m.onnx",
                            "w.bin\x00", "nonexistent.bin", ".", "..", "//w.bin", "C:\\w.bin"])
    number = st.one_of(st.integers(-30, 60).map(str), st.sampled_from(["", "x", "1e3", str(2 ** 70), " 4"]))
    for key, value in draw(st.lists(st.tuples(st.sampled_from(["location", "offset", "length", "checksum",
                                                                "__rewriter_base__", "__rewriter_inline__"]),
                                              st.one_of(text, number)), min_size=1, max_size=5)):
        e = t.external_data.add()
        e.key, e.value = key, value
    return model.SerializeToString()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_external_mutant(), st.integers(1, LATEST))
def test_fuzz_external_data_references(data, opset):
    RUNS["external mutants"] = RUNS.get("external mutants", 0) + 1
    _run_all_commands(data, opset, {"w.bin": WEIGHTS})
