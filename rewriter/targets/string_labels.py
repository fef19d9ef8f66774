"""String class labels for a release that runs no string op of the node tests (``types_refused``
string) and yet returns a constant string table gathered by an index (``form_verdicts`` Gather
``string_labels``, measured by ``tools/runtime_probe.py``: OpenVINO 2026.4 and 2024.6). A
classifier with string labels lowered from ``ai.onnx.ml`` writes its labels so: a Gather of the
labels by the winning index, passed on by Identities to the graph output. Such strings do not
block; any other string tensor in the model does, as before.

Only chains whose every tensor is read once (by the next Identity, or as the one graph output) are
taken: OpenVINO 2026.4.1 computes a string output that an Identity also reads for another output
and then aborts at exit ("free(): invalid pointer"; 2024.6.0 does not)."""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.measured_verdicts import node_versions

__all__ = ["FORM", "gathered_labels"]

FORM = "string_labels"
_STRING = onnx.TensorProto.STRING


def gathered_labels(model: onnx.ModelProto, table: dict, inferred=None) -> frozenset[str]:
    """The names of ``model``'s string tensors that are such labels (the tables included), when
    ``table`` (``form_verdicts``) says the Gather versions used run the ``string_labels`` form and
    no other string tensor is in the model (``inferred``: its shape inference, for the types);
    else the empty set."""
    right = {int(v) for v, forms in table.get("", {}).get("Gather", {}).items() if forms.get(FORM) == "ok"}
    graph = model.graph
    tables = {t.name for t in graph.initializer if t.data_type == _STRING} - {i.name for i in graph.input}
    if not right or not tables:
        return frozenset()
    readers: dict[str, list] = {}
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            for name in {n for n in node.input if n}:
                readers.setdefault(name, []).append(node)
    outputs = [o.name for o in graph.output]
    taken: set[str] = set()
    gathers = [n for n, scope, domain, version in node_versions(model)
               if scope.body is graph and domain == "" and n.op_type == "Gather" and version in right]
    for node in gathers:
        if node.input[0] in tables:
            taken |= _chain(node, readers, outputs)
    taken |= {t for t in tables if readers.get(t) and all(r.output[0] in taken and r.op_type == "Gather"
                                                          for r in readers[t])}
    return frozenset(taken) if _only_strings(model, taken, inferred) else frozenset()


def _chain(gather: onnx.NodeProto, readers: dict, outputs: list) -> set[str]:
    """The names from ``gather``'s output through Identities to one graph output, each read once;
    empty when the chain forks, ends elsewhere or is read by another op."""
    name, names = gather.output[0], set()
    while True:
        names.add(name)
        uses = readers.get(name, [])
        if name in outputs:
            return names if not uses and outputs.count(name) == 1 else set()
        if len(uses) != 1 or uses[0].op_type != "Identity" or not is_default_domain(uses[0].domain):
            return set()
        name = uses[0].output[0]


def _only_strings(model: onnx.ModelProto, taken: set, inferred) -> bool:
    """Whether every string tensor of the model whose type is known is in ``taken``."""
    return all(name in taken for name, t in value_types(model, inferred).items()
               if t.HasField("tensor_type") and t.tensor_type.elem_type == _STRING)
