"""The engine's splice (the nodes that replace a node, put in its place in the body) and naming
(the node that produces the original first output carries the original name)."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper

from rewriter.convert.splice import named, splice


def _n(name: str) -> onnx.NodeProto:
    return helper.make_node("Identity", [f"{name}_in"], [f"{name}_out"], name=name)


def _body(container: str, names: str):
    """Nodes named by the letters of ``names``, in a list or in a GraphProto's repeated field."""
    nodes = [_n(c) for c in names]
    if container == "list":
        return nodes, nodes
    graph = onnx.GraphProto()
    graph.node.extend(nodes)
    return graph.node, list(graph.node)


def _names(nodes) -> str:
    return "".join(n.name for n in nodes)


CASES = [
    # (body, position of the replaced node, its replacement: its own letter is the node itself, expected body, end)
    ("abc", 1, "b", "abc", 2),  # kept (or changed in place)
    ("abc", 1, "xy", "axyc", 3),  # replaced by two others
    ("abc", 1, "", "ac", 1),  # removed, nothing in its place
    ("abc", 0, "xyz", "xyzbc", 3),  # the first node replaced
    ("abc", 2, "x", "abx", 3),  # the last node replaced by one other
    ("abc", 1, "xyb", "axybc", 4),  # kept, two inserted before it
    ("abc", 1, "bxy", "abxyc", 4),  # kept, two inserted after it
    ("abcd", 2, "xcyz", "abxcyzd", 6),  # kept, inserted around it
    ("a", 0, "xay", "xay", 3),  # the only node, kept with one before and one after
]


@pytest.mark.parametrize("container", ["list", "repeated field"])
@pytest.mark.parametrize("names, position, replacement, expected, end", CASES)
def test_splice_puts_the_sequence_in_place_of_the_node(container, names, position, replacement, expected, end):
    nodes, originals = _body(container, names)
    node = originals[position]
    sequence = [node if c == names[position] else _n(c) for c in replacement]
    assert splice(nodes, position, node, sequence) == end
    assert _names(nodes) == expected
    if names[position] in replacement and container == "list":
        assert nodes[expected.index(names[position])] is node  # the node itself stays, not a copy


def test_splice_continues_a_walk_over_the_original_nodes():
    """The engine's walk: each original node replaced in turn, the next found from splice's end."""
    nodes, originals = _body("repeated field", "abcd")
    replacements = {"a": "xa", "b": "", "c": "yz", "d": "d"}
    shift = 0
    for k, node in enumerate(originals):
        letter = node.name
        sequence = [node if c == letter else _n(c) for c in replacements[letter]]
        assert nodes[k + shift].name == letter
        shift = splice(nodes, k + shift, node, sequence) - k - 1
    assert _names(nodes) == "xayzd"


def test_splice_after_nodes_the_body_gained_before_the_position():
    """Constants a function body gains at its top move the node: the caller passes its new position."""
    nodes, originals = _body("list", "ab")
    nodes.insert(0, _n("k"))
    assert splice(nodes, 2, originals[1], [_n("x"), originals[1]]) == 4
    assert _names(nodes) == "kaxb"


class _State:
    def __init__(self):
        self.count = 0

    def fresh_node_name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"


def test_named_gives_the_original_name_to_the_node_producing_the_first_output():
    node = helper.make_node("Softmax", ["x"], ["y_pre"], name="sm", doc_string="doc")
    carrier = helper.make_node("Reshape", ["y_pre", "s"], ["y"], name="Reshape_1")
    result = named(_State(), [node, carrier], node, "sm", "y")
    assert [n.name for n in result] == ["sm_1", "sm"]
    assert carrier.doc_string == "doc"


def test_named_leaves_a_kept_or_unnamed_node_alone():
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    assert named(_State(), [node], node, "r", "y") == [node] and node.name == "r"
    other = helper.make_node("Identity", ["x"], ["z"], name="i")
    unnamed = helper.make_node("Relu", ["x"], ["y"])
    assert named(_State(), [other, unnamed], unnamed, "", "y")[1].name == ""


def test_named_on_a_removed_node_names_only_its_replacement():
    node = helper.make_node("Dropout", ["x"], ["y"], name="d")
    replacement = helper.make_node("Identity", ["x"], ["y"], name="Identity_1")
    state = _State()
    assert [n.name for n in named(state, [replacement], node, "d", "y", removed=True)] == ["d"]
    assert node.name == "d" and state.count == 0


def test_the_walk_splices_after_the_constants_a_function_body_gains():
    """Split-18 of a dim known only at run time goes to 13 with its sizes computed by nodes inserted
    before it, and constants added at the top of the function: the nodes still come in order."""
    import numpy as np

    from rewriter.convert import convert_model
    from tests.oracle import assert_same_outputs, assert_valid, run

    body = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Split", ["r"], ["a", "b"], axis=0, num_outputs=2),
            helper.make_node("Neg", ["b"], ["c"])]
    fn = helper.make_function("local", "F", ["x"], ["a", "c"], body, [helper.make_opsetid("", 18)])
    graph = helper.make_graph([helper.make_node("F", ["x"], ["a", "c"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2])],
                              [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [d, 2])
                               for n, d in (("a", "A"), ("c", "C"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
                              functions=[fn])
    model.ir_version = 9
    result, _ = convert_model(model, 13)
    assert_valid(result)
    ops = [n.op_type for n in result.functions[0].node]
    assert ops[0] == "Constant" and ops.index("Relu") < ops.index("Shape") < ops.index("Split") < ops.index("Neg")
    for n in (5, 4, 1):
        feeds = {"x": np.arange(2 * n, dtype=np.float32).reshape(n, 2) - 3}
        assert_same_outputs(run(model, feeds), run(result, feeds))
