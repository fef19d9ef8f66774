"""Which real models a release refused while they computed shapes from dims that are not static,
read from a ``bench/bench_runtime_targets.py --input-shape --json`` run, into the release's data.

    python tools/runtime_computed_shapes.py BENCH.json --target litert==2.6 [--corpus DIR ...] [--dry-run]

Each model of the run's "convert --target X" column that convert wrote is converted again here
(``rewriter.convert_opset(model, target=X)``, the file the CLI writes). Where the result has a graph
input with a dim that is not static and a node whose shape input is computed from a Shape or Size
(``rewriter.targets.computed_shapes``), the model is counted by what the release did with it:
refused by the runtime (with its reason), ran and matched ONNX Runtime, or computed something else;
and what it did with the "--input-shape" column's file. The release's entry in
``rewriter/targets/data/<runtime>.json`` gets ``computed_shapes`` = {"measured": {command, date,
bench}, "refused": {model: reason}, "ran": [...], "wrong": [...], "ran_static": N, "static":
{model: verdict}, "reason": the refusal most models share}; convert and check then note such a
model's computed shapes and the ``--input-shape`` to give (no refusal: the same op forms run in
other models).
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402

from rewriter import RewriterError, convert_opset  # noqa: E402
from rewriter.targets.computed_shapes import computed_shape_nodes  # noqa: E402
from rewriter.targets.static_dims import dynamic_inputs  # noqa: E402

DATA_DIR = ROOT / "rewriter" / "targets" / "data"
CONVERT = "convert --target X"
STATIC = "convert --target X --input-shape"
CORPORA = ["/work/corpus/optbench", "/work/corpus/torch", "/work/corpus/ml", "/work/corpus/quant",
           "/work/corpus/iniputs", "/work/corpus/contrib"]


def computes_shapes(path: Path, target: str) -> bool | None:
    """Whether ``target``'s conversion of ``path`` has a dynamic input and computes shapes from dims
    (None: convert refuses the model)."""
    try:
        model = convert_opset(onnx.load(str(path)), target=target)
    except RewriterError:
        return None
    return bool(dynamic_inputs(model)) and bool(computed_shape_nodes(model))


def classify(cells: list[dict], target: str, files: dict) -> dict:
    """The ``computed_shapes`` entry from the bench's cells of ``target`` (``files``: model -> path)."""
    by = collections.defaultdict(dict)
    for cell in cells:
        if cell["runtime"] == target:
            by[cell["model"]][cell["column"]] = cell
    refused, ran, wrong, static = {}, [], [], {}
    for name in sorted(by):
        cell = by[name].get(CONVERT)
        if cell is None or cell.get("by") == "tool" or name not in files or not computes_shapes(files[name], target):
            continue
        if cell["verdict"] == "refused":
            refused[name] = cell["reason"]
        else:
            (ran if cell["verdict"] == "match" else wrong).append(name)
        fixed = by[name].get(STATIC)
        if fixed is not None:
            static[name] = fixed["verdict"] if fixed["verdict"] != "refused" else f"refused: {fixed['reason']}"
    causes = collections.Counter(_cause(r) for r in refused.values())
    return {"refused": refused, "ran": ran, "wrong": wrong,
            "ran_static": sum(static.get(n) == "match" for n in refused),
            "static": static, "reason": causes.most_common(1)[0][0] if causes else None}


def _cause(reason: str) -> str:
    """The runtime's refusal without the stage and the node number."""
    text = reason.split(": ", 1)[-1]
    return text.split("Node number")[0].strip()


def record(target: str, entry: dict, command: str, bench: str, data_dir: Path = DATA_DIR) -> Path:
    """Write ``entry`` as the release's ``computed_shapes`` (``bench``: the run's file)."""
    runtime, release = target.split("==")
    path = data_dir / f"{runtime}.json"
    table = json.loads(path.read_text())
    entry = {"measured": {"command": command, "bench": bench,
                          "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}, **entry}
    table["releases"][release]["computed_shapes"] = entry
    path.write_text(json.dumps(table, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", help="the JSON file of bench/bench_runtime_targets.py --input-shape --json")
    parser.add_argument("--target", required=True, help="RUNTIME==RELEASE, e.g. litert==2.6")
    parser.add_argument("--corpus", action="append", help="the bench's folders (default: its own)")
    parser.add_argument("--bench-run", help="how the benchmark run was made (its command and commit), recorded "
                                            "in the command written to the data")
    parser.add_argument("--dry-run", action="store_true", help="print the entry, write nothing")
    args = parser.parse_args(argv)
    files = {f"{Path(d).name}/{p.stem}": p for d in (args.corpus or CORPORA) for p in sorted(Path(d).glob("*.onnx"))}
    entry = classify(json.loads(Path(args.bench).read_text()), args.target, files)
    print(json.dumps(entry, indent=1))
    if not args.dry_run:
        command = "python tools/runtime_computed_shapes.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        print(record(args.target, entry, command, Path(args.bench).name))  # (--bench-run is in the command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
