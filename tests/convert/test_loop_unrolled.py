"""Loop unrolled over its trip count (rewriter/convert/decompositions/loop.py, the trip count from
rewriter/graph/loop_trips.py) for runtimes without Loop (tract 0.23, TVM 0.27, LiteRT 2.6): the
unrolled model in ONNX Runtime against ONNX Runtime's own Loop (hypothesis over for and while
loops, trip counts, bounds, scan outputs), tf2onnx's ``while t < len`` form with the length a dim
of the input, two Loops in a row (the second's length from the first's output), the backend node
tests with their own outputs, the refusals, and the unrolled form run in tract 0.23 (skipped
without its venv)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import rewriter
from rewriter.convert.for_target import convert_for
from rewriter.graph.loop_trips import KnownValues, NotDecided, trip_count, with_trip_shapes
from tests.oracle import backend_cases

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _body(kind: str, scans: int, x: str) -> onnx.GraphProto:
    """i, cond, s [3], t (int64), n (int64) -> cond', s' = s * 0.5 + x[i] (+ i), t + 1, n, scans:
    s' * x[i] and s' - i. ``kind``: "for" (cond passed on), "while" (cond' = float(t + 1) < float(n),
    tf2onnx's form), "input" (cond' = sum(x[i]) < 100: a condition on the input's values)."""
    nodes = [helper.make_node("Gather", [x, "i"], ["xi"], axis=0),
             helper.make_node("Mul", ["s", "half"], ["sh"]),
             helper.make_node("Add", ["sh", "xi"], ["sx"]),
             helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Add", ["sx", "fi"], ["s2"]),
             helper.make_node("Add", ["t", "one"], ["t2"]),
             helper.make_node("Identity", ["n"], ["n2"])]
    if kind == "for":
        nodes.append(helper.make_node("Identity", ["cond"], ["c2"]))
    elif kind == "while":
        nodes += [helper.make_node("Cast", ["t2"], ["ft"], to=F), helper.make_node("Cast", ["n"], ["fn"], to=F),
                  helper.make_node("Less", ["ft", "fn"], ["c2"])]
    else:
        nodes += [helper.make_node("ReduceSum", ["xi"], ["sum"], keepdims=0),
                  helper.make_node("Less", ["sum", "hundred"], ["c2"])]
    outs = [helper.make_tensor_value_info("c2", B, []), helper.make_tensor_value_info("s2", F, [3]),
            helper.make_tensor_value_info("t2", I64, []), helper.make_tensor_value_info("n2", I64, [])]
    if scans > 0:
        nodes.append(helper.make_node("Mul", ["s2", "xi"], ["o0"]))
        outs.append(helper.make_tensor_value_info("o0", F, [3]))
    if scans > 1:
        nodes.append(helper.make_node("Sub", ["s2", "fi"], ["o1"]))
        outs.append(helper.make_tensor_value_info("o1", F, [3]))
    ins = [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond", B, []),
           helper.make_tensor_value_info("s", F, [3]), helper.make_tensor_value_info("t", I64, []),
           helper.make_tensor_value_info("n", I64, [])]
    inits = [onnx.numpy_helper.from_array(np.array(v, dtype=d), name) for name, v, d in
             (("half", 0.5, np.float32), ("one", 1, np.int64), ("hundred", 100.0, np.float32))]
    return helper.make_graph(nodes, "body", ins, outs, inits)


def _loop(kind: str, steps: int, scans: int, bound: int | None, symbolic: bool = False, name: str = "the_loop"):
    """x [steps, 3] -> the Loop's final s, t and its scan outputs; the length n = x.shape[0]."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Cast", ["shape"], ["shape32"], to=TensorProto.INT32),
             helper.make_node("Slice", ["shape32", "zero1", "one1"], ["len1"]),
             helper.make_node("Squeeze", ["len1", "zero1"], ["len32"]),
             helper.make_node("Cast", ["len32"], ["n0"], to=I64),
             helper.make_node("Cast", ["n0"], ["fn0"], to=F),
             helper.make_node("Less", ["fzero", "fn0"], ["c0"])]
    outs = ["s_final", "t_final", "n_final"] + [f"scan{k}" for k in range(scans)]
    nodes.append(helper.make_node("Loop", ["M" if bound is not None else "", "c0", "s0", "t0", "n0"], outs,
                                  name=name, body=_body(kind, scans, "x")))
    inits = [onnx.numpy_helper.from_array(np.array(v, dtype=d), n) for n, v, d in
             (("zero1", [0], np.int64), ("one1", [1], np.int64), ("fzero", 0.0, np.float32),
              ("s0", [0.5, -1.0, 2.0], np.float32), ("t0", 0, np.int64))]
    if bound is not None:
        inits.append(onnx.numpy_helper.from_array(np.array(bound, dtype=np.int64), "M"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["T" if symbolic else steps, 3])],
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    shapes = {"s_final": [3], "t_final": [], "n_final": [], "scan0": ["trips", 3], "scan1": ["trips", 3]}
    for o in model.graph.output:  # (the checker wants a shape on each output)
        o.type.CopyFrom(helper.make_tensor_type_proto(I64 if o.name[0] in "tn" else F, shapes[o.name]))
    x = np.random.default_rng(steps).standard_normal((steps, 3)).astype(np.float32)
    return model, {"x": x}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["for", "while"]), st.integers(1, 5), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 6)))
def test_unrolled_equals_onnxruntime_loop(kind, steps, scans, bound):
    if kind == "for" and bound is None:
        bound = steps
    if scans and (bound == 0 or (kind == "for" and bound > steps)):
        return  # (no iteration with a scan output is refused below; a for loop past x's end reads out of range)
    if kind == "for":
        bound = min(bound, steps)
    model, feeds = _loop(kind, steps, scans, bound)
    want = _run(model, feeds)
    result, report = convert_for(model, runtime="tract==0.23")
    assert "Loop" not in {n.op_type for n in result.graph.node} and report.decomposed["Loop"] == 1
    got = _run(result, feeds)
    trips = min(steps, bound if bound is not None else steps)
    assert int(got[1]) == trips
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape and np.array_equal(w, g)  # the same ops on the same values: bit for bit


def test_the_length_from_the_input_shape_needs_it_static():
    model, feeds = _loop("while", 4, 1, None, symbolic=True)
    with pytest.raises(rewriter.RewriterError, match=r"node 'the_loop' \(Loop\).*the initial condition \('c0'\) is "
                                                     r"not known before the run.*--input-shape NAME:DIMS for 'x' \[T, 3\]"):
        convert_for(model, runtime="tract==0.23")
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    result, report = convert_for(fixed, runtime="tract==0.23")
    assert report.decomposed["Loop"] == 1
    for w, g in zip(_run(model, feeds), _run(result, feeds), strict=True):
        assert np.array_equal(w, g)


def test_a_condition_on_the_input_values_is_refused():
    model, _ = _loop("input", 4, 1, None)
    with pytest.raises(rewriter.RewriterError, match=r"node 'the_loop' \(Loop\).*a value the loop's condition reads "
                                                     r"\('x'\) is not known before the run"):
        convert_for(model, runtime="tract==0.23")


def test_no_iteration_with_a_scan_output_is_refused_and_without_one_gives_the_initial_values():
    model, _ = _loop("for", 3, 1, 0)
    with pytest.raises(rewriter.RewriterError, match=r"runs no iteration, and its scan outputs \(scan0\)"):
        convert_for(model, runtime="tract==0.23")
    model, feeds = _loop("while", 3, 0, 0)
    result, _ = convert_for(model, runtime="tract==0.23")
    got = _run(result, feeds)
    assert np.array_equal(got[0], [0.5, -1.0, 2.0]) and int(got[1]) == 0
    for kind in ("while", "for"):  # no rows: the initial condition 0.0 < 0.0 is false (for: M = 3 too)
        model, feeds = _loop(kind, 0, 0, None if kind == "while" else 3)
        result, report = convert_for(model, runtime="tract==0.23")
        assert report.decomposed["Loop"] == 1
        got, want = _run(result, feeds), _run(model, feeds)
        assert int(want[1]) == int(got[1]) == 0 and np.array_equal(got[0], want[0])


def _two_loops():
    """The second Loop's length is the first one's scan output's length, as in a stacked RNN."""
    model, feeds = _loop("while", 5, 1, None, name="first")
    graph = model.graph
    second, _ = _loop("while", 5, 1, None, name="second")
    rename = {n: f"{n}_b" for node in second.graph.node for n in node.output}
    for node in second.graph.node:
        node.input[:] = [rename.get(i, "scan0" if i == "x" else i) for i in node.input]
        node.output[:] = [rename[o] for o in node.output]
    body = next(a.g for a in second.graph.node[-1].attribute if a.name == "body")
    body.node[0].input[0] = "scan0"
    graph.node.extend(second.graph.node)
    graph.output.append(helper.make_tensor_value_info("scan0_b", F, ["trips2", 3]))
    return model, feeds


def test_a_loop_whose_length_comes_from_the_loop_before():
    model, feeds = _two_loops()
    assert with_trip_shapes(model) is not model
    result, report = convert_for(model, runtime="tract==0.23")
    assert report.decomposed["Loop"] == 2 and "Loop" not in {n.op_type for n in result.graph.node}
    for w, g in zip(_run(model, feeds), _run(result, feeds), strict=True):
        assert np.array_equal(w, g)


def test_known_values_read_the_known_dims_of_a_partly_known_shape():
    x = helper.make_tensor_value_info("x", F, [7, "batch", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["s32"], to=TensorProto.INT32),
             helper.make_node("Slice", ["s32", "a", "b"], ["first"]),
             helper.make_node("Gather", ["s", "two"], ["last"], axis=0),
             helper.make_node("Gather", ["s", "one"], ["batch"], axis=0),
             helper.make_node("Add", ["last", "last"], ["eight"]),
             helper.make_node("Add", ["batch", "last"], ["unknown"]),
             helper.make_node("Gather", ["s", "batch"], ["at_unknown"], axis=0),
             helper.make_node("Shape", ["x"], ["tail"], start=1)]
    producers = {o: n for n in nodes for o in n.output}
    consts = {"a": np.array([0]), "b": np.array([1]), "two": np.array(2), "one": np.array(1)}
    values = KnownValues(consts.get, {"x": [7, None, 4]}.get, producers.get, 16)
    assert values("first").tolist() == [7] and values("first").dtype == np.int32
    assert int(values("eight")) == 8
    assert values("batch") is None and values("unknown") is None and values("s") is None
    assert values("at_unknown") is None  # (an index not known selects nothing, though x's dim 0 is)
    tail = KnownValues(consts.get, {"x": [7, 5, 4]}.get, producers.get, 16)("tail")
    assert tail.tolist() == [5, 4]


def test_a_float_sum_is_not_read_and_a_never_ending_loop_is_refused():
    nodes = [helper.make_node("Add", ["a", "a"], ["f"]), helper.make_node("Less", ["a", "b"], ["c"])]
    producers = {o: n for n in nodes for o in n.output}
    consts = {"a": np.array(0.25, dtype=np.float32), "b": np.array(1.0, dtype=np.float32)}
    values = KnownValues(consts.get, lambda n: None, producers.get, 16)
    assert values("f") is None and bool(values("c")) is True
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["c2"])], "b",
                             [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond", B, [])],
                             [helper.make_tensor_value_info("c2", B, [])])
    loop = helper.make_node("Loop", ["", "c"], [], body=body)
    with pytest.raises(NotDecided, match="does not end within 4096 iterations"):
        trip_count(loop, values)
    passed_on = helper.make_graph([], "b", list(body.input), [helper.make_tensor_value_info("cond", B, [])])
    with pytest.raises(NotDecided, match="never ends"):
        trip_count(helper.make_node("Loop", ["", "c"], [], body=passed_on), values)
    assert trip_count(helper.make_node("Loop", ["seven", "c"], [], body=passed_on),
                      KnownValues({**consts, "seven": np.array(7)}.get, lambda n: None, producers.get, 16)) == 7


CASES = backend_cases("Loop")
# what each case is refused for, as it is; the sequence cases with their trip count constant too
REFUSED = {"test_loop11": r"the trip count M \('trip_count'\) is not known before the run",
           "test_loop13_seq": "a Loop carrying sequence values is not unrolled",
           "test_loop16_seq_none": "a Loop body with subgraphs of its own is not unrolled"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    """Each case as it is is refused (its trip count and condition are inputs); with those two
    inputs constants of the case's values, test_loop11 is unrolled and gives the case's own outputs."""
    inputs, expected = case.data_sets[0]
    with pytest.raises(rewriter.RewriterError, match=REFUSED[case.name]):
        convert_for(case.model, runtime="tract==0.23")
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    decided = {"trip_count": inputs[0], "cond": inputs[1]}
    kept = [vi for vi in model.graph.input if vi.name not in decided]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in decided.items())
    if "seq" in case.name:
        with pytest.raises(rewriter.RewriterError, match=REFUSED[case.name]):
            convert_for(model, runtime="tract==0.23")
        return
    result, report = convert_for(model, runtime="tract==0.23")
    assert report.decomposed["Loop"] == 1 and "Loop" not in {n.op_type for n in result.graph.node}
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs) if vi.name not in decided}
    got = _run(result, feeds)
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)


def test_kept_for_onnxruntime_and_openvino():
    model, _ = _loop("while", 3, 1, None)
    for runtime in ("onnxruntime==1.20", "openvino==2026.4"):
        result, report = convert_for(model, runtime=runtime)
        assert "Loop" in {n.op_type for n in result.graph.node} and not report.decomposed.get("Loop")


def test_the_unrolled_form_runs_in_tract():
    from tests.targets.runtime_runs import run_in

    model, feeds = _two_loops()
    result, _ = convert_for(model, runtime="tract==0.23")
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got
    for w, g in zip(_run(model, feeds), got["values"], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_an_inference_that_fails_leaves_the_model(monkeypatch):
    import rewriter.graph.inferred as inferred

    def fails(model):
        raise onnx.shape_inference.InferenceError("no")

    model, _ = _two_loops()
    monkeypatch.setattr(inferred, "infer_with_static_shapes", fails)
    assert with_trip_shapes(model) is model
