"""Unused-value removal (``rewriter.graph.unused_values``, what convert and fold use) inside subgraphs
and functions: a node whose only reader is a subgraph's output (If branch, Loop body, Scan
body, a function's output), or a node making one, is live (issue 27).

Oracles: onnx.checker (full check) on every result, the subgraph outputs still made inside their
graph, and ONNX Runtime computing the same outputs as the source on every branch.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.graph import traversal
from rewriter.graph.unused_values import remove_unused
from tests.graph.subgraph_models import BUILDERS, node_names, same_everywhere




def _copy(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_sweep_keeps_what_a_subgraph_output_reads_and_removes_the_dead(kind):
    model, feeds, live, dead = BUILDERS[kind]()
    result = _copy(model)
    removed = remove_unused(result)
    names = node_names(result)
    assert live <= names, (kind, live - names, removed)
    assert not dead & names, (kind, dead & names)  # the sweep did reach the subgraph
    assert len(removed) == len(dead)
    same_everywhere(model, result, feeds)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_candidates_named_by_only_that_a_subgraph_output_reads_stay(kind):
    """With ``only`` (how convert and fold call it): every live node's outputs, every
    subgraph initializer and output, offered for removal: none of them goes."""
    model, feeds, live, _ = BUILDERS[kind]()
    result = _copy(model)
    offered = set()
    for scope in traversal.iter_scopes(result):
        offered |= {o for n in scope.body.node if n.name in live for o in n.output}
        if not scope.is_function:
            offered |= {t.name for t in scope.body.initializer}
            if scope.parent is not None:
                offered |= {v.name for v in scope.body.output}
        else:
            offered |= set(scope.body.output)
    assert offered
    assert remove_unused(result, only=offered) == []
    assert node_names(result) == node_names(model)
    assert result.SerializeToString() == model.SerializeToString()
    same_everywhere(model, result, feeds)


def test_only_an_initializer_a_branch_outputs_stays_while_an_unread_one_goes():
    """The initializer-only fast path: a branch's own initializer that is the branch's output is
    read (by the branch output); one beside it that nothing reads goes."""
    model, feeds, _, _ = BUILDERS["if_initializer"]()
    result = _copy(model)
    then = next(a.g for a in result.graph.node[0].attribute if a.name == "then_branch")
    then.initializer.append(nh.from_array(np.zeros(3, np.float32), "nobody"))
    removed = remove_unused(result, only={"k", "nobody"})
    assert [t.name for t in then.initializer] == ["k"], removed
    assert len(removed) == 1 and "nobody" in removed[0]
    same_everywhere(model, result, feeds)


# ---------------------------------------------------------------- a subgraph returning an outer value itself

def _returns_outer_value(kind):
    """t = Neg(x) in the main graph beside a dead Exp; an If's then branch (``if``) or a Loop's body
    (``loop``, as its scan output) lists t itself among its outputs, no node inside reading it.
    (onnx.checker and ONNX Runtime want a node making a subgraph output: ``_identity_before_outputs``
    adds one to compare the models in ONNX Runtime.)"""
    f = T.FLOAT
    main = [h.make_node("Neg", ["x"], ["t"], name="neg"), h.make_node("Exp", ["x"], ["junk"], name="main_dead")]
    if kind == "if":
        then = h.make_graph([], "then", [], [_vi("t", f, [3])])
        other = h.make_graph([h.make_node("Abs", ["x"], ["e"], name="else_abs")], "else", [], [_vi("e", f, [3])])
        node = h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
        io = [_vi("x", f, [3]), _vi("c", T.BOOL, [])], [_vi("y", f, [3])]
        feeds = [{"x": np.array([0.5, -1.25, 2.0], np.float32), "c": np.array(c)} for c in (True, False)]
    else:
        body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
                             h.make_node("Identity", ["v_in"], ["v_out"], name="body_id")], "body",
                            [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("v_in", f, [3])],
                            [_vi("cond_out", T.BOOL, []), _vi("v_out", f, [3]), _vi("t", f, [3])])
        node = h.make_node("Loop", ["n", "", "x"], ["v", "ts"], name="loop", body=body)
        io = [_vi("x", f, [3]), _vi("n", T.INT64, [])], [_vi("ts", f, [None, 3])]
        feeds = [{"x": np.array([0.5, -1.25, 2.0], np.float32), "n": np.array(2, np.int64)}]
    graph = h.make_graph(main + [node], "g", *io)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), feeds


def _identity_before_outputs(model):
    """A copy in which each subgraph output not made in its subgraph is made there by an Identity."""
    out = _copy(model)
    for scope in traversal.iter_scopes(out):
        body = scope.body
        if scope.parent is None or scope.is_function:
            continue
        made = {o for n in body.node for o in n.output} | {t.name for t in body.initializer}
        made |= {v.name for v in body.input}
        for v in body.output:
            if v.name not in made:
                body.node.append(h.make_node("Identity", [v.name], [v.name + "_in"]))
                v.name += "_in"
    return out


@pytest.mark.parametrize("kind", ["if", "loop"])
def test_a_full_sweep_keeps_the_producer_of_an_outer_value_a_subgraph_returns_itself(kind):
    model, feeds = _returns_outer_value(kind)
    result = _copy(model)
    removed = remove_unused(result)  # the full sweep: no ``only``
    names = node_names(result)
    assert "neg" in names, removed
    assert "main_dead" not in names and len(removed) == 1, removed  # the control: the sweep ran
    same_everywhere(_identity_before_outputs(model), _identity_before_outputs(result), feeds)


# ---------------------------------------------------------------- through the commands that use it

def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _axes(name, value):
    return h.make_node("Constant", [], [name], name=name, value=nh.from_array(np.array(value, np.int64)))


def _squeeze_models():
    """Opset-13 models in which a Constant gives a Squeeze its axes and is also a subgraph's or a
    function's output: converting to 11 makes the axes an attribute, leaving the Constant read
    only by that output."""
    x = np.random.default_rng(0).normal(size=[2, 1, 3]).astype(np.float32)
    then = h.make_graph([_axes("then_ax", [1]), h.make_node("Squeeze", ["x", "then_ax"], ["ts"], name="then_sq")],
                        "then", [], [_vi("ts", T.FLOAT, [2, 3]), _vi("then_ax", T.INT64, [1])])
    other = h.make_graph([_axes("else_ax", [-2]), h.make_node("Squeeze", ["x", "else_ax"], ["es"], name="else_sq")],
                         "else", [], [_vi("es", T.FLOAT, [2, 3]), _vi("else_ax", T.INT64, [1])])
    if_model = _opset13([h.make_node("If", ["c"], ["y", "yax"], name="if", then_branch=then, else_branch=other)],
                        [_vi("x", T.FLOAT, [2, 1, 3]), _vi("c", T.BOOL, [])],
                        [_vi("y", T.FLOAT, [2, 3]), _vi("yax", T.INT64, [1])])
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
                         h.make_node("Identity", ["v_in"], ["v_out"], name="body_id"),
                         _axes("body_ax", [1]), h.make_node("Squeeze", ["v_in", "body_ax"], ["s"], name="body_sq")],
                        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("v_in", T.FLOAT, [2, 1, 3])],
                        [_vi("cond_out", T.BOOL, []), _vi("v_out", T.FLOAT, [2, 1, 3]), _vi("s", T.FLOAT, [2, 3]),
                         _vi("body_ax", T.INT64, [1])])
    loop_model = _opset13([h.make_node("Loop", ["n", "", "x"], ["v", "ss", "axs"], name="loop", body=body)],
                          [_vi("x", T.FLOAT, [2, 1, 3]), _vi("n", T.INT64, [])],
                          [_vi("ss", T.FLOAT, [None, 2, 3]), _vi("axs", T.INT64, [None, 1])])
    scan = h.make_graph([_axes("scan_ax", [0]), h.make_node("Squeeze", ["xi", "scan_ax"], ["sq"], name="scan_sq"),
                         h.make_node("Add", ["s_in", "sq"], ["s_out"], name="scan_add")], "body",
                        [_vi("s_in", T.FLOAT, [3]), _vi("xi", T.FLOAT, [1, 3])],
                        [_vi("s_out", T.FLOAT, [3]), _vi("scan_ax", T.INT64, [1])])
    scan_model = _opset13([h.make_node("Scan", ["s0", "xs"], ["sf", "axs"], name="scan", body=scan,
                                       num_scan_inputs=1)],
                          [_vi("s0", T.FLOAT, [3]), _vi("xs", T.FLOAT, [2, 1, 3])],
                          [_vi("sf", T.FLOAT, [3]), _vi("axs", T.INT64, [2, 1])])
    fn = h.make_function("local", "F", ["a"], ["b", "fn_ax"],
                         [_axes("fn_ax", [1]), h.make_node("Squeeze", ["a", "fn_ax"], ["b"], name="fn_sq")],
                         [h.make_opsetid("", 13)])
    fn_model = _opset13([h.make_node("F", ["x"], ["y", "yax"], domain="local", name="call")],
                        [_vi("x", T.FLOAT, [2, 1, 3])], [_vi("y", T.FLOAT, [2, 3])], functions=[fn])
    return {
        "if": (if_model, [{"x": x, "c": np.array(f)} for f in (True, False)], {"then_ax", "else_ax"}),
        "loop": (loop_model, [{"x": x, "n": np.array(2, np.int64)}], {"body_ax"}),
        "scan": (scan_model, [{"s0": x[0, 0], "xs": x}], {"scan_ax"}),
        "function": (fn_model, [{"x": x}], {"fn_ax"}),
    }


def _opset13(nodes, inputs, outputs, functions=()):
    graph = h.make_graph(nodes, "g", inputs, outputs)
    opsets = [h.make_opsetid("", 13)] + ([h.make_opsetid("local", 1)] if functions else [])
    model = h.make_model(graph, opset_imports=opsets, functions=list(functions), ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("kind", ["if", "loop", "scan", "function"])
def test_convert_keeps_a_constant_that_only_a_subgraph_output_reads_after_its_node_let_go(kind):
    model, feeds, constants = _squeeze_models()[kind]
    result = rewriter.convert_opset(model, 11)
    assert constants <= node_names(result), node_names(result)
    squeezes = [n for s in traversal.iter_scopes(result) for n in s.body.node if n.op_type == "Squeeze"]
    assert squeezes and all(len(n.input) == 1 for n in squeezes)  # the premise: axes became an attribute
    same_everywhere(model, result, feeds)


def _reduce_prod_in_branch():
    """A then branch: d = Constant, r = ReduceProd(d); both are the branch's outputs."""
    d = h.make_node("Constant", [], ["d"], name="then_d", value=nh.from_array(np.array([1.5, -2.0, 4.0], np.float32)))
    then = h.make_graph([d, h.make_node("ReduceProd", ["d"], ["r"], name="then_rp", keepdims=0)], "then", [],
                        [_vi("r", T.FLOAT, []), _vi("d", T.FLOAT, [3])])
    other = h.make_graph([h.make_node("ReduceSum", ["x"], ["es"], name="else_rs", keepdims=0),
                          h.make_node("Identity", ["x"], ["ex"], name="else_id")], "else", [],
                         [_vi("es", T.FLOAT, []), _vi("ex", T.FLOAT, [3])])
    model = _opset13([h.make_node("If", ["c"], ["y", "z"], name="if", then_branch=then, else_branch=other)],
                     [_vi("x", T.FLOAT, [3]), _vi("c", T.BOOL, [])], [_vi("y", T.FLOAT, []), _vi("z", T.FLOAT, [3])])
    feeds = [{"x": np.array([1.0, 2.0, 3.0], np.float32), "c": np.array(f)} for f in (True, False)]
    return model, feeds


def test_fold_keeps_a_folded_reduce_prods_constant_that_a_branch_outputs():
    model, feeds = _reduce_prod_in_branch()
    result = rewriter.fold_reduce_prod(model)
    ops = [n.op_type for s in traversal.iter_scopes(result) for n in s.body.node]
    assert "ReduceProd" not in ops  # the premise: it was folded, its input consumed
    then = next(a.g for a in result.graph.node[0].attribute if a.name == "then_branch")
    made = {o for n in then.node for o in n.output} | {t.name for t in then.initializer}
    assert {"r", "d"} <= made
    same_everywhere(model, result, feeds)
