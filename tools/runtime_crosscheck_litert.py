"""Compare what tools/runtime_probe.py measured for onnx2tf into LiteRT with onnx2tf's published op list.

    python tools/runtime_crosscheck_litert.py [--release 2.6] [--published tools/runtime_data/litert-published.txt]

The list (``litert-published.txt``) is the table "Builtin supported (ONNX -> TFLite) in
flatbuffer_direct" of onnx2tf's README as released (one ONNX op a line, no versions: a listed op is
published for every version), then the "Custom-op candidates" that table lacks.  Per (op, schema
version) of the default domain, over the node and form cases (``runtime_probe._op_status``):

* ``published_but_refused``: listed, every case refused; with the reason: onnx2tf's validation
  code (``reason_code=...``), or "custom op" when it wrote the node as a TFLite CUSTOM op that the
  interpreter cannot run (what it does when a constraint of the builtin form is not met, an input
  fed at run time among them: see ``needs_constant``);
* ``published_but_partly_refused``, ``published_but_wrong``: listed, some cases refused / at least
  one computed wrongly (``wrong_detail`` names one);
* ``unlisted_but_runs``: not listed (or only as a custom-op candidate), runs.

The result is the release's ``published`` entry in rewriter/targets/data/litert.json;
tools/runtime_data/README.md explains the differences.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import runtime_probe  # noqa: E402

SOURCE = ("onnx2tf 2.6.9's README as released (PyPI project description), table \"Builtin supported (ONNX -> "
          "TFLite) in flatbuffer_direct\" (tools/runtime_data/litert-published.txt)")


def published(path: Path) -> dict:
    """{op: "builtin" | "custom-op candidate"}."""
    table = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            op, kind = line.split("\t")[:2]
            table[op] = "custom-op candidate" if kind == "custom-op candidate" else "builtin"
    return table


def reason(message: str) -> str:
    """A short reason for a refusal message of the LiteRT runner."""
    code = re.search(r"reason_code=(\w+)", message)
    if code:
        return f"onnx2tf: {code.group(1)}"
    custom = re.search(r"unresolved custom op: (\w+)", message)
    if custom:
        return f"custom op {custom.group(1)} (the builtin form's constraints not met)"
    kernel = re.search(r"Type (\w+) is unsupported by op (\w+)", message)
    if kernel:
        return f"LiteRT {kernel.group(2)} kernel lacks {kernel.group(1)}"
    if "NotImplementedError" in message:
        return "onnx2tf: " + message.split("NotImplementedError:")[-1].strip()[:100]
    return runtime_probe._reason(message)


def crosscheck(raw: dict, table: dict, needs_constant: dict) -> dict:
    """The ``published`` entry; ``needs_constant`` the release's ({op: [versions]}, default domain)."""
    status = runtime_probe._op_status(raw)
    agree = 0
    diffs: dict = {"published_but_refused": {}, "published_but_partly_refused": {}, "published_but_wrong": {},
                   "unlisted_but_runs": {}}
    for (op, version), (st, msg) in sorted(status.items()):
        listed = table.get(op) == "builtin"
        key = f"{op}-{version}"
        const = "; runs with its inputs constant" if version in needs_constant.get(op, ()) else ""
        if listed and st == "missing":
            diffs["published_but_refused"][key] = reason(msg) + const
        elif listed and st == "partial":
            diffs["published_but_partly_refused"][key] = reason(msg) + const
        elif listed and st == "wrong":
            diffs["published_but_wrong"][key] = "computes wrongly (see \"wrong_detail\")"
        elif not listed and st in ("runs", "partial"):
            diffs["unlisted_but_runs"][key] = "a custom-op candidate" if op in table else "not in the list"
        else:
            agree += 1
    return {"source": SOURCE, "op_versions_compared": len(status), "agree": agree, **diffs,
            "counts": {k: len(v) for k, v in diffs.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="2.6")
    parser.add_argument("--published", default=str(HERE / "runtime_data" / "litert-published.txt"))
    parser.add_argument("--data", default=str(runtime_probe.DATA_DIR / "litert.json"))
    parser.add_argument("--raw", help="the probe's raw file (default tools/runtime_data/litert-RELEASE.json)")
    args = parser.parse_args(argv)
    raw = json.loads(Path(args.raw or runtime_probe.RAW_DIR / f"litert-{args.release}.json").read_text())
    data = json.loads(Path(args.data).read_text())
    needs_constant = data["releases"][args.release]["needs_constant"].get("", {})
    result = crosscheck(raw, published(Path(args.published)), needs_constant)
    data["releases"][args.release]["published"] = result
    Path(args.data).write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(result["counts"]), "agree:", result["agree"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
