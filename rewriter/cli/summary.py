"""What a rewrite changed, for people and for programs: the before/after table and ``--json``.

Every command that writes a model (convert, fold, optimize) reports the same way::

    from rewriter.cli import summary

    before = summary.model_stats(model, summary.input_files(model, args.model))
    ...                                   # rewrite, verify
    written = runner.save_output(args, model, result)   # the final gate, then the write
    after = summary.model_stats(result, written)
    summary.report(args, headline, details, before, after,
                   changes={...}, verification=verification, timings={...})

``report`` prints the headline, the detail lines and the table, or with ``--json`` one JSON
object (schema ``rewriter.result/1``) on stdout.
"""

from __future__ import annotations

from rewriter.graph.schemas import is_default_domain

import collections
import dataclasses
import json
import os
import sys

__all__ = ["ModelStats", "model_stats", "input_files", "InputLayout", "input_layout", "table_lines", "result_document", "error_document",
           "print_json", "report", "jsonable"]

RESULT_SCHEMA = "rewriter.result/1"


class ModelStats:
    """One side of the before/after table. The op counts are taken when first asked for (a
    quiet run never walks the model for them); rewrites never change their input, and the
    result is counted as written."""

    def __init__(self, model, opset: int | None, ir_version: int, size: int, files: list[str],
                 ml_opset: int | None = None):
        self._model = model
        self._ops: collections.Counter | None = None
        self.opset = opset  # the default-domain opset import
        self.ml_opset = ml_opset  # the ai.onnx.ml opset import, when there is one
        self.ir_version = ir_version
        self.size = size  # bytes on disk: the model file and every external data file it uses
        self.files = files

    @property
    def ops(self) -> collections.Counter:
        """Op type ("domain:Op" outside the default domain) -> count, over every scope."""
        if self._ops is None:
            from rewriter.graph import traversal

            self._ops = collections.Counter(_op_name(n) for scope in traversal.iter_scopes(self._model)
                                            for n in scope.body.node)
            self._model = None
        return self._ops

    def to_dict(self) -> dict:
        return {"ops": dict(sorted(self.ops.items())), "node_count": sum(self.ops.values()),
                "opset": self.opset, "ml_opset": self.ml_opset, "ir_version": self.ir_version,
                "size_bytes": self.size,
                "files": self.files}


def _op_name(node) -> str:
    return node.op_type if is_default_domain(node.domain) else f"{node.domain}:{node.op_type}"


def model_stats(model, files: list[str]) -> ModelStats:
    """Op counts over every scope (main graph, subgraphs, functions), opset, IR version, and the
    size of ``files`` on disk (a model file and its data files; missing ones count 0)."""
    from rewriter.graph import traversal

    files = list(dict.fromkeys(os.path.abspath(f) for f in files))
    size = 0
    for f in files:
        try:
            size += os.path.getsize(f)
        except OSError:
            pass
    return ModelStats(model, traversal.opset_version(model.opset_import), model.ir_version, size, files,
                      traversal.opset_version(model.opset_import, "ai.onnx.ml"))


@dataclasses.dataclass
class InputLayout:
    """Where an input model's tensors live, from one walk of them."""

    files: list[str]  # the model file, then every distinct external data file its tensors use
    inline: set[str]  # names of the tensors held in the model file
    external: bool  # whether some tensor is in a data file (not one load cut out of the model file)


def input_layout(model, path: str) -> InputLayout:
    """The :class:`InputLayout` of ``model`` loaded from ``path``."""
    from rewriter.io.tensors import BASE_KEY, EXTERNAL, INLINE_KEY, all_tensors

    files = [os.path.abspath(path)]
    base = os.path.dirname(os.path.abspath(path))
    inline, external = set(), False
    for t, _ in all_tensors(model):
        if t.data_location != EXTERNAL:
            inline.add(t.name)
            continue
        entries = {e.key: e.value for e in t.external_data}
        if INLINE_KEY not in entries:
            external = True
        location = entries.get("location")
        if location:
            files.append(os.path.realpath(os.path.join(entries.get(BASE_KEY) or base, location)))
    real_model = os.path.realpath(path)
    return InputLayout([files[0]] + [f for f in dict.fromkeys(files[1:]) if f != real_model], inline, external)


def input_files(model, path: str) -> list[str]:
    """The model file and every distinct external data file its tensors refer to."""
    return input_layout(model, path).files


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def table_lines(before: ModelStats, after: ModelStats, *, elapsed: float | None = None) -> list[str]:
    """The before/after table, as onnxsim and onnxslim print it: one row per op type, then opset,
    IR version, size (with external data) and time. Rows that changed are marked with '*'."""
    rows = []
    for op in sorted(set(before.ops) | set(after.ops)):
        rows.append((op, str(before.ops.get(op, 0)), str(after.ops.get(op, 0))))
    rows.append(("(nodes)", str(sum(before.ops.values())), str(sum(after.ops.values()))))
    rows.append(("opset", str(before.opset if before.opset is not None else "-"),
                 str(after.opset if after.opset is not None else "-")))
    if before.ml_opset is not None or after.ml_opset is not None:
        rows.append(("ai.onnx.ml opset", str(before.ml_opset or "-"), str(after.ml_opset or "-")))
    rows.append(("IR version", str(before.ir_version), str(after.ir_version)))
    rows.append(("size", _size(before.size), _size(after.size)))
    if elapsed is not None:
        rows.append(("time", "", f"{elapsed:.2f}s"))
    width = max(len(r[0]) for r in [("", "", "")] + rows)
    b_width = max(len("before"), *(len(r[1]) for r in rows))
    a_width = max(len("after"), *(len(r[2]) for r in rows))
    lines = [f"  {'':<{width}}  {'before':>{b_width}}  {'after':>{a_width}}"]
    for name, b, a in rows:
        mark = " *" if b != a and b and name != "time" else ""
        lines.append(f"  {name:<{width}}  {b:>{b_width}}  {a:>{a_width}}{mark}".rstrip())
    return lines


def result_document(command: str, *, model: str, output: str | None, before: ModelStats | None,
                    after: ModelStats | None, changes: dict | None = None, verification: dict | None = None,
                    timings: dict | None = None, warnings: list[str] | None = None) -> dict:
    """The ``--json`` document of a successful rewrite (schema ``rewriter.result/1``)."""
    return {"schema": RESULT_SCHEMA, "command": command, "ok": True, "exit_status": 0, "model": model,
            "output": output, "before": before.to_dict() if before else None,
            "after": after.to_dict() if after else None, "changes": changes or {},
            "verification": verification, "timings": timings or {}, "warnings": warnings or []}


def error_document(command: str, model: str, message: str, status: int) -> dict:
    """The ``--json`` document of a failed command: what failed and the exit status."""
    return {"schema": RESULT_SCHEMA if command != "check" else "rewriter.check/1", "command": command,
            "ok": False, "exit_status": status, "model": model, "error": message}


def jsonable(value):
    """A report (dataclass, Counter, dict with tuple keys, list, ...) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {("/".join(map(str, k)) if isinstance(k, tuple) else str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def print_json(doc: dict) -> None:
    """One JSON object on stdout."""
    print(json.dumps(doc, indent=2, default=str))
    sys.stdout.flush()


def report(args, headline: str, details: list[str], before: ModelStats, after: ModelStats, *,
           changes: dict | None = None, verification: dict | None = None, timings: dict | None = None) -> None:
    """Print a rewrite's result: with ``args.json`` one JSON document, else the headline, the
    indented detail lines and the before/after table (``-q``: the headline only). The total time
    is the process's (interpreter start-up and imports included: ``startup_s``)."""
    if timings is not None and args.run.startup_s is not None:
        timings = {**timings, "startup_s": round(args.run.startup_s, 4)}
    frozen = args.run.frozen_inputs
    if frozen is not None:  # --freeze-input-defaults: the table's "before" is the file as read
        from rewriter.cli.freeze_option import summary_line

        before.ir_version = args.run.frozen_ir_before
        details = [summary_line(args), *details]
    if getattr(args, "json", False):
        doc = result_document(args.command, model=args.model, output=args.output, before=before,
                              after=after, changes=changes, verification=verification, timings=timings,
                              warnings=args.run.warnings)
        if frozen is not None:
            doc["frozen_input_defaults"] = list(frozen)
        print_json(doc)
        return
    print(headline)
    if getattr(args, "quiet", False):
        return
    for line in details:
        print(f"  {line}")
    for line in table_lines(before, after, elapsed=(timings or {}).get("total_s")):
        print(line)
