"""The optimizer's unused-value removal (``RemoveUnusedPass`` on onnx_ir) inside subgraphs and
functions: a node whose only reader is a subgraph's output (If branch, Loop body, Scan body, a
function's output), or a node making one, is live (issue 27).

Oracles: onnx.checker (full check) on every result, the subgraph outputs still made inside
their graph, ONNX Runtime computing the same outputs as the source on every branch.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

import rewriter
from rewriter.optimize import optimize_proto
from rewriter.optimize.remove_unused import RemoveUnusedPass
from tests.graph.subgraph_models import BUILDERS, node_names, same_everywhere




@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_the_pass_keeps_what_a_subgraph_output_reads_and_removes_the_dead(kind):
    model, feeds, live, dead = BUILDERS[kind]()
    ir_model = ir.serde.deserialize_model(model)
    unused = RemoveUnusedPass()
    result = unused(ir_model)
    out = ir.serde.serialize_model(result.model)
    names = node_names(out)
    assert live <= names, (kind, live - names)
    assert not dead & names, (kind, dead & names)  # the pass did reach the subgraph
    assert unused.removed_nodes == len(dead) and result.modified == bool(dead)
    same_everywhere(model, out, feeds)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_the_pass_run_twice_changes_nothing_more(kind):
    model, _, live, _ = BUILDERS[kind]()
    ir_model = ir.serde.deserialize_model(model)
    RemoveUnusedPass()(ir_model)
    again = RemoveUnusedPass()
    assert not again(ir_model).modified and again.removed_nodes == 0
    assert live <= node_names(ir.serde.serialize_model(ir_model))


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_optimize_keeps_subgraph_outputs_and_computes_the_same(kind):
    model, feeds, _, dead = BUILDERS[kind]()
    result, report = optimize_proto(model)
    assert report.failed_passes == [], report.failed_passes  # no pass tripped over a subgraph output
    assert not dead & node_names(result)
    same_everywhere(model, result, feeds)
    public = rewriter.optimize_model(model)
    same_everywhere(model, public, feeds)
