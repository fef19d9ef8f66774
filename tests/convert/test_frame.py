"""The engine's Frame: what a call of the walk converts for, passed down and never changed."""

from __future__ import annotations

from rewriter.convert.frame import Frame


def test_a_frame_is_replaced_not_changed():
    top = Frame(13)
    inner = top.within("function body of node 'ln'")
    assert (top.derived, top.inside) == (False, None)
    assert (inner.to_version, inner.derived, inner.inside) == (13, True, "function body of node 'ln'")
    assert top.towards(10).to_version == 10 and top.to_version == 13
    assert top.at(("y",)).current == ("y",) and top.current is None


def test_made_nodes_are_derived():
    assert Frame(13).made().derived
    made = Frame(13, derived=True)
    assert made.made() is made


def test_a_blocker_label_says_where_the_node_came_from():
    top = Frame(13)
    assert top.label("node 'n' (Add)") == "node 'n' (Add)"
    first = top.made_converting("node 'a' (Softmax)")
    second = first.made_converting("node 'b' (Flatten)")
    assert second.maker == "node 'a' (Softmax)"  # the outermost maker: the node of the model
    assert second.label("node 'n' (Add)") == "node 'n' (Add) (made converting node 'a' (Softmax))"
    inside = second.within("function body of node 'g' (Gelu)")  # the innermost expansion wins
    assert inside.label("x") == "x (from the function body of node 'g' (Gelu))"
    assert inside.within("decomposition of node 'd' (DFT)").label("x") == "x (from the decomposition of node 'd' (DFT))"
    assert inside.made_converting("node 'c' (Pad)").label("x") == "x (from the function body of node 'g' (Gelu))"
