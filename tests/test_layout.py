"""The package's layout rules: no import cycles, no module reaching into another's private
names, one registry that the converter loops over."""

from __future__ import annotations

import ast
import pathlib
import sys

import onnx
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "rewriter"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _package(name: str, path: pathlib.Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _imports(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every rewriter import, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("rewriter")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rewriter"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.append((sub, []) if sub in modules else (node.module, [a.name]))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    edges = {}
    for name, path in modules.items():
        targets = set()
        for target, _ in _imports(path, modules):
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name and target in modules:
                targets.add(target)
        edges[name] = targets
    return edges


def test_the_layout_has_the_subpackages_of_the_architecture():
    for sub in ("graph", "io", "convert", "convert/adapters", "fold", "kernels", "verify", "cli",
                "precision", "targets", "optimize"):
        assert (ROOT / sub / "__init__.py").is_file(), sub


def test_no_import_cycles():
    edges = _graph()
    # A package's __init__ importing its own submodules is how a package exposes them; the
    # submodules importing a sibling through the package would then be a cycle too.
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


def test_a_cycle_would_be_found(tmp_path, monkeypatch):
    """The cycle finder itself: a package with a -> b -> a is reported."""
    pkg = tmp_path / "rewriter"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from rewriter import b\n")
    (pkg / "b.py").write_text("def f():\n    from rewriter.a import x\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    assert _graph() == {"rewriter": set(), "rewriter.a": {"rewriter.b"}, "rewriter.b": {"rewriter.a"}}
    with pytest.raises(AssertionError):
        test_no_import_cycles()


def test_no_module_imports_another_modules_private_names():
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        for target, names in _imports(path, modules):
            if target != _package(name, path):  # a package's own private parts are its business
                offenders += [f"{name} imports {target}.{n}" for n in names
                              if n.startswith("_") and not n.endswith("__")]
            last = target.rsplit(".", 1)[-1]
            if last.startswith("_") and not last.startswith("__") and \
                    target.rsplit(".", 1)[0] != _package(name, path):
                offenders.append(f"{name} imports private module {target}")
    assert not offenders, offenders


def test_only_the_cli_prints():
    printing = []
    for name, path in _modules().items():
        if name.startswith("rewriter.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                printing.append(name)
    assert not printing, printing


def test_no_module_level_state_is_set_from_functions():
    """No module-level state that callers (e.g. the CLI) set; a warn-once flag is the one exception."""
    found = [(name, node.names) for name, path in _modules().items()
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Global) and node.names != ["_warned"]]
    assert not found, found


def test_the_converter_loops_over_the_registry(monkeypatch):
    """Registering one adapter for an op is all it takes for the converter to use it."""
    from rewriter.convert import registry
    from rewriter.graph.attributes import attribute as get_attr
    from rewriter.convert.planner import convert_model

    calls = []
    registry.lookup("Elu", 6, 1)  # the adapter families are loaded before the registry is patched

    def elu_6_1(node, ctx):
        calls.append((node.op_type, ctx.label))

    monkeypatch.setitem(registry.ADAPTERS, ("Elu", 6, 1), elu_6_1)
    monkeypatch.setitem(registry.ADAPTERS, ("Elu", 1, 6), lambda node, ctx: None)
    registry.has_adapters.cache_clear()
    try:
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("Elu", ["x"], ["y"], name="elu", alpha=0.5)], "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 6)])
        model.ir_version = 3
        result, report = convert_model(model, 1)
    finally:
        registry.has_adapters.cache_clear()
    assert calls == [("Elu", "node 'elu' (Elu) in main graph")]
    assert report.own["Elu"] == 1
    assert get_attr(result.graph.node[0], "alpha").f == 0.5


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 80


def _too_long(root: pathlib.Path) -> list[str]:
    """Modules over MAX_MODULE_LINES lines and functions over MAX_FUNCTION_LINES lines under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}(): {length} lines")
    return found


def test_no_module_over_400_lines_and_no_function_over_80():
    assert _too_long(ROOT) == []


def test_a_long_module_or_function_would_be_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "ok.py").write_text("def f():\n" + "    x = 1\n" * 79)
    (pkg / "long_function.py").write_text("def f():\n" + "    x = 1\n" * 80)
    (pkg / "long_module.py").write_text("x = 1\n" * 401)
    assert _too_long(pkg) == ["pkg/long_function.py:1 f(): 81 lines", "pkg/long_module.py: 401 lines"]
