"""The loop the optimizer's node passes share: which nodes it visits (op types, the default
domain only, not the ones removed earlier in the walk, every graph and function, graphs of a
new enough opset), what it counts, and an honest ``modified``."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from rewriter.optimize.node_pass import NodeRewritePass


def _model(opset=13):
    return ir.serde.deserialize_model(onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["": {opset}, "custom": 1, "local": 1]>
        g (float[2] x, bool c) => (float[2] y, float[2] z) {{
            a = Relu(x)
            b = custom.Relu(a)
            d = Relu(b)
            e = Sigmoid(d)
            y = If(c) <then_branch = t () => (float[2] t_out) {{ t_out = Relu(x) }},
                        else_branch = f () => (float[2] f_out) {{ f_out = Neg(x) }}>
            z = local.fn(e)
        }}
        <domain: "local", opset_import: ["": {opset}]>
        fn (v) => (w) {{ w = Relu(v) }}"""))


class _Visits(NodeRewritePass):
    OPS = frozenset({"Relu"})
    DONE = "visited %d Relu node(s)"

    def __init__(self, remove_next=False):
        super().__init__()
        self.seen = []
        self.remove_next = remove_next

    def visit(self, scope, node):
        self.seen.append((node.op_type, node.outputs[0].name, scope.opset))
        if self.remove_next and node.outputs[0].name == "a":  # the next Relu goes before it is visited
            nxt = next(n for n in scope.graph if n.outputs[0].name == "d")
            nxt.outputs[0].replace_all_uses_with(nxt.inputs[0])
            scope.graph.remove(nxt, safe=True)
        self.count += 1


def test_every_default_domain_node_of_its_ops_in_every_graph_and_function():
    p = _Visits()
    result = p(_model())
    assert sorted(name for _, name, _ in p.seen) == ["a", "d", "t_out", "w"]
    assert p.count == 4 and result.modified


def test_nodes_removed_earlier_in_the_walk_are_not_visited():
    p = _Visits(remove_next=True)
    p(_model())
    assert "d" not in [name for _, name, _ in p.seen]


def test_graphs_of_an_older_opset_are_skipped_and_nothing_changed_is_said():
    class Newer(_Visits):
        MIN_OPSET = 14

    p = Newer()
    result = p(_model(opset=13))
    assert p.seen == [] and p.count == 0 and not result.modified
    q = Newer()
    q(_model(opset=14))
    assert len(q.seen) == 4 and {opset for _, _, opset in q.seen} == {14}
