"""The probe's cases beyond the node tests and the engine's Reduce / move forms, and what the summary
reads per element type and per named form (tools/runtime_probe.py imports it).

* **generated** (``gen/<Op>-<version>/...``): for every default-domain schema version up to onnx's
  newest opset that no node test and no engine form reaches (Elu-6, LeakyRelu-1, ...), one
  single-node model built from ``onnx.defs`` as tools/ort_kernel_probe.py builds it (float
  tensors of shape [1, 4, 4, 4], shape-like inputs [1]), inputs uniform in [-2, 2] (in [0.5, 2]
  when the reference then gives a NaN: Log, Sqrt ...), expected outputs from ``onnx.reference``.
  Two variants: the schema's default attributes, and every float attribute with a default set
  to another value (twice it; 0.5 for 0), which shows an attribute the runtime ignores (Elu's
  alpha).  A version the builder or the reference cannot do is "not_probed" (the summary's
  ``unmeasured``).
* **named forms** (``extra["named"]``): a form whose verdict the summary keeps apart from its op
  version's (``form_verdicts``), because the engine writes it where a runtime's general
  handling is right but this case is not: ``nan_in_untaken_branch``, Where with a NaN in the
  branch its condition does not choose (LiteRT returns the NaN).

``case_types`` gives each case the element types its node reads and writes, from which the
summary tells a failure that follows an element type (``type_verdicts``: int8 Mul) from one that
does not (``wrong`` for the op version).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnx
import onnx.defs
from onnx import TensorProto, helper

import ort_kernel_probe as okp

# ops whose outputs are random draws or whose generated models say nothing: not generated
_SKIP = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
         "Constant", "If", "Loop", "Scan"}
NAMED_FORMS = {"nan_in_untaken_branch": "NaN in the branch the condition does not choose",
               "double_inside": "a double tensor computed inside the graph (not a graph input)",
               "single_input": "one input (a shape computed at run time, as torch exports write it)",
               "negative_steps": "a constant negative step reversing part of an axis (from its third element), every "
                                 "input but the data constant",
               "string_labels": "a constant string table gathered by a fed int64 index, passed on by Identities to a "
                                "graph output that nothing else reads, as a lowered classifier writes its labels"}


def case_types(model: onnx.ModelProto) -> list[str]:
    """The element types ("float", "int8", ...) of the first node's inputs and outputs."""
    if not model.graph.node:
        return []
    node = model.graph.node[0]
    known = {v.name: v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output,
                                                             *model.graph.value_info] if v.type.HasField("tensor_type")}
    known.update({t.name: t.data_type for t in model.graph.initializer})
    codes = {known[n] for n in [*node.input, *node.output] if n and known.get(n)}
    return sorted(TensorProto.DataType.Name(c).lower() for c in codes)


_COUNTS = frozenset({"K"})  # TopK's k: 0 is valid but no model asks for no element (LiteRT crashes on it)


def _feeds(model: onnx.ModelProto, rng, low: float) -> dict:
    feeds = {}
    for value in model.graph.input:
        tt = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = [d.dim_value for d in tt.shape.dim]
        if dtype.kind == "f":
            feeds[value.name] = rng.uniform(low, 2.0, size=shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif value.name in _COUNTS:  # a count of 1 is in range for every shape the builder makes
            feeds[value.name] = np.ones(shape, dtype)
        else:  # indices: zeros are in range for every shape the builder makes
            feeds[value.name] = np.zeros(shape, dtype)
    return feeds


def _reference(model: onnx.ModelProto, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = ReferenceEvaluator(model).run(None, feeds)
    if not all(isinstance(o, np.ndarray) for o in out):
        raise ValueError("an output is not a tensor")
    return [np.asarray(o) for o in out]


def _onnxruntime(model: onnx.ModelProto, feeds: dict) -> list:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


def _varied(schema, attrs: dict) -> dict:
    """Each float attribute with a default, not set by the builder, at another value."""
    out = {}
    for name, attr in schema.attributes.items():
        if name in attrs or attr.type != onnx.defs.OpSchema.AttrType.FLOAT or not attr.default_value.name:
            continue
        default = attr.default_value.f
        out[name] = 0.5 if default == 0 else default * 2
    return out


def _generated(schema, variant: str, seed: int):
    """(model, feeds, expected) for the schema's generated form, or raise why it cannot be made."""
    model = okp.build(schema, schema.since_version, okp.choose_types(schema), "mixed")
    first = schema.inputs[0] if schema.inputs else None
    if first is not None and first.option == onnx.defs.OpSchema.FormalParameterOption.Variadic and \
            len(model.graph.node[0].input) == 1:  # Max, Min, Sum, Mean: two operands, as models have them
        again = onnx.ValueInfoProto()
        again.CopyFrom(model.graph.input[0])
        again.name += "_1"
        model.graph.input.append(again)
        model.graph.node[0].input.append(again.name)
        for out in model.graph.output:  # (Concat's output is longer now: inference gives it again)
            out.type.tensor_type.ClearField("shape")
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    if variant == "varied":
        node = model.graph.node[0]
        set_already = {a.name for a in node.attribute}
        more = _varied(schema, set_already)
        if not more:
            return None
        node.attribute.extend(helper.make_attribute(k, v) for k, v in more.items())
    error = okp.local_error(model)
    if error:
        raise ValueError(error)
    rng = np.random.default_rng(seed)
    for low in (-2.0, 0.5):  # mixed signs, unless the reference then gives a NaN
        feeds = _feeds(model, rng, low)
        expected = _reference(model, feeds)
        if not any(e.dtype.kind == "f" and np.isnan(e).any() for e in expected):
            break
    return model, feeds, expected


def generated_cases(make_case, reached: set, pattern: re.Pattern | None) -> list:
    """The generated cases (``make_case`` builds the probe's Case from keyword arguments) of every
    default-domain schema version not in ``reached`` ((op, version) pairs)."""
    newest = onnx.defs.onnx_opset_version()
    cases = []
    for schema in sorted(onnx.defs.get_all_schemas_with_history(), key=lambda s: (s.name, s.since_version)):
        op, v = schema.name, schema.since_version
        if schema.domain != "" or v > newest or schema.deprecated or op in _SKIP or (op, v) in reached:
            continue
        for variant in ("defaults", "varied"):
            cid = f"gen/{op}-{v}/float/{variant}"
            if pattern and not pattern.search(cid):
                continue
            try:
                made = _generated(schema, variant, seed=v)
            except Exception as e:  # noqa: BLE001 - the builder or onnx.reference cannot do this version
                made = ("", f"not built: {type(e).__name__}: {' '.join(str(e).split())[:160]}")
            if made is None:
                continue
            if isinstance(made[0], str):
                cases.append(make_case(id=cid, kind="form", model=onnx.ModelProto(), feeds={}, expected=[], op=op, version=v,
                                       opset=v, not_probed=made[1], extra={"form": f"generated ({variant})"}))
                continue
            model, feeds, expected = made
            cases.append(make_case(id=cid, kind="form", model=model, feeds=feeds, expected=expected, op=op, version=v, opset=v,
                                   extra={"form": "generated, " + ("default attributes" if variant == "defaults" else
                                                                   "float attributes not at their default")}))
    return cases


def where_nan_cases(make_case, pattern: re.Pattern | None) -> list:
    """Where (schema versions 9 and 16) whose branches broadcast (a constant [4] against a fed
    [2, 4]) with a NaN in the fed branch where the condition takes the constant: the Imputer's
    form (IsNaN, then Where with the imputed values per feature); once per branch.  LiteRT
    (onnx2tf 2.6.9) returns the NaN there; with branches of one shape it is right."""
    vi = helper.make_tensor_value_info
    fill = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    fed = np.array([[np.nan, 2.0, np.nan, 4.0], [1.0, np.nan, 3.0, 4.0]], np.float32)
    expected = np.where(np.isnan(fed), fill, fed)
    cases = []
    for opset in (9, 16):
        version = onnx.defs.get_schema("Where", opset, "").since_version
        for const in ("x", "y"):
            cid = f"form/Where-{version}/opset{opset}/float/nan_in_untaken_branch/constant_{const}"
            if pattern and not pattern.search(cid):
                continue
            cond = np.isnan(fed) == (const == "x")
            branches = ["fill", "v"] if const == "x" else ["v", "fill"]
            graph = helper.make_graph([helper.make_node("Where", ["c", *branches], ["z"], name="n")], "g",
                                      [vi("c", TensorProto.BOOL, [2, 4]), vi("v", TensorProto.FLOAT, [2, 4])],
                                      [vi("z", TensorProto.FLOAT, [2, 4])], [onnx.numpy_helper.from_array(fill, "fill")])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
            model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), True)
            cases.append(make_case(id=cid, kind="form", model=model, feeds={"c": cond, "v": fed}, expected=[expected],
                                   op="Where", version=version, opset=opset,
                                   extra={"form": NAMED_FORMS["nan_in_untaken_branch"],
                                          "named": "nan_in_untaken_branch"}))
    return cases


def double_inside_cases(make_case, pattern: re.Pattern | None) -> list:
    """CumSum at each version on a double tensor the graph computes (a float input cast to double,
    summed, cast back), as the SVM lowerings sum their votes' products in double: a converter may
    turn a double graph input into float (the node tests' inputs), not a double made inside."""
    vi = helper.make_tensor_value_info
    x = np.array([[0.1, 1.5, -2.25, 0.3, 2.5], [1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)  # (judged as any case: a
    # runtime that sums doubles in float, as OpenVINO does everywhere, is right within the tolerance)
    expected = np.cumsum(x.astype(np.float64), axis=1).astype(np.float32)
    cases = []
    for version in _versions("CumSum"):
        cid = f"form/CumSum-{version}/double/double_inside"
        if pattern and not pattern.search(cid):
            continue
        nodes = [helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE),
                 helper.make_node("CumSum", ["xd", "axis"], ["sd"], name="n"),
                 helper.make_node("Cast", ["sd"], ["y"], to=TensorProto.FLOAT)]
        graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 5])], [vi("y", TensorProto.FLOAT, [2, 5])],
                                  [onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")])
        model, opset = _at_version(graph, version)
        cases.append(make_case(id=cid, kind="form", model=model, feeds={"x": x}, expected=[expected], op="CumSum",
                               version=version, opset=opset,
                               extra={"form": NAMED_FORMS["double_inside"], "named": "double_inside"}))
    return cases


def single_input_cases(make_case, pattern: re.Pattern | None) -> list:
    """Concat at each version with one input, a Shape of the fed input, which then reshapes it
    (torch's exports write such a Concat for a view's shape; LiteRT's onnx2tf 2.6.9 writes a
    custom op for it, while a Concat of two runs)."""
    vi = helper.make_tensor_value_info
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    cases = []
    for version in _versions("Concat"):
        cid = f"form/Concat-{version}/float/single_input"
        if pattern and not pattern.search(cid):
            continue
        nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Concat", ["s"], ["c"], axis=0, name="n"),
                 helper.make_node("Reshape", ["x", "c"], ["y"])]
        graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["a", "b"])], [vi("y", TensorProto.FLOAT, ["a", "b"])])
        model, opset = _at_version(graph, max(version, 5))  # (Reshape takes its shape as an input from 5)
        cases.append(make_case(id=cid, kind="form", model=model, feeds={"x": x}, expected=[x], op="Concat",
                               version=version, opset=opset,
                               extra={"form": NAMED_FORMS["single_input"], "named": "single_input"}))
    return cases


def negative_steps_cases(make_case, pattern: re.Pattern | None) -> list:
    """Slice at each version with steps (10 on) reversing the first three elements of the fed
    data's axis 1 (start 2, end INT64_MIN, step -1), starts / ends / axes / steps all
    initializers, as onnx-asr's kaldi features write it (start 119): LiteRT's onnx2tf 2.6.9 writes
    a custom op for it, constants or not, and runs a reversal of the whole axis (start -1)."""
    vi = helper.make_tensor_value_info
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    consts = {"starts": [2], "ends": [np.iinfo(np.int64).min], "axes": [1], "steps": [-1]}
    cases = []
    for version in [v for v in _versions("Slice") if v >= 10]:
        cid = f"form/Slice-{version}/float/negative_steps"
        if pattern and not pattern.search(cid):
            continue
        node = helper.make_node("Slice", ["x", *consts], ["y"], name="n")
        graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [2, 5])], [vi("y", TensorProto.FLOAT, [2, 3])],
                                  [onnx.numpy_helper.from_array(np.array(v, np.int64), k) for k, v in consts.items()])
        model, opset = _at_version(graph, version)
        cases.append(make_case(id=cid, kind="form", model=model, feeds={"x": x}, expected=[x[:, 2::-1].copy()], op="Slice",
                               version=version, opset=opset,
                               extra={"form": NAMED_FORMS["negative_steps"], "named": "negative_steps"}))
    return cases


def string_labels_cases(make_case, pattern: re.Pattern | None) -> list:
    """Gather at each version of a constant string table (ASCII and the empty string) by a fed
    int64 index, twice, each result passed on by Identities (one, two) to its own graph output and
    read by nothing else: what a classifier with string class labels is, lowered from
    ``ai.onnx.ml``. (OpenVINO 2026.4.1 runs it while it runs no string op of the node tests; a
    string that is a graph output and also read by an Identity writing another output aborts it
    at exit, "free(): invalid pointer", which :mod:`rewriter.targets.string_labels` never takes.)"""
    vi = helper.make_tensor_value_info
    table = np.array(["setosa", "versicolor", "", "virginica"], dtype=object)
    index = np.array([[3, 0], [2, 1], [0, 0]], np.int64)
    cases = []
    for version in _versions("Gather"):
        cid = f"form/Gather-{version}/string/string_labels"
        if pattern and not pattern.search(cid):
            continue
        nodes = [helper.make_node("Gather", ["table", "i"], ["y"], axis=0, name="n"),
                 helper.make_node("Identity", ["y"], ["z"]),
                 helper.make_node("Gather", ["table", "i"], ["y2"], axis=0),
                 helper.make_node("Identity", ["y2"], ["z2"]), helper.make_node("Identity", ["z2"], ["z3"])]
        graph = helper.make_graph(nodes, "g", [vi("i", TensorProto.INT64, [3, 2])],
                                  [vi("z", TensorProto.STRING, [3, 2]), vi("z3", TensorProto.STRING, [3, 2])],
                                  [onnx.numpy_helper.from_array(table, "table")])
        model, opset = _at_version(graph, version)
        cases.append(make_case(id=cid, kind="form", model=model, feeds={"i": index}, expected=[table[index]] * 2,
                               op="Gather", version=version, opset=opset,
                               extra={"form": NAMED_FORMS["string_labels"], "named": "string_labels"}))
    return cases


def _versions(op: str) -> list[int]:
    """The default-domain schema versions of ``op`` this onnx knows."""
    newest = onnx.defs.onnx_opset_version()
    return sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                   if s.name == op and s.domain == "" and s.since_version <= newest})


def _at_version(graph: onnx.GraphProto, version: int) -> tuple[onnx.ModelProto, int]:
    """``graph`` as a model importing the opset that gives ``version`` (9 at the least: below it the
    IR wants initializers as graph inputs; the versions before 9 used here hold to 10 or later)."""
    opset = max(version, 9)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), True)
    return model, opset


def control_flow_cases(make_case, pattern: re.Pattern | None) -> list:
    """Loop, Scan and If at every schema version, on float tensors only (the node tests of the
    later versions carry sequences or optionals, which no runner feeds, so those versions went
    unmeasured): Loop adds 1 to a [2] state three times, Scan sums the rows of a [3, 2] input, If
    picks one of two constants by a fed condition."""
    vi, f32 = helper.make_tensor_value_info, TensorProto.FLOAT
    x = np.array([1.5, -2.0], np.float32)
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    one = onnx.numpy_helper.from_array(np.ones(2, np.float32), "one")
    builders = {
        "Loop": lambda: ([helper.make_node("Loop", ["trips", "", "x"], ["y"], body=helper.make_graph(
            [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["v", "one"], ["v_out"])], "body",
            [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("v", f32, [2])],
            [vi("c_out", TensorProto.BOOL, []), vi("v_out", f32, [2])], [one]))],
            [vi("x", f32, [2])], {"x": x}, [onnx.numpy_helper.from_array(np.array(3, np.int64), "trips")], x + 3),
        "Scan": lambda: ([helper.make_node("Scan", ["s0", "rows"], ["total"], num_scan_inputs=1, body=helper.make_graph(
            [helper.make_node("Add", ["acc", "row"], ["acc_out"])], "body", [vi("acc", f32, [2]), vi("row", f32, [2])],
            [vi("acc_out", f32, [2])]))],
            [vi("rows", f32, [3, 2])], {"rows": rows}, [onnx.numpy_helper.from_array(np.zeros(2, np.float32), "s0")],
            rows.sum(axis=0)),
        "If": lambda: ([helper.make_node("If", ["cond"], ["y"], then_branch=helper.make_graph(
            [helper.make_node("Identity", ["one"], ["t"])], "then", [], [vi("t", f32, [2])], [one]),
            else_branch=helper.make_graph([helper.make_node("Neg", ["one"], ["e"])], "else", [], [vi("e", f32, [2])],
                                          [one]))],
            [vi("cond", TensorProto.BOOL, [])], {"cond": np.array(False)}, [], -np.ones(2, np.float32)),
    }
    cases = []
    for op, build in builders.items():
        for version in _versions(op):
            if op == "Scan" and version < 9:  # Scan-8 has a batch axis and sequence_lens: another form
                continue
            cid = f"form/{op}-{version}/float/tensors_only"
            if pattern and not pattern.search(cid):
                continue
            nodes, inputs, feeds, inits, expected = build()
            out = "total" if op == "Scan" else "y"
            model, opset = _at_version(helper.make_graph(nodes, "g", inputs, [vi(out, f32, [2])], inits), version)
            cases.append(make_case(id=cid, kind="form", model=model, feeds=feeds, expected=[expected], op=op,
                                   version=version, opset=opset, extra={"form": "tensors only (float)"}))
    return cases


def recurrent_cases(make_case, pattern: re.Pattern | None) -> list:
    """RNN, GRU and LSTM at every schema version from 7 in their plainest form (forward, default
    activations, constant weights, recurrence and bias, a [5, 2, 3] float input, hidden size 4),
    without sequence_lens and with sequence_lens [5, 5] fed at run time (the probe's constant-input
    rerun then tells whether only that is refused: tract 0.23 wants it constant); expected outputs
    from ONNX Runtime (onnx.reference ignores sequence_lens). The node tests reach only the newest
    version, and the older ones are what exporters write."""
    vi, f32 = helper.make_tensor_value_info, TensorProto.FLOAT
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 2, 3)).astype(np.float32)
    lens = np.array([5, 5], np.int32)  # every sequence whole: a runtime that refuses it fed refuses the input
    cases = []
    for op, g in gates.items():
        for version in _versions(op):
            w = (rng.normal(size=(1, g * 4, 3)) * 0.5).astype(np.float32)
            r = (rng.normal(size=(1, g * 4, 4)) * 0.5).astype(np.float32)
            b = (rng.normal(size=(1, g * 8)) * 0.1).astype(np.float32)
            inits = [onnx.numpy_helper.from_array(v, n) for n, v in (("W", w), ("R", r), ("B", b))]
            for fed in (False, True):
                cid = f"form/{op}-{version}/float/forward_constant_weights" + ("/fed_sequence_lens" if fed else "")
                if pattern and not pattern.search(cid) or version < 7:  # (before 7: other attributes and outputs)
                    continue
                node = helper.make_node(op, ["x", "W", "R", "B", *(["lens"] if fed else [])], ["Y", "Y_h"], hidden_size=4)
                inputs = [vi("x", f32, [5, 2, 3])] + ([vi("lens", TensorProto.INT32, [2])] if fed else [])
                graph = helper.make_graph([node], "g", inputs, [vi("Y", f32, [5, 1, 2, 4]), vi("Y_h", f32, [1, 2, 4])],
                                          inits)
                model, opset = _at_version(graph, version)
                feeds = {"x": x, **({"lens": lens} if fed else {})}
                cases.append(make_case(id=cid, kind="form", model=model, feeds=feeds, expected=_onnxruntime(model, feeds),
                                       op=op, version=version, opset=opset,
                                       extra={"form": "forward, constant weights" + (", fed sequence_lens" if fed else "")}))
    return cases


# --------------------------------------------------------------------------------------------
# summarizing

_RAN = ("ok", "dtype", "wrong")
_REFUSED = ("refused", "crash", "timeout")


def type_split(rows: list[tuple[str, dict]]) -> dict | None:
    """{element type: verdict text} when every case of an op version that computed wrongly has an
    element type no case that ran right has (the failure follows the type: int8 Mul), else None.
    Also the types of refused cases (inputs constant too) that no case ran in, when some ran."""
    right = {t for _, r in rows if r["verdict"] in ("ok", "dtype") for t in r.get("types", ())}
    ran = right | {t for _, r in rows if r["verdict"] == "wrong" for t in r.get("types", ())}
    wrong = [(cid, r) for cid, r in rows if r["verdict"] == "wrong"]
    if not right or any(not set(r.get("types", ())) - right for _, r in wrong):
        return None if wrong else {}
    out: dict = {}
    for kind, picked, seen in (("wrong", wrong, right),
                               ("refused", [(c, r) for c, r in rows if r["verdict"] in _REFUSED
                                            and r.get("const_inputs") != "ok"], ran)):
        by_type: dict = {}
        for cid, r in picked:
            for t in sorted(set(r.get("types", ())) - seen):
                by_type.setdefault(t, []).append((cid, r))
        for t, hits in sorted(by_type.items()):
            if t in out:
                continue
            every = sum(t in r.get("types", ()) for _, r in rows)
            said = "" if kind == "wrong" else ": " + " ".join(hits[0][1]["detail"].split())[:120]
            out[t] = f"{kind} in {len(hits)} of {every} cases on {t}, e.g. {hits[0][0]}{said}"
    return out


def named_verdicts(raw: dict) -> dict:
    """domain -> op -> version -> {form name: "ok" | "wrong: detail" | "refused: detail"} of the named forms."""
    out: dict = {}
    for cid, r in sorted(raw["cases"].items()):
        if r.get("named") and r["verdict"] != "not_probed":
            text = r["verdict"] if r["verdict"] == "ok" else f"{r['verdict']}: {r['detail'][:160]} ({cid})"
            slot = out.setdefault(r["domain"], {}).setdefault(r["op"], {}).setdefault(str(r["version"]), {})
            if slot.get(r["named"], "ok") == "ok":  # a failure at one opset wins
                slot[r["named"]] = text
    return out


def unmeasured(raw: dict) -> dict:
    """domain "" -> op -> the schema versions (up to onnx's newest opset) no case measured: neither a
    node test nor a form ran or was refused; empty when the raw file has no generated cases."""
    rows = raw["cases"]
    if not any(cid.startswith("gen/") for cid in rows):
        return {}
    measured = {(r["op"], r["version"]) for r in rows.values()
                if r["kind"] in ("node", "form") and r["domain"] == "" and r["verdict"] != "not_probed"}
    out: dict = {}
    for cid, r in sorted(rows.items()):
        if cid.startswith("gen/") and (r["op"], r["version"]) not in measured:
            versions = out.setdefault("", {}).setdefault(r["op"], [])
            if r["version"] not in versions:
                versions.append(r["version"])
    return out
