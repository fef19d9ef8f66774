"""rewriter.verify is three concerns in three subpackages (inputs: input validation; shapes: shape
checks; numerics: numerical verification) that do not import one another, and the old import
paths of their modules still give the same objects."""

from __future__ import annotations

import ast
import importlib
import pathlib

VERIFY = pathlib.Path(__file__).resolve().parents[2] / "rewriter" / "verify"
CONCERNS = ("inputs", "shapes", "numerics")


def _imported(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_each_concern_is_a_subpackage_with_a_docstring():
    for concern in CONCERNS:
        init = VERIFY / concern / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), concern
    doc = ast.get_docstring(ast.parse((VERIFY / "__init__.py").read_text()))
    assert all(f"``{c}/``" in doc for c in CONCERNS)


def test_the_concerns_do_not_import_one_another():
    crossings = []
    for concern in CONCERNS:
        others = [f"rewriter.verify.{o}" for o in CONCERNS if o != concern]
        for path in (VERIFY / concern).glob("*.py"):
            crossings += [f"{concern}/{path.name} imports {m}" for m in _imported(path)
                          if any(m == o or m.startswith(o + ".") for o in others)]
    assert not crossings, crossings


def test_the_packages_give_their_modules_objects():
    pairs = [("rewriter.verify.shapes", "rewriter.verify.shapes.check", "check_report"),
             ("rewriter.verify.shapes", "rewriter.verify.shapes.check", "verify_shapes_with_ranks"),
             ("rewriter.verify.numerics", "rewriter.verify.numerics.compare", "verify_numerics")]
    for old, new, name in pairs:
        assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name), (old, name)
    from rewriter.verify.shapes.check import verify_reduce_prod_shapes, verify_shapes

    assert verify_shapes is verify_reduce_prod_shapes
