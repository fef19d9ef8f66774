"""tools/corpus/one_pipeline_report.py: the CLI, the API and the pass give byte-identical half-precision
models on real models (a corpus folder in $REWRITER_CORPUS, a few small models of each subfolder,
when present; the repository's sample models always), and the report sees a difference."""

from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = pathlib.Path(os.environ.get("REWRITER_CORPUS", "/work/corpus"))


def _report():
    spec = importlib.util.spec_from_file_location("one_pipeline_report",
                                                  ROOT / "tools" / "corpus" / "one_pipeline_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _models() -> list[pathlib.Path]:
    found = sorted((ROOT / "models").glob("*opset13.onnx"))
    if CORPUS.is_dir():
        for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
            found += [p for p in sorted(folder.glob("*.onnx")) if p.stat().st_size < 2**21][:2]
    return found


@pytest.mark.parametrize("path", _models(), ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("setting", ["float16", "optimize"])
def test_cli_api_and_pass_agree(path, setting, tmp_path):
    row = _report().compare(path, setting, tmp_path)
    assert row["outcome"] in ("identical", "refused"), row


def test_the_report_sees_a_difference(monkeypatch, tmp_path):
    report = _report()
    real = report.rewriter.convert_precision

    def keep_one_more(model, dtype, **kwargs):
        result = real(model, dtype, **kwargs)
        if not isinstance(model, str):
            return result
        result.doc_string += " (changed)"
        return result

    monkeypatch.setattr(report.rewriter, "convert_precision", keep_one_more)
    row = report.compare(ROOT / "models" / "mixed_opset13.onnx", "float16", tmp_path)
    assert row["outcome"] == "DIFFERS" and row["cli_eq_api"] is False and row["pass_eq_api_ir"] is True
