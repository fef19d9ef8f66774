#!/usr/bin/env python3
"""Build (or check) rewriter/targets/data/{onnxruntime,tensorrt}.json from the runtimes' own docs.

Developer tool; it never uses the network.

    python tools/runtime_data/build_tables.py            # check the shipped JSON, print a summary
    python tools/runtime_data/build_tables.py build \\
        --ort-git /path/to/onnxruntime.git [--ort-git another-clone-or-fork.git ...] \\
        --trt-git /path/to/onnx-tensorrt.git --onnx-git /path/to/onnx.git \\
        [--trt-md 10.16=/path/to/operators.md ...]

``build`` reads every file with ``git --git-dir=DIR show COMMIT:PATH`` at the commits pinned in
ORT_RELEASES / TRT_RELEASES below (a commit is looked up in each ``--ort-git`` in turn, so a
fork that carries upstream's release tags or branches serves as well as a clone of upstream: a
commit id names the same tree everywhere). To refresh, update the pins (see README.md) and rerun.
``--trt-md VERSION=FILE`` parses a local copy of onnx-tensorrt's docs/operators.md for a release
whose commit is not in ``--trt-git`` (the file's commit must still be pinned in TRT_RELEASES).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "rewriter", "targets", "data")

# --- ONNX Runtime ---------------------------------------------------------------------------------
# The release matrix. docs/Versioning.md on main lost its table in 2022 (0264a9c2, "Bump ort version
# number"; the last version with it, 8ba52b0a, stops at 1.12.0 with placeholder numbers) and now
# links to onnxruntime.ai, whose source is docs/reference/compatibility.md on the gh-pages branch.
ORT_MAIN = ("main", "89b01b406ca7e94078913eea3189e11bef5654c5", "docs/Versioning.md")
ORT_TABLE = ("gh-pages", "64a784f0e9bc5c833ce5ba4bc8b1f052aae1ba0f", "docs/reference/compatibility.md")
# release -> (ref, commit) whose docs/OperatorKernels.md gives cpu_ops (latest patch branch, or the
# tag when the branch as found lags the tag); README.md says where each pin was found.
ORT_RELEASES = {
    "1.15": ("rel-1.15.2", "baeece44ba075009c6bfe95891a8c1b3d4571cb3"),  # = rel-1.15.1 = v1.15.1
    "1.16": ("rel-1.16.3", "2ac381c55397dffff327cc6efecf6f95a70f90a1"),  # = v1.16.3
    "1.17": ("rel-1.17.3", "0453cd761860e68d3852e7f81a5092c98369bb75"),  # v1.17.3 + 2 Node.js fixes
    "1.18": ("rel-1.18.2", "9691af1a2a17b12af04652f4d8d2a18ce9507025"),  # = v1.18.2
    "1.19": ("rel-1.19.2", "ffceed9d44f2f3efb9dd69fa75fea51163c91d91"),  # = v1.19.2
    "1.20": ("v1.20.2", "8608bf02f21774be0388d2aa3a9f886d009d0b4c"),
    "1.21": ("v1.21.1", "8f7cce3a49fdbdac96e0868b75b7d0159db7ac7f"),
    "1.22": ("v1.22.1", "89746dc19a0a1ae59ebf4b16df9acab8f99f3925"),
    "1.23": ("rel-1.23.0", "d70213d40ea99b2665a85096ae0a1b993a608963"),
    "1.24": ("rel-1.24.1", "470ae16099a74fe05e31f2530489332c0525edb5"),  # upstream part of the branch
}
ORT_DOMAINS = {"ai.onnx": "", "ai.onnx.ml": "ai.onnx.ml"}

# --- onnx-tensorrt ---------------------------------------------------------------------------------
# release -> (branch or None, commit of docs/operators.md, how the commit was found,
#             commit whose third_party/onnx gives ir_version or None)
TRT_RELEASES = {
    "8.5": ("8.5-GA", "fdeeaca87ad2eef316aafb016e1822502f383eea", "branch 8.5-GA",
            "fdeeaca87ad2eef316aafb016e1822502f383eea"),
    # the branch moved third_party/onnx to v1.16.0 in 2024 ("Update ONNX submodule to v1.16"); the
    # 8.6 GA parser (tag release/8.6-GA, the parsers/onnx NVIDIA/TensorRT v8.6.1 pins) was built
    # against onnx 1.13.1. docs/operators.md is the same at both.
    "8.6": ("8.6-GA", "ee0b139bc68567a89618c1d84dcd461cc144aad4", "branch 8.6-GA",
            "6ba67d3428e05f690145373ca87fb8d32f98df45"),
    "10.0": ("10.0-GA", "73f629e04a68765647010b98dd94257282d05d11", "branch 10.0-GA",
             "73f629e04a68765647010b98dd94257282d05d11"),
    "10.1": ("10.1-GA", "96e781103cfc4adf4a6bb557e94bac8e693f6f4c", "branch 10.1-GA (= tag release/10.1-GA)",
             "96e781103cfc4adf4a6bb557e94bac8e693f6f4c"),
    # not in the onnx-tensorrt snapshot: the commit NVIDIA/TensorRT tag v10.16 pins as parsers/onnx,
    # whose docs/operators.md is in the stored-file index (read, copied to a file, --trt-md 10.16=FILE);
    # its third_party/onnx pin could not be read, so ir_version is null
    "10.16": (None, "6bde6596eca84abf9afe9b4d21c18c32800fd3ad",
              "parsers/onnx pinned by NVIDIA/TensorRT tag v10.16 (52399f555c2f); file from the stored-file index",
              None),
}
# releases whose third_party/onnx pin could not be read: the onnx release their docs name, and where
TRT_IR_FROM_DOCS = {
    "10.16": ("1.18.0", "onnx-tensorrt docs/Changelog.md at 6bde6596: 10.11 \"Updated ONNX version to `1.18`\", "
                        "no later onnx update through 10.16; NVIDIA/TensorRT v10.16's samples pin onnx==1.18.0"),
}
TRT_MIN_OPSET_8X = 7  # ModelImporter.cpp on 8.5-GA/8.6-GA: "TensorRT supports ONNX graphs generated with at least opset 7"


def git_show(git_dirs: list[str], commit: str, path: str) -> tuple[str, str]:
    """The text of ``path`` at ``commit`` from the first git dir that has the commit, and that dir."""
    for d in git_dirs:
        ok = subprocess.run(["git", f"--git-dir={d}", "cat-file", "-e", f"{commit}^{{commit}}"],
                            capture_output=True).returncode == 0
        if ok:
            out = subprocess.run(["git", f"--git-dir={d}", "show", f"{commit}:{path}"],
                                 capture_output=True, check=True)
            return out.stdout.decode("utf-8"), d
    raise SystemExit(f"commit {commit} is in none of {git_dirs}")


def git_tree_entry(git_dir: str, commit: str, path: str) -> str:
    """The object id ``path`` names at ``commit`` (a submodule's pinned commit)."""
    out = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", commit, path],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[2]


def full_commit(git_dirs: list[str], commit: str) -> str:
    for d in git_dirs:
        r = subprocess.run(["git", f"--git-dir={d}", "rev-parse", "--verify", "-q", f"{commit}^{{commit}}"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.strip()
    raise SystemExit(f"commit {commit} is in none of {git_dirs}")


# --- parsers ---------------------------------------------------------------------------------------

def parse_compat_table(md: str) -> dict:
    """Rows of the "ONNX Runtime version | ONNX version | ONNX opset version | ONNX ML opset version |
    ONNX IR version" table -> {"1.15": {"onnx": "1.14", "opsets": {...}, "ir_version": 8}}."""
    out = {}
    lines = md.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("| ONNX Runtime version"))
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        versions = [v.strip() for v in re.split(r"<br\s*/?>", cells[0])]
        onnx = cells[1].replace("*", "").strip()
        row = {"onnx": onnx, "opsets": {"": int(cells[2]), "ai.onnx.ml": int(cells[3])},
               "ir_version": int(cells[4])}
        for v in versions:
            if int(v.split(".")[0]) >= 1:  # 1.0 onward
                out[".".join(v.split(".")[:2])] = dict(row, opsets=dict(row["opsets"]))
    return out


_RANGE = re.compile(r"^(?:(\d+)\+|\[(\d+),\s*(\d+)\]|(\d+)-(\d+)|(\d+))$")


def parse_range(text: str) -> list:
    m = _RANGE.match(text.strip())
    if not m:
        raise ValueError(f"unknown OpSet Version {text!r}")
    if m.group(1):
        return [int(m.group(1)), None]
    if m.group(2):
        return [int(m.group(2)), int(m.group(3))]
    if m.group(4):
        return [int(m.group(4)), int(m.group(5))]
    return [int(m.group(6)), int(m.group(6))]


def parse_operator_kernels(md: str) -> dict:
    """The CPUExecutionProvider section of docs/OperatorKernels.md -> {"": {op: [[a, b|None], ...]},
    "ai.onnx.ml": {...}} (other domains and providers skipped)."""
    lines = md.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip() == '<a name="cpuexecutionprovider"/>')
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("<a name=")), len(lines))
    out: dict = {}
    domain = op = None
    for line in lines[start:end]:
        if not line.startswith("|"):
            continue
        m = re.match(r"^\|\*\*Operator Domain:\*\* \*([^*]+)\*", line)
        if m:
            domain = ORT_DOMAINS.get(m.group(1))
            if domain is not None:
                out.setdefault(domain, {})
            continue
        cells = line.split("|")  # '', name, params, version, types, ''
        if len(cells) < 5 or cells[1].strip() == "Op Name" or cells[1].strip().startswith("---"):
            continue
        if cells[1].strip():
            op = cells[1].strip()
        if domain is None:
            continue
        r = parse_range(cells[3])
        ranges = out[domain].setdefault(op, [])
        if r not in ranges:
            ranges.append(r)
    for table in out.values():
        for ranges in table.values():
            ranges.sort(key=lambda r: r[0])
    return {d: dict(sorted(t.items())) for d, t in out.items()}


def parse_trt_operators(md: str) -> dict:
    """docs/operators.md -> {"header": str, "opsets": [min|None, max], "supported": [...],
    "unsupported": [...], "restrictions": {op: text}, "types": {op: Supported Types}}."""
    header = next(l for l in md.splitlines() if re.match(r"^TensorRT \S+ supports operators", l))
    m = re.search(r"inclusive range of opset (\d+) to opset (\d+)", header, re.I)
    if m:
        opsets = [int(m.group(1)), int(m.group(2))]
    else:
        m = re.search(r"up to Opset (\d+)", header, re.I)
        opsets = [None, int(m.group(1))]
    lines = md.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("| Operator"))
    supported, unsupported, restrictions, types = [], [], {}, {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            if line.strip():
                break
            continue
        cells = [c.strip() for c in line.split("|")[1:]]
        op, flag = cells[0], cells[1]
        if flag == "Y":
            supported.append(op)
        elif flag == "N":
            unsupported.append(op)
        else:
            raise ValueError(f"operators.md: {op!r} has Supported = {flag!r}")
        if len(cells) > 3 and cells[3]:
            restrictions[op] = cells[3]
        if len(cells) > 2 and cells[2] and flag == "Y":
            types[op] = cells[2]
    dup = {o for o in supported + unsupported if (supported + unsupported).count(o) > 1}
    if dup:
        raise ValueError(f"operators.md lists {sorted(dup)} more than once")
    return {"header": header, "opsets": opsets, "supported": sorted(supported),
            "unsupported": sorted(unsupported), "restrictions": dict(sorted(restrictions.items())),
            "types": dict(sorted(types.items()))}


def onnx_version_row(version: str) -> tuple:
    """(release, ir_version, ai.onnx opset, ai.onnx.ml opset, training opset) from onnx.helper.VERSION_TABLE."""
    import onnx.helper  # local: only ``build`` needs it

    rows = {r[0]: r for r in onnx.helper.VERSION_TABLE}
    return rows[version]


def onnx_version_at(onnx_git: str, commit: str) -> str:
    """The onnx release an onnx commit is: its VERSION_NUMBER."""
    return subprocess.run(["git", f"--git-dir={onnx_git}", "show", f"{commit}:VERSION_NUMBER"],
                          capture_output=True, text=True, check=True).stdout.strip()


def onnx_ir_at(onnx_git: str, commit: str) -> int:
    """IR_VERSION in onnx/onnx.in.proto at an onnx commit (the newest IR version it knows)."""
    proto = subprocess.run(["git", f"--git-dir={onnx_git}", "show", f"{commit}:onnx/onnx.in.proto"],
                           capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^\s*IR_VERSION = (0x[0-9a-fA-F]+|\d+);", proto, re.M).group(1), 0)


# --- build -----------------------------------------------------------------------------------------

def build_onnxruntime(git_dirs: list[str], onnx_git: str | None = None) -> dict:
    table_md, _ = git_show(git_dirs, ORT_TABLE[1], ORT_TABLE[2])
    releases = parse_compat_table(table_md)
    for key, (ref, commit) in ORT_RELEASES.items():
        commit = full_commit(git_dirs, commit)
        kernels, _ = git_show(git_dirs, commit, "docs/OperatorKernels.md")
        deps, _ = git_show(git_dirs, commit, "cmake/deps.txt")
        m = re.search(r"^onnx;\S*/v(\d+\.\d+\.\d+)\.zip;", deps, re.M)
        entry = releases.get(key)
        if entry is None:
            # not in the compatibility table: the onnx ORT pins (cmake/deps.txt) and that onnx
            # release's numbers (onnx.helper.VERSION_TABLE); ORT loads IR up to onnx's IR_VERSION
            # (onnxruntime/core/graph/model.cc) and registers that onnx's opsets
            if not m:
                raise SystemExit(f"ORT {key}: no onnx release tag in cmake/deps.txt at {commit}")
            _, ir, opset, ml, _ = onnx_version_row(m.group(1))
            if onnx_git:  # the submodule ORT pins should be that release, with that IR_VERSION
                _, d = git_show(git_dirs, commit, "VERSION_NUMBER")
                sub = git_tree_entry(d, commit, "cmake/external/onnx")
                if onnx_version_at(onnx_git, sub) != m.group(1) or onnx_ir_at(onnx_git, sub) != ir:
                    raise SystemExit(f"ORT {key}: cmake/external/onnx {sub} is not onnx {m.group(1)} / IR {ir}")
            entry = releases[key] = {"onnx": m.group(1), "opsets": {"": opset, "ai.onnx.ml": ml},
                                     "ir_version": ir,
                                     "derived": f"not in {ORT_TABLE[2]}: onnx {m.group(1)} from cmake/deps.txt "
                                                f"at {commit}, numbers from onnx.helper.VERSION_TABLE"}
        entry["cpu_ops"] = parse_operator_kernels(kernels)
        pin = m.group(1) if m else re.search(r"^onnx;(\S+?);", deps, re.M).group(1).rsplit("/", 1)[-1]
        entry["cpu_ops_source"] = {"ref": ref, "commit": commit, "path": "docs/OperatorKernels.md",
                                   "onnx_pin": pin}  # cmake/deps.txt: an onnx release or an archive name
    order = sorted(releases, key=lambda r: tuple(int(p) for p in r.split(".")))
    src = (f"microsoft/onnxruntime docs/Versioning.md at {ORT_MAIN[1]} (main) has no version table "
           f"since 2022 and points to onnxruntime.ai, so the table is {ORT_TABLE[2]} on {ORT_TABLE[0]} at "
           f"{ORT_TABLE[1]}; docs/OperatorKernels.md on rel-1.X branches (or v1.X.Y tags) at "
           + ", ".join(f"{k} {ORT_RELEASES[k][0]}@{ORT_RELEASES[k][1][:12]}" for k in ORT_RELEASES)
           + "; releases not in the table: onnx pin in cmake/deps.txt + onnx.helper.VERSION_TABLE "
             "(see each entry's \"derived\")")
    return {"source": src, "releases": {k: releases[k] for k in order}}


def build_tensorrt(trt_git: str, onnx_git: str, md_files: dict) -> dict:
    out = {}
    for key, (branch, commit, how, ir_from) in TRT_RELEASES.items():
        if key in md_files:
            with open(md_files[key], encoding="utf-8") as f:
                md = f.read()
        else:
            md, _ = git_show([trt_git], commit, "docs/operators.md")
        onnx_commit = onnx_version = ir = None
        if ir_from:
            onnx_commit = git_tree_entry(trt_git, ir_from, "third_party/onnx")
            onnx_version = onnx_version_at(onnx_git, onnx_commit)
            ir = onnx_version_row(onnx_version)[1]
            ir_proto = onnx_ir_at(onnx_git, onnx_commit)
            if ir != ir_proto:
                raise SystemExit(f"TRT {key}: VERSION_TABLE says IR {ir}, onnx.in.proto says {ir_proto}")
        parsed = parse_trt_operators(md)
        opsets = parsed["opsets"]
        if opsets[0] is None and key.startswith("8."):
            opsets = [TRT_MIN_OPSET_8X, opsets[1]]
        out[key] = {"branch": branch, "commit": commit, "found_as": how, "header": parsed["header"],
                    "opsets": {"": opsets}, "ir_version": ir, "onnx": onnx_version,
                    "onnx_submodule": onnx_commit, "onnx_submodule_at": ir_from,
                    "supported": parsed["supported"],
                    "unsupported": parsed["unsupported"], "restrictions": parsed["restrictions"]}
        out[key].update(_ir_note(key, out[key]))
        out[key].update(_rules(out[key], parsed["types"]))
    src = ("onnx/onnx-tensorrt docs/operators.md on release branches at "
           + ", ".join(f"{k} {v[0] or 'NVIDIA/TensorRT v' + k + ' pin'}@{v[1][:12]}" for k, v in TRT_RELEASES.items())
           + "; ir_version = IR_VERSION of the onnx release third_party/onnx pins (onnx.helper.VERSION_TABLE, "
             "checked against onnx/onnx.in.proto; 8.6 from tag release/8.6-GA, null where unknown); "
             "8.x oldest opset from ModelImporter.cpp")
    return {"source": src, "releases": out}


def _rules(entry: dict, types: dict) -> dict:
    """``rules`` / ``unchecked``: the release's Restrictions column clause by clause, and the
    Supported Types of the ops ``trt_restrictions.TYPED`` names (``trt_restrictions.py``), only for
    the ops it supports."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from trt_restrictions import structure

    rules, unchecked = structure({op: t for op, t in entry["restrictions"].items() if op in entry["supported"]},
                                 types)
    return {"rules": rules, "unchecked": unchecked}


def _extract_types(key: str) -> dict:
    """The Supported Types cells of the rows kept in ``trt_operators/<release>.md``."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trt_operators", f"{key}.md"),
              encoding="utf-8") as f:
        return parse_trt_operators(f.read())["types"]


def _ir_note(key: str, entry: dict) -> dict:
    """The IR version of a release whose third_party/onnx pin could not be read (TRT_IR_FROM_DOCS)."""
    if entry["ir_version"] is not None or key not in TRT_IR_FROM_DOCS:
        return {}
    onnx_release, why = TRT_IR_FROM_DOCS[key]
    ir = onnx_version_row(onnx_release)[1]
    top = entry["opsets"][""][1]
    needed = _opset_ir(top)
    return {"onnx": onnx_release, "ir_version": max(ir, needed),
            "ir_version_from": f"{why}; onnx {onnx_release} has IR {ir} (onnx.helper.VERSION_TABLE)"
                               + (f", and the header's newest opset {top} needs IR {needed} "
                                  "(onnx.helper.find_min_ir_version_for), which the parser takes: it only logs "
                                  "the IR version (ModelImporter.cpp)" if needed > ir else "")}


def _opset_ir(opset: int) -> int:
    import onnx.helper

    return onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])


def restructure(path: str) -> None:
    """Rewrite ``rules`` / ``unchecked`` (and the IR version of TRT_IR_FROM_DOCS releases) of the
    shipped tensorrt.json from its own ``restrictions`` text and the Supported Types kept in the
    ``trt_operators/`` extracts; no git needed."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for key, entry in data["releases"].items():
        for k in ("rules", "unchecked"):
            entry.pop(k, None)
        entry.update(_ir_note(key, entry))
        entry.update(_rules(entry, _extract_types(key)))
    write_json(data, os.path.basename(path))


def _inline(v) -> bool:
    scalar = lambda x: x is None or isinstance(x, (bool, int, float, str))  # noqa: E731
    return isinstance(v, list) and all(scalar(x) or (isinstance(x, list) and all(map(scalar, x))) for x in v)


def _dump(v, indent: int = 0) -> str:
    """JSON with one op (and its list of ranges) per line, one restriction rule per line."""
    pad = " " * (indent + 1)
    if isinstance(v, dict) and ("kind" in v or "note" in v):  # a restriction rule: one line
        return json.dumps(v)
    if isinstance(v, dict) and v:
        items = [f"{pad}{json.dumps(k)}: {_dump(x, indent + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(v, list) and v and not _inline(v):
        return "[\n" + ",\n".join(pad + _dump(x, indent + 1) for x in v) + "\n" + " " * indent + "]"
    return json.dumps(v)


def _with_measured(data: dict, name: str) -> dict:
    """``data`` with each release's ``rewrite_forms`` kept from the file it replaces: those are
    measured in the releases themselves (tests/targets/test_passthrough_outputs.py), not read
    from git."""
    path = os.path.join(DATA, name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)["releases"]
        for key, entry in data["releases"].items():
            if "rewrite_forms" in old.get(key, {}):
                entry["rewrite_forms"] = old[key]["rewrite_forms"]
    return data


def write_json(data: dict, name: str) -> None:
    text = _dump(data) + "\n"
    assert json.loads(text) == data
    with open(os.path.join(DATA, name), "w", encoding="utf-8") as f:
        f.write(text)


# --- check -----------------------------------------------------------------------------------------

def check(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert isinstance(data.get("source"), str) and data["source"], path
    print(f"{os.path.relpath(path, ROOT)}: {len(data['releases'])} releases")
    for key, e in data["releases"].items():
        assert re.fullmatch(r"\d+\.\d+", key), key
        opsets = e["opsets"]
        if "cpu_ops" in e:
            for d, table in e["cpu_ops"].items():
                for op, ranges in table.items():
                    for a, b in ranges:
                        assert isinstance(a, int) and (b is None or (isinstance(b, int) and b >= a)), (key, op)
            ops = {d: len(t) for d, t in e["cpu_ops"].items()}
            print(f"  {key}: opsets {opsets} ir {e['ir_version']} cpu_ops {ops}"
                  f" ({e['cpu_ops_source']['ref']})")
        elif "supported" in e:
            rules = sum(len(r) for r in e.get("rules", {}).values())
            notes = sum(len(r) for r in e.get("unchecked", {}).values())
            print(f"  {key}: opsets {opsets} ir {e['ir_version']} supported {len(e['supported'])}"
                  f" unsupported {len(e['unsupported'])} restrictions {len(e['restrictions'])}"
                  f" (rules {rules}, unchecked {notes}) ({e['branch']})")
        else:
            print(f"  {key}: opsets {opsets} ir {e['ir_version']} onnx {e['onnx']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", choices=["check", "build", "restrictions"], default="check")
    p.add_argument("--ort-git", action="append", default=[], help="an onnxruntime git dir (repeatable)")
    p.add_argument("--trt-git", help="an onnx-tensorrt git dir")
    p.add_argument("--onnx-git", help="an onnx git dir (to name the onnx third_party/onnx pins)")
    p.add_argument("--trt-md", action="append", default=[], metavar="VERSION=FILE")
    a = p.parse_args(argv)
    if a.mode == "build":
        if a.ort_git:
            write_json(_with_measured(build_onnxruntime(a.ort_git, a.onnx_git), "onnxruntime.json"), "onnxruntime.json")
        if a.trt_git:
            if not a.onnx_git:
                p.error("--trt-git needs --onnx-git")
            md = dict(s.split("=", 1) for s in a.trt_md)
            write_json(build_tensorrt(a.trt_git, a.onnx_git, md), "tensorrt.json")
    if a.mode == "restrictions":
        restructure(os.path.join(DATA, "tensorrt.json"))
    for name in ("onnxruntime.json", "tensorrt.json"):
        path = os.path.join(DATA, name)
        if os.path.exists(path):
            check(path)
        else:
            print(f"{os.path.relpath(path, ROOT)}: missing (run with build)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
