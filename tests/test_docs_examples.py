"""Every command example in the README, CONTRIBUTING.md and docs/ still runs.

An example is a line of a fenced code block that starts with ``rewriter`` (or ``$ rewriter``,
a transcript whose output follows), ``python bench/`` or ``python tools/``. Synopsis lines
(``[...]``, ``a|b``) are not examples. ``rewriter`` examples run in a folder holding the files
they name (``model.onnx``: a small opset-17 model with a LayerNormalization and a ``batch``
dim; ``sample.npz``: an input for it; ``xgb.onnx``: an ``ai.onnx.ml`` tree ensemble; the docs'
own JSON target profile;
``models/``: the repository's sample models): a plain example must succeed. A transcript runs
on the model its output describes (an opset-13 ReduceProd ``prod`` whose declared shape is
wrong) and must end with the exit status its output shows, its ``error:`` line starting as
shown and its ``problem:`` lines printed as shown; run on a sample model of ``models/``, every
line it shows (but times) is printed as shown. A script
example must exist and accept every option it is shown with (its ``--help`` lists them): those
run for minutes on corpora, so they are not run here.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "CONTRIBUTING.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
COMMANDS = ("convert", "fold", "optimize", "check", "--version", "-v", "-q")
PLACEHOLDERS = {"MODEL": "model.onnx", "OUT": "out.onnx"}


def _blocks(doc: str):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    yield from re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M)


def _examples():
    for doc in DOCS:
        for block in _blocks(doc):
            lines = block.group(2).splitlines()
            for k, line in enumerate(lines):
                transcript = line.startswith("$ ")
                command = line[2:] if transcript else line.strip()
                if not command.startswith(("rewriter ", "python bench/", "python tools/")):
                    continue
                if re.search(r"\[|\w\|\w", command.split("#")[0]):
                    continue  # a synopsis
                words = shlex.split(command, comments=True)
                if words[0] == "rewriter" and words[1] not in COMMANDS:
                    continue  # a bench's printed line that starts with the tool's name
                output = []
                if transcript:
                    output = [o for o in lines[k + 1:] if not o.startswith("$ ")]
                yield pytest.param(words, output if transcript else None, id=f"{doc}:{' '.join(words)[:60]}")


def _profile() -> dict:
    with open(os.path.join(ROOT, "docs", "convert.md"), encoding="utf-8") as f:
        found = re.search(r"```json\n(\{\"name\".*?)```", f.read(), re.S)
    assert found, "docs/convert.md shows no JSON target profile"
    return json.loads(found.group(1))


def _layer_norm_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    weights = [numpy_helper.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32), "gamma"),
               numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "beta")]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)]
    graph = helper.make_graph(nodes, "g", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _tree_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])
    node = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1,
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
        nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0])
    graph = helper.make_graph([node], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 3)],
                             ir_version=8)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs-examples")
    for name in ("model.onnx", "big.onnx", "attention.onnx"):
        onnx.save(_layer_norm_model(), str(folder / name))
    onnx.save(_tree_model(), str(folder / "xgb.onnx"))
    np.savez(folder / "sample.npz", x=np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32))
    with open(folder / "my_npu.json", "w", encoding="utf-8") as f:
        json.dump(_profile(), f)
    os.makedirs(folder / "models")
    for path in glob.glob(os.path.join(ROOT, "models", "*.onnx")):
        shutil.copy(path, folder / "models")
    return folder


def _transcript_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 1])
    node = helper.make_node("ReduceProd", ["x"], ["y"], name="prod", axes=[-1], keepdims=0)
    return helper.make_model(helper.make_graph([node], "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory, workspace):
    folder = tmp_path_factory.mktemp("docs-transcripts") / "files"
    shutil.copytree(workspace, folder)
    onnx.save(_transcript_model(), str(folder / "model.onnx"))
    return folder


def _shown_status(output: list[str]) -> int:
    text = "\n".join(output)
    if re.search(r"^error:", text, re.M):
        return 2
    if re.search(r"^FAILED|^problem:", text, re.M):
        return 1
    return 0


@pytest.mark.parametrize("words, output", list(_examples()))
def test_the_example_still_runs(words, output, workspace, transcripts, monkeypatch):
    if words[0] == "python":
        script = os.path.join(ROOT, words[1])
        assert os.path.isfile(script), f"{words[1]} does not exist"
        shown = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert flag in shown.stdout, f"{words[1]} has no option {flag}"
        return
    monkeypatch.chdir(workspace if output is None else transcripts)
    argv = [PLACEHOLDERS.get(w, w) for w in words[1:]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:  # --version, --help: argparse's own exit
            status = e.code
    printed = out.getvalue() + err.getvalue()
    assert "Traceback" not in printed
    if output is None:
        assert status == 0, printed
        return
    assert status == _shown_status(output), printed
    if any(w.startswith("models/") for w in words):  # a sample model of the repository: its output as shown
        said = {" ".join(line.split()) for line in printed.splitlines()}
        for line in output:
            if line.strip() and not re.search(r"\d\.\d+s\b|\.\.\.|…", line):
                assert " ".join(line.split()) in said, f"shown but not printed: {line!r}\n{printed}"
    for line in output:
        if line.startswith("error:"):
            assert err.getvalue().startswith(line.split(": ")[0] + ": " + line.split(": ")[1]), printed
        if line.startswith("problem:"):
            assert line in printed.splitlines(), printed


def test_the_examples_are_found():
    """The scan finds the README's examples (a broken scan would pass every doc)."""
    found = [" ".join(p.values[0]) for p in _examples()]
    assert "rewriter convert model.onnx --target onnxruntime==1.15 -o model_ort115.onnx" in found
    assert "rewriter convert models/ --opset 13 -o models13/ -j 2" in found
    assert len(found) >= 20, found
