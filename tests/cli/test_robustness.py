"""Bad input gets one clear ``error:`` line and exit 2, and nothing is written; nothing is lost.

Every case runs through ``rewriter.cli.main`` in-process for each command that takes a model
(one case also as a real subprocess, to see that no traceback reaches stderr).
Oracles: the files' bytes before and after, ONNX Runtime for outputs, protobuf field equality.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli

COMMANDS = {
    "convert": ["convert", "{model}", "--opset", "18", "-o", "{out}"],
    "fold": ["fold", "{model}", "-o", "{out}"],
    "optimize": ["optimize", "{model}", "-o", "{out}"],
    "check": ["check", "{model}"],
}


def _good_model(opset: int = 13) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("ReduceProd", ["s"], ["y"], name="rp", axes=[1], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _external_model(d, location, offset=0, length=24) -> onnx.ModelProto:
    m = _good_model()
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return m


def _text(d, text):
    return onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 18]>\n' + text)


def _case_files(d):
    """name -> (path of the bad model, a fragment the error must contain)."""
    good = _good_model().SerializeToString()
    cases = {}

    def write(name, data, expect):
        p = d / name
        p.write_bytes(data)
        cases[name] = (p, expect)

    write("empty.onnx", b"", "empty file")
    write("random.onnx", np.random.default_rng(1).bytes(4096), "not an ONNX model")
    write("truncated.onnx", good[: len(good) // 2], "not an ONNX model")
    write("tensor.onnx", numpy_helper.from_array(np.zeros(3, np.float32), "t").SerializeToString(),
          "not an ONNX model")
    write("graph.onnx", _good_model().graph.SerializeToString(), "not an ONNX model")
    cases["missing.onnx"] = (d / "missing.onnx", "no such file")
    (d / "adir").mkdir()
    cases["adir"] = (d / "adir", "adir")
    os.mkfifo(d / "fifo.onnx")  # unreadable without relying on permissions (tests run as root)
    cases["fifo.onnx"] = (d / "fifo.onnx", "not a regular file")
    (d / "inner").mkdir()
    (d / "secret.bin").write_bytes(b"\0" * 24)
    (d / "inner" / "short.bin").write_bytes(b"\0" * 20)
    for name, location, expect, kwargs in [
        ("nodata.onnx", "gone.bin", "does not exist", {}),
        ("escape.onnx", "../secret.bin", "refused", {}),
        ("escape2.onnx", "../../" + str(d).lstrip("/") + "/secret.bin", "refused", {}),
        ("absolute.onnx", str(d / "secret.bin"), "refused", {}),
        ("pastend.onnx", "short.bin", "past the end", {}),
        ("pastend2.onnx", "short.bin", "past the end", {"offset": 16, "length": 8}),
    ]:
        write("inner/" + name, _external_model(d, location, **kwargs).SerializeToString(), expect)
    graph_cases = {
        "cycle.onnx": ("g (float[2,3] x) => (float[2,3] y) { a = Relu (b) \n b = Relu(a) \n y = Add(a, x) }",
                       "cycle"),
        "undefined.onnx": ("g (float[2,3] x) => (float[2,3] y) { y = Add(x, nowhere) }", "'nowhere'"),
        "range.onnx": ("g (float[2,3] x) => (float[2] y) <int64[1] ax = {2}> { y = ReduceProd (x, ax) }", "out of range"),
        "dup.onnx": ("g (float[2,3] x) => (float[2] y) <int64[2] ax = {1,-1}> { y = ReduceProd (x, ax) }", "duplicate"),
        "int32.onnx": ("g (float[2,3] x) => (float[2] y) <int32[1] ax = {1}> { y = ReduceProd (x, ax) }", "int64"),
        "rank2.onnx": ("g (float[2,3] x) => (float[2] y) <int64[1,1] ax = {1}> { y = ReduceProd (x, ax) }", "1-D"),
        "keepdims.onnx": ("g (float[2,3] x) => (float[2] y) <int64[1] ax = {1}> { y = ReduceProd <keepdims=2> (x, ax) }",
                          "keepdims"),
    }
    for name, (text, expect) in graph_cases.items():
        m = _text(d, text)
        for i, node in enumerate(m.graph.node):
            node.name = f"node{i}"
        write(name, m.SerializeToString(), expect)
        cases[name] = (d / name, expect)
    return cases


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    return _case_files(tmp_path_factory.mktemp("bad"))


def _run_main(argv, capsys):
    rc = cli.main(argv)
    captured = capsys.readouterr()
    return rc, captured.err


def _assert_one_error(rc, err, *fragments):
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


CASE_NAMES = ["empty.onnx", "random.onnx", "truncated.onnx", "tensor.onnx", "graph.onnx", "missing.onnx",
              "adir", "fifo.onnx", "inner/nodata.onnx", "inner/escape.onnx", "inner/escape2.onnx",
              "inner/absolute.onnx", "inner/pastend.onnx", "inner/pastend2.onnx", "cycle.onnx",
              "undefined.onnx", "range.onnx", "dup.onnx", "int32.onnx", "rank2.onnx", "keepdims.onnx"]


@pytest.mark.parametrize("command, existing", [(c, e) for c in COMMANDS for e in (False, True)
                                               if not (c == "check" and e)])  # check writes nothing
@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_input_one_error_exit_2_nothing_written(bad_files, tmp_path, capsys, command, case, existing):
    model, expect = bad_files[case]
    out = tmp_path / "out.onnx"
    if existing:
        out.write_bytes(b"precious")
    argv = [a.format(model=model, out=out) for a in COMMANDS[command]]
    rc, err = _run_main(argv, capsys)
    fragments = [expect]
    if case != "adir" or command == "check":
        fragments.append(str(model))
    if case.endswith(("nodata.onnx", "escape.onnx", "escape2.onnx", "absolute.onnx", "pastend.onnx", "pastend2.onnx")):
        fragments.append("'w'")
    if case in ("cycle.onnx", "undefined.onnx", "range.onnx", "dup.onnx", "int32.onnx", "rank2.onnx", "keepdims.onnx"):
        fragments.append("node")
    _assert_one_error(rc, err, *fragments)
    assert (out.read_bytes() == b"precious") if existing else not out.exists()
    assert os.listdir(tmp_path) == (["out.onnx"] if existing else [])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode (fifo case covers this)")
def test_unreadable_file(tmp_path, capsys):
    p = tmp_path / "a.onnx"
    onnx.save(_good_model(), p)
    p.chmod(0)
    rc, err = _run_main(["check", str(p)], capsys)
    _assert_one_error(rc, err, str(p))


@pytest.mark.parametrize("argv, fragment", [
    (["convert", "{model}", "--opset", "0", "-o", "{out}"], "--opset"),
    (["convert", "{model}", "--opset", str(onnx.defs.onnx_opset_version() + 1), "-o", "{out}"], "--opset"),
    (["convert", "{model}", "--opset", "18", "-o", "{tmp}/nodir/out.onnx"], "does not exist"),
    (["fold", "{model}", "-o", "{tmp}/nodir/out.onnx"], "does not exist"),
    (["optimize", "{model}", "-o", "{tmp}"], "is a directory"),
    (["convert", "{model}", "--opset", "18", "-o", "{tmp}"], "is a directory"),
    (["fold", "{model}", "-o", "{out}", "--external-data", "sometimes"], "--external-data"),
    (["convert", "{model}", "-o", "{out}"], "--opset"),
])
def test_usage_errors(tmp_path, capsys, argv, fragment):
    model = tmp_path / "in.onnx"
    onnx.save(_good_model(), model)
    before = sorted(os.listdir(tmp_path))
    argv = [a.format(model=model, out=tmp_path / "out.onnx", tmp=tmp_path) for a in argv]
    rc, err = _run_main(argv, capsys)
    _assert_one_error(rc, err, fragment)
    assert sorted(os.listdir(tmp_path)) == before


def test_subprocess_has_no_traceback(bad_files, tmp_path):
    model, _ = bad_files["truncated.onnx"]
    proc = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(model), "--opset", "18",
                           "-o", str(tmp_path / "o.onnx")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1
    assert "Traceback" not in proc.stderr and not (tmp_path / "o.onnx").exists()


# ---------------------------------------------------------------- nothing lost

def _decorated_model() -> onnx.ModelProto:
    """A model with every part a rewrite must keep: docs, metadata, names, value_info,
    custom-domain nodes (model-local functions, with and without ReduceProd), training info."""
    w = numpy_helper.from_array(np.linspace(0.5, 2.0, 6, dtype=np.float32).reshape(2, 3), "w")
    f_rp = helper.make_function("custom.fn", "ProdRows", ["a"], ["b"], [
        helper.make_node("ReduceProd", ["a"], ["b"], name="fn_rp", axes=[1], keepdims=1, doc_string="in fn")],
        [helper.make_opsetid("", 13)], doc_string="function with ReduceProd")
    f_plain = helper.make_function("custom.fn", "Twice", ["a"], ["b"], [
        helper.make_node("Add", ["a", "a"], ["b"], name="fn_add")], [helper.make_opsetid("", 13)])
    nodes = [
        helper.make_node("Add", ["x", "w"], ["s"], name="add", doc_string="adds the weights"),
        helper.make_node("ReduceProd", ["s"], ["r"], name="rp", axes=[-1], keepdims=0, doc_string="the product"),
        helper.make_node("ProdRows", ["s"], ["p"], name="custom_prod", domain="custom.fn"),
        helper.make_node("Twice", ["p"], ["t"], name="custom_twice", domain="custom.fn"),
        # ReduceMean's axes move at 18: onnx.version_converter converts it, and it rebuilds
        # the graph, so this model also checks what that path keeps
        helper.make_node("ReduceMean", ["s"], ["m"], name="mean", axes=[0], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "decorated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 1]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, [3])], [w], doc_string="graph doc",
        sparse_initializer=[helper.make_sparse_tensor(
            numpy_helper.from_array(np.array([7.0], dtype=np.float32), "sparse_w"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "sparse_w_indices"), [4])])
    helper.set_metadata_props(graph, {"graph_meta": "kept"})
    for node in graph.node:
        helper.set_metadata_props(node, {"node_meta": node.name})
    graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("custom.fn", 1)],
                              functions=[f_rp, f_plain], producer_name="robustness-test", producer_version="4.2",
                              doc_string="model doc", model_version=7)
    helper.set_model_props(model, {"author": "someone", "license": "MIT"})
    model.ir_version = 8
    train = model.training_info.add()
    train.algorithm.CopyFrom(helper.make_graph(
        [helper.make_node("Identity", ["w"], ["w_next"], name="train_step")], "algo", [], []))
    binding = train.update_binding.add()
    binding.key, binding.value = "w", "w_next"
    onnx.checker.check_model(model, full_check=True)
    return model


def _kept_parts(m: onnx.ModelProto) -> dict:
    default = [o.version for o in m.opset_import if o.domain == ""]
    return {
        "doc": m.doc_string, "producer": (m.producer_name, m.producer_version), "model_version": m.model_version,
        "metadata": [(p.key, p.value) for p in m.metadata_props], "graph_doc": m.graph.doc_string,
        "graph_name": m.graph.name, "ir_version": m.ir_version,
        "nodes": [(n.name, n.op_type, n.domain, n.doc_string, [(p.key, p.value) for p in n.metadata_props])
                  for n in m.graph.node if n.name or n.op_type != "Constant"],
        "graph_metadata": [(p.key, p.value) for p in m.graph.metadata_props],
        "sparse_initializers": [t.SerializeToString() for t in m.graph.sparse_initializer],
        "value_info": [v.SerializeToString() for v in m.graph.value_info],
        "custom_opsets": sorted((o.domain, o.version) for o in m.opset_import if o.domain != ""),
        # at 18 a function holds its axes in a Constant node (no initializers in functions)
        "functions": [(f.domain, f.name, f.doc_string, [(n.name, n.op_type) for n in f.node
                                                         if n.name or n.op_type != "Constant"]) for f in m.functions],
        "training_info": [t.SerializeToString() for t in m.training_info],
        "inputs": [v.SerializeToString() for v in m.graph.input],
        "outputs": [v.SerializeToString() for v in m.graph.output],
        "default_opset_count": len(default),
    }


def _outputs(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def test_round_trip_13_18_13_keeps_everything(tmp_path, capsys):
    model = _decorated_model()
    onnx.save(model, tmp_path / "m13.onnx")
    assert cli.main(["convert", str(tmp_path / "m13.onnx"), "--opset", "18", "-o", str(tmp_path / "m18.onnx")]) == 0
    assert cli.main(["convert", str(tmp_path / "m18.onnx"), "--opset", "13", "-o", str(tmp_path / "back.onnx")]) == 0
    capsys.readouterr()
    m18, back = onnx.load(tmp_path / "m18.onnx"), onnx.load(tmp_path / "back.onnx")
    expected = _kept_parts(model)
    for converted in (m18, back):
        got = _kept_parts(converted)
        for key in expected:
            if key != "ir_version":
                assert got[key] == expected[key], key
        assert got["ir_version"] >= expected["ir_version"]
        onnx.checker.check_model(converted, full_check=True)
    assert back.ir_version == model.ir_version  # the lowest the result needs: its metadata on nodes needs IR 10
    x = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], np.float32)
    reference = _outputs(tmp_path / "m13.onnx", x)
    for path in ("m18.onnx", "back.onnx"):
        for got, want in zip(_outputs(tmp_path / path, x), reference):
            np.testing.assert_array_equal(got, want)


def test_opaque_custom_domain_node_survives_conversion(tmp_path, capsys):
    m = _good_model()
    m.graph.node.append(helper.make_node("Mystery", ["y"], ["z"], name="opaque", domain="com.example", level=3))
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2]))
    m.opset_import.append(helper.make_opsetid("com.example", 5))
    onnx.save(m, tmp_path / "a.onnx")
    assert cli.main(["convert", str(tmp_path / "a.onnx"), "--opset", "18", "-o", str(tmp_path / "b.onnx")]) == 0
    capsys.readouterr()
    b = onnx.load(tmp_path / "b.onnx")
    assert [n for n in b.graph.node if n.domain == "com.example"] == [m.graph.node[-1]]
    assert ("com.example", 5) in [(o.domain, o.version) for o in b.opset_import]
