"""Convert a model stored with external data from another working directory (the CLI, as a user
runs it): what reads the model's tensors must read them relative to the model's file."""

from __future__ import annotations

import onnx

from rewriter import cli


def convert_from_elsewhere(model: onnx.ModelProto, tmp_path, monkeypatch, *args: str) -> onnx.ModelProto:
    """``model`` saved as ``tmp_path/m/q.onnx`` with every tensor in ``q.data``, then ``rewriter
    convert`` with ``args`` run from ``tmp_path/elsewhere``; the result (the command must exit 0).
    ``model`` itself is left as it was."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    (tmp_path / "m").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path, out = tmp_path / "m" / "q.onnx", tmp_path / "out.onnx"
    onnx.save(copy, str(path), save_as_external_data=True, location="q.data", size_threshold=0)
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli.main(["convert", str(path), *args, "-o", str(out)]) == 0
    return onnx.load(str(out))
