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
            assert "Traceback" not in err.getvalue(), err.getvalue()
            if rc == 2:
                lines = err.getvalue().splitlines()
                assert lines and lines[-1].startswith("error: "), err.getvalue()
                assert sum(ln.startswith("error:") for ln in lines) == 1, err.getvalue()
            if rc == 0 and argv[0] != "check":
                onnx.checker.check_model(argv[-1])  # what was written passes the checker


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


# ---------------------------------------------------------------- structural mutants of export-like models
#
# Models shaped like exporters' output (symbolic batch dim, MatMul/Add/Relu, a weight stored as
# external data, a ReduceProd over a weight, the Shape->ReduceProd numel pattern, an If whose
# branches read outer values, a model-local function), mutated the ways real files go wrong.
# Oracle for every command run: exit status 0, 1 or 2; on failure exactly one `error:` line, no
# traceback, an existing output byte-identical and no file left behind; on success the output
# passes onnx.checker (its full check when the input passed it) and loads in ONNX Runtime when
# the input did.

W_EXT = np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)


def _export_like() -> onnx.ModelProto:
    f = TensorProto.FLOAT
    w = numpy_helper.from_array(W_EXT, "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(W_EXT.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    inits = [w, numpy_helper.from_array(np.full(4, 0.25, np.float32), "B"),
             numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "C"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    then_g = helper.make_graph([helper.make_node("Relu", ["h"], ["t"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t", f, ["N", 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["h"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", f, ["N", 4])])
    fn = helper.make_function("local", "Scale", ["a", "b"], ["c"],
                              [helper.make_node("Mul", ["a", "b"], ["c"], name="fn_mul")],
                              [helper.make_opsetid("", 18)])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "B"], ["h"], name="add"),
        helper.make_node("If", ["cond"], ["br"], name="if", then_branch=then_g, else_branch=else_g),
        helper.make_node("ReduceProd", ["C", "ax"], ["cp"], name="const_prod", keepdims=0),
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("ReduceProd", ["shp"], ["numel"], name="numel", keepdims=0),
        helper.make_node("Scale", ["br", "br"], ["sq"], name="call", domain="local"),
        helper.make_node("ReduceProd", ["sq", "ax"], ["y"], name="rp_out", keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "export", [helper.make_tensor_value_info("x", f, ["N", 3]),
                          helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", f, ["N"]), helper.make_tensor_value_info("cp", f, [2]),
         helper.make_tensor_value_info("numel", TensorProto.INT64, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
                              functions=[fn], producer_name="pytorch", producer_version="2.5")
    model.ir_version = 8
    return model


EXPORT_LIKE = _export_like()


def _scopes_nodes(model):
    """(graph, node) pairs of the main graph and its subgraphs."""
    found, graphs = [], [model.graph]
    while graphs:
        g = graphs.pop()
        for n in g.node:
            found.append((g, n))
            graphs += [a.g for a in n.attribute if a.HasField("g")]
    return found


STRUCTURAL = ["shuffle", "delete_node", "dangling", "attr_type", "attr_value", "init_dims", "elem_type",
              "dup_name", "dup_output", "opset", "no_default_opset", "ir", "domain", "drop_outputs",
              "outer_undefined", "cycle", "ext_length"]


@st.composite
def _structural_mutant(draw) -> tuple[bytes, str]:
    model = onnx.ModelProto()
    model.CopyFrom(EXPORT_LIKE)
    kinds = draw(st.lists(st.sampled_from(STRUCTURAL), min_size=1, max_size=2))
    for kind in kinds:
        pairs = _scopes_nodes(model)
        graph, node = draw(st.sampled_from(pairs)) if pairs else (model.graph, None)
        if kind == "shuffle" and len(model.graph.node) > 1:
            order = draw(st.permutations(list(range(len(model.graph.node)))))
            nodes = [onnx.NodeProto() for _ in order]
            for new, i in zip(nodes, order):
                new.CopyFrom(model.graph.node[i])
            del model.graph.node[:]
            model.graph.node.extend(nodes)
        elif kind == "delete_node" and node is not None:
            graph.node.remove(node)
        elif kind == "dangling" and node is not None and node.input:
            node.input[draw(st.integers(0, len(node.input) - 1))] = "ghost"
        elif kind == "attr_type" and node is not None:
            node.attribute.append(helper.make_attribute(draw(st.sampled_from(["keepdims", "axis", "bogus"])),
                                                        draw(st.sampled_from([1.5, "s", [1.0, 2.0]]))))
        elif kind == "attr_value":
            target = next((n for _, n in _scopes_nodes(model) if n.op_type == "ReduceProd"), None)
            if target is not None:
                value = draw(st.sampled_from([5, -7, 2 ** 40, -(2 ** 62), 0]))
                if draw(st.booleans()):
                    target.attribute.append(helper.make_attribute("keepdims", value))
                else:
                    for t in model.graph.initializer:
                        if t.name == "ax":
                            t.CopyFrom(numpy_helper.from_array(np.array([value], np.int64), "ax"))
        elif kind == "init_dims":
            t = draw(st.sampled_from([t for t in model.graph.initializer if t.name != "W"]))
            t.dims.append(draw(st.sampled_from([2, 3, 0])))
        elif kind == "elem_type":
            vi = draw(st.sampled_from([*model.graph.input, *model.graph.output]))
            vi.type.tensor_type.elem_type = draw(st.sampled_from([0, 99]))
        elif kind == "dup_name" and len(model.graph.node) > 1:
            model.graph.node[1].name = model.graph.node[0].name
        elif kind == "dup_output" and len(model.graph.node) > 1 and model.graph.node[0].output:
            model.graph.node[-1].output[0] = model.graph.node[0].output[0]
        elif kind == "opset":
            model.opset_import[0].version = draw(st.sampled_from([0, 1, 999]))
        elif kind == "no_default_opset":
            del model.opset_import[0]
        elif kind == "ir":
            model.ir_version = draw(st.sampled_from([0, 1, 3, 999]))
        elif kind == "domain" and node is not None:
            node.domain = "com.unknown"
        elif kind == "drop_outputs" and model.graph.output:
            del model.graph.output[draw(st.integers(0, len(model.graph.output) - 1)):]
        elif kind == "outer_undefined":
            branch = next(n for n in model.graph.node if n.op_type == "If").attribute[0].g
            branch.node[0].input[0] = "not_in_any_scope"
        elif kind == "cycle" and len(model.graph.node) > 1:
            model.graph.node[0].input[0] = model.graph.node[1].output[0]
        elif kind == "ext_length":
            w = next(t for t in model.graph.initializer if t.name == "W")
            for e in w.external_data:
                if e.key == "length":
                    e.value = draw(st.sampled_from(["4", "48000", "-1"]))
    return model.SerializeToString(), "+".join(kinds)


def _input_status(path: str) -> tuple[bool, bool, bool]:
    """(passes onnx.checker, passes its full check, loads in ONNX Runtime) for a model file."""
    import onnxruntime as ort

    def ok(fn) -> bool:
        try:
            fn()
        except Exception:  # noqa: BLE001 - any refusal
            return False
        return True

    checker = ok(lambda: onnx.checker.check_model(path))
    full = checker and ok(lambda: onnx.checker.check_model(path, full_check=True))
    options = ort.SessionOptions()
    options.log_severity_level = 4
    loads = ok(lambda: ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]))
    return checker, full, loads


def _listing(d: str) -> set[str]:
    return {os.path.relpath(os.path.join(root, f), d) for root, _, files in os.walk(d) for f in files}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_structural_mutant(), st.sampled_from([13, 17, 18, LATEST]))
def test_fuzz_structural_mutants_of_export_like_models(mutant, opset):
    import onnxruntime as ort

    data, kinds = mutant
    RUNS["structural mutants"] = RUNS.get("structural mutants", 0) + 1
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.onnx")
        with open(model, "wb") as f:
            f.write(data)
        with open(os.path.join(d, "weights.bin"), "wb") as f:
            f.write(W_EXT.tobytes())
        checker_ok, full_ok, ort_ok = _input_status(model)
        for argv in (["convert", model, "--opset", str(opset), "-o", os.path.join(d, "c.onnx")],
                     ["fold", model, "-o", os.path.join(d, "f.onnx")],
                     ["optimize", model, "-o", os.path.join(d, "o.onnx")],
                     ["check", model]):
            out_path = argv[-1] if argv[0] != "check" else None
            if out_path:
                with open(out_path, "wb") as f:
                    f.write(b"precious")
            before = _listing(d)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = cli.main(argv)
            RUNS["command runs"] += 1
            RUNS[f"exit {rc}"] = RUNS.get(f"exit {rc}", 0) + 1
            context = (kinds, argv[0], rc, err.getvalue())
            assert rc in (0, 1, 2), context
            assert "Traceback" not in err.getvalue(), context
            if rc == 1 and argv[0] == "check":  # a shape problem found: the table says which
                continue
            if rc != 0:
                errors = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
                assert len(errors) == 1, context
                assert _listing(d) == before, context  # nothing left behind
                if out_path:
                    with open(out_path, "rb") as f:
                        assert f.read() == b"precious", context
                continue
            assert checker_ok, ("an input onnx.checker refuses was accepted", context)
            if out_path:
                onnx.checker.check_model(out_path, full_check=full_ok)
                if ort_ok:
                    ort.InferenceSession(out_path, providers=["CPUExecutionProvider"])
                assert _listing(d) - before <= {os.path.basename(out_path) + ".data"}, context
