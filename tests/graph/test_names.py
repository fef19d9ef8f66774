"""The one fresh-name loop (rewriter/graph/names.py)."""

from __future__ import annotations

from rewriter.graph.names import fresh_name


def test_the_base_when_free_else_the_smallest_suffix():
    used = {"x", "x_1", "x_3"}
    assert fresh_name(used, "y") == "y" and "y" in used
    assert fresh_name(used, "x") == "x_2" and "x_2" in used
    assert fresh_name(used, "x") == "x_4"


def test_first_and_separator():
    used = {"f_float16"}
    assert fresh_name(used, "f_float16", 2) == "f_float16_2"
    used = {"v", "v__1"}
    assert fresh_name(used, "v", sep="__") == "v__2"
    assert fresh_name(set(), "v", sep="__") == "v"
