"""Small valid models whose nodes are read only by a subgraph's or a function's outputs (issue 27).

Each builder returns (model, feeds list, live, dead): ``live`` names the nodes that must stay
(each one's only reader is a subgraph output, or a node making one), ``dead`` the nodes nothing
reads (a remover that reaches the scope removes them: the control that the walk goes there).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

F = T.FLOAT
X = np.array([0.5, -1.25, 2.0], np.float32)


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, functions=(), initializers=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [h.make_opsetid("", 17)] + ([h.make_opsetid("local", 1)] if functions else [])
    model = h.make_model(graph, opset_imports=opsets, functions=list(functions), ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def if_branch():
    """t = Neg(x) in the main graph, read only by the then branch's Mul, whose output is the branch's."""
    then = h.make_graph([h.make_node("Mul", ["t", "t"], ["o"], name="then_mul"),
                         h.make_node("Exp", ["x"], ["then_junk"], name="then_dead")], "then", [], [_vi("o", F, [3])])
    other = h.make_graph([h.make_node("Abs", ["x"], ["e"], name="else_abs")], "else", [], [_vi("e", F, [3])])
    nodes = [h.make_node("Neg", ["x"], ["t"], name="neg"),
             h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("c", T.BOOL, [])], [_vi("y", F, [3])])
    feeds = [{"x": X, "c": np.array(flag)} for flag in (True, False)]
    return model, feeds, {"neg", "if", "then_mul", "else_abs"}, {"then_dead"}


def if_branch_initializer():
    """The then branch's output is an initializer of the branch itself (nothing else reads it)."""
    then = h.make_graph([], "then", [], [_vi("k", F, [3])], [nh.from_array(np.array([1, 2, 3], np.float32), "k")])
    other = h.make_graph([h.make_node("Abs", ["x"], ["e"], name="else_abs")], "else", [], [_vi("e", F, [3])])
    nodes = [h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("c", T.BOOL, [])], [_vi("y", F, [3])])
    feeds = [{"x": X, "c": np.array(flag)} for flag in (True, False)]
    return model, feeds, {"if", "else_abs"}, set()


def nested_if():
    """An If in a then branch: the inner branch's node makes the inner output, which is the outer output."""
    inner_then = h.make_graph([h.make_node("Sin", ["x"], ["io"], name="inner_sin")], "inner_then", [],
                              [_vi("io", F, [3])])
    inner_else = h.make_graph([h.make_node("Cos", ["x"], ["ie"], name="inner_cos"),
                               h.make_node("Exp", ["x"], ["inner_junk"], name="inner_dead")], "inner_else", [],
                              [_vi("ie", F, [3])])
    then = h.make_graph([h.make_node("If", ["c2"], ["o"], name="inner_if", then_branch=inner_then,
                                     else_branch=inner_else)], "then", [], [_vi("o", F, [3])])
    other = h.make_graph([h.make_node("Abs", ["x"], ["e"], name="else_abs")], "else", [], [_vi("e", F, [3])])
    nodes = [h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("c", T.BOOL, []), _vi("c2", T.BOOL, [])], [_vi("y", F, [3])])
    feeds = [{"x": X, "c": np.array(a), "c2": np.array(b)} for a in (True, False) for b in (True, False)]
    return model, feeds, {"if", "inner_if", "inner_sin", "inner_cos", "else_abs"}, {"inner_dead"}


def loop_body():
    """Loop: the body's Add (carried) and Mul (scan output) read the outer t; the scan output is unused outside."""
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         h.make_node("Add", ["v_in", "t"], ["v_out"], name="body_add"),
         h.make_node("Mul", ["v_in", "t"], ["sc"], name="body_mul"),
         h.make_node("Exp", ["v_in"], ["body_junk"], name="body_dead")], "body",
        [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("v_in", F, [3])],
        [_vi("cond_out", T.BOOL, []), _vi("v_out", F, [3]), _vi("sc", F, [3])])
    nodes = [h.make_node("Neg", ["x"], ["t"], name="neg"),
             h.make_node("Loop", ["n", "", "x"], ["y", "ys"], name="loop", body=body)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("n", T.INT64, [])], [_vi("y", F, [3])])
    feeds = [{"x": X, "n": np.array(3, np.int64)}]
    return model, feeds, {"neg", "loop", "body_cond", "body_add", "body_mul"}, {"body_dead"}


def scan_body():
    """Scan: the body's Mul makes a scan output from the outer t; the final state is unused outside."""
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "xi"], ["s_out"], name="body_add"),
         h.make_node("Mul", ["xi", "t"], ["yo"], name="body_mul"),
         h.make_node("Exp", ["xi"], ["body_junk"], name="body_dead")], "body",
        [_vi("s_in", F, [3]), _vi("xi", F, [3])], [_vi("s_out", F, [3]), _vi("yo", F, [3])])
    nodes = [h.make_node("Neg", ["s0"], ["t"], name="neg"),
             h.make_node("Scan", ["s0", "xs"], ["sf", "ys"], name="scan", body=body, num_scan_inputs=1)]
    model = _model(nodes, [_vi("s0", F, [3]), _vi("xs", F, [2, 3])], [_vi("ys", F, [2, 3])])
    feeds = [{"s0": X, "xs": np.stack([X, -X])}]
    return model, feeds, {"neg", "scan", "body_add", "body_mul"}, {"body_dead"}


def function_output():
    """A function's second output, made by its Abs, is not read by the caller: still the function's output."""
    fn = h.make_function("local", "F", ["a"], ["b", "b2"],
                         [h.make_node("Neg", ["a"], ["b"], name="fn_neg"),
                          h.make_node("Abs", ["a"], ["b2"], name="fn_abs"),
                          h.make_node("Exp", ["a"], ["fn_junk"], name="fn_dead")],
                         [h.make_opsetid("", 17)])
    nodes = [h.make_node("F", ["x"], ["y", "y2"], domain="local", name="call")]
    model = _model(nodes, [_vi("x", F, [3])], [_vi("y", F, [3])], functions=[fn])
    return model, [{"x": X}], {"call", "fn_neg", "fn_abs"}, {"fn_dead"}


BUILDERS = {"if": if_branch, "if_initializer": if_branch_initializer, "nested_if": nested_if,
            "loop": loop_body, "scan": scan_body, "function": function_output}


def node_names(model: onnx.ModelProto) -> set[str]:
    """Every node's name, in every graph, subgraph and function."""
    from rewriter.graph import traversal

    return {n.name for s in traversal.iter_scopes(model) for n in s.body.node}


def subgraph_outputs_made(model: onnx.ModelProto) -> bool:
    """Every subgraph and function output is made there: by a node, an initializer or an input
    of its own (what onnx.checker and ONNX Runtime require), checked by hand too."""
    from rewriter.graph import traversal

    for scope in traversal.iter_scopes(model):
        body = scope.body
        made = {o for n in body.node for o in n.output}
        if scope.is_function:
            made |= set(body.input)
            outputs = list(body.output)
        else:
            made |= {t.name for t in body.initializer} | {v.name for v in body.input}
            outputs = [v.name for v in body.output]
        if not set(outputs) <= made:
            return False
    return True


def same_everywhere(source, result, feeds_list):
    """``result`` passes the full checker, makes every subgraph output, and computes what
    ``source`` does in ONNX Runtime on each of ``feeds_list``."""
    import numpy as np
    import onnxruntime as ort

    def run(model, feeds):
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    onnx.checker.check_model(result, full_check=True)
    assert subgraph_outputs_made(result)
    for feeds in feeds_list:
        for e, g in zip(run(source, feeds), run(result, feeds)):
            np.testing.assert_array_equal(g, e)
