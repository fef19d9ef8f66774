"""verify_numerics and --verify: same random inputs, every output compared."""

from __future__ import annotations

import glob
import os

import ml_dtypes
import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from onnx import numpy_helper

from rewriter import cli
from rewriter.errors import RewriterError
from rewriter.verify.numerics import random_inputs, verify_numerics

MODELS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models")


SIZES = {"x": [2, 3, 4]}  # _reduce's N given a size: with every dynamic dim defaulted a check is no pass


def _reduce(op: str, ty: str = "float", opset: int = 13, axes: str = "[1]", extra: str = "") -> onnx.ModelProto:
    return onnx.parser.parse_model(f'''<ir_version: 8, opset_import: ["" : {opset}]>
        g ({ty}[N,3,4] x) => ({ty}[N,1,4] y) {{ y = {op} <axes={axes}, keepdims=1{extra}> (x) }}''')


# ---------------------------------------------------------------- inputs

def test_random_inputs_follow_types_and_bind_symbols_consistently():
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[N,3] a, bfloat16[N] b, uint64[2,M] c, int32[M] d, bool[N] e, float16[?] f, float[2] w)
          => (float[N,3] y) { y = Identity (a) }''')
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(2, np.float32), "w"))
    feeds = random_inputs(model, seed=3)
    assert set(feeds) == {"a", "b", "c", "d", "e", "f"}  # 'w' has an initializer
    assert feeds["a"].dtype == np.float32 and feeds["b"].dtype == ml_dtypes.bfloat16
    assert feeds["c"].dtype == np.uint64 and feeds["d"].dtype == np.int32 and feeds["e"].dtype == bool
    assert feeds["f"].dtype == np.float16
    n = feeds["a"].shape[0]
    assert feeds["a"].shape == (n, 3) and feeds["b"].shape == (n,) and feeds["e"].shape == (n,)
    assert feeds["c"].shape[1] == feeds["d"].shape[0]
    magnitudes = np.abs(feeds["a"])
    assert (magnitudes >= 0.5).all() and (magnitudes < 1.5).all()
    again = random_inputs(model, seed=3)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)
    assert not np.array_equal(random_inputs(model, seed=4)["a"], feeds["a"])


# ---------------------------------------------------------------- comparisons

def test_identical_models_agree():
    report = verify_numerics(_reduce("ReduceProd"), _reduce("ReduceProd"), seed=1, input_shapes=SIZES)
    assert report.ok and report.backend_original == report.backend_rewritten == "onnxruntime"
    (out,) = report.outputs
    assert (out.name, out.dtype, out.max_abs_diff, out.ok) == ("y", "float", 0.0, True)


def test_a_wrong_rewrite_is_caught_with_its_max_abs_diff():
    original, wrong = _reduce("ReduceProd"), _reduce("ReduceSum")
    report = verify_numerics(original, wrong, seed=7)
    assert not report.ok
    x = random_inputs(original, seed=7)["x"].astype(np.float64)
    expected_diff = np.max(np.abs(np.prod(x, axis=1) - np.sum(x, axis=1)))
    assert report.outputs[0].max_abs_diff == pytest.approx(expected_diff, rel=1e-5)


def _scaled(factor: float, ty: str = "float", opset: int = 13) -> onnx.ModelProto:
    model = onnx.parser.parse_model(f'''<ir_version: 8, opset_import: ["" : {opset}]>
        g ({ty}[4,5] x) => ({ty}[4,5] y) {{ y = Mul (x, k) }}''')
    np_type = {"float": np.float32, "float16": np.float16, "double": np.float64}[ty]
    model.graph.initializer.append(numpy_helper.from_array(np.array(factor, dtype=np_type), "k"))
    return model


@pytest.mark.parametrize("ty,small,large", [("float", 1 + 2e-6, 1 + 1e-3), ("float16", 1 + 2 ** -10, 1.0625),
                                            ("double", 1 + 1e-12, 1 + 1e-8)])
def test_float_tolerance_suits_the_type(ty, small, large):
    assert verify_numerics(_scaled(1.0, ty), _scaled(small, ty)).ok
    report = verify_numerics(_scaled(1.0, ty), _scaled(large, ty))
    assert not report.ok and report.outputs[0].reason == "beyond tolerance"


def test_integers_compare_exactly():
    a = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (int64[3] x) => (int64[3] y) { y = Identity (x) }''')
    b = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (int64[3] x) => (int64[3] y) { one = Constant <value_int = 1> ()
          y = Add (x, one) }''')
    report = verify_numerics(a, b)
    assert not report.ok and report.outputs[0].max_abs_diff == 1 and report.outputs[0].tolerance == "exact"


def test_nan_in_the_same_places_is_agreement():
    text = '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[64] x) => (float[64] y) { y = Sqrt (x) }'''  # negative inputs give NaN
    report = verify_numerics(onnx.parser.parse_model(text), onnx.parser.parse_model(text))
    assert report.ok


def test_shape_difference_is_a_mismatch():
    report = verify_numerics(_reduce("ReduceProd"), _reduce("ReduceProd", axes="[2]"))
    assert not report.ok and "shape" in report.outputs[0].reason


# ---------------------------------------------------------------- backends

@pytest.mark.parametrize("ty,opset,backend", [
    ("float", 13, "onnxruntime"), ("float", 5, "reference"), ("bfloat16", 13, "reference"),
    ("uint64", 13, "reference"), ("uint32", 18, "reference"), ("int32", 11, "onnxruntime"),
])
def test_backend_is_ort_where_it_can_run_else_reference(ty, opset, backend):
    if opset >= 18:
        text = f'''<ir_version: 8, opset_import: ["" : {opset}]>
            g ({ty}[N,3,4] x) => ({ty}[N,1,4] y) {{ a = Constant <value_ints = [1]> ()
              y = ReduceProd <keepdims=1> (x, a) }}'''
        model = onnx.parser.parse_model(text)
    else:
        model = _reduce("ReduceProd", ty, opset)
    report = verify_numerics(model, model, input_shapes=SIZES)
    assert report.ok and report.backend_original == report.backend_rewritten == backend


def test_original_that_cannot_run_is_an_error():
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13, "nowhere" : 1]>
        g (float[2] x) => (float[2] y) { y = nowhere.Op (x) }''')
    with pytest.raises(RewriterError, match="original model does not run"):
        verify_numerics(model, model)


def test_rewritten_that_cannot_run_is_a_failure():
    broken = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13, "nowhere" : 1]>
        g (float[N,3,4] x) => (float[N,1,4] y) { y = nowhere.Op (x) }''')
    report = verify_numerics(_reduce("ReduceProd"), broken)
    assert not report.ok and report.error


def test_accepts_onnx_ir_models():
    a = ir.serde.deserialize_model(_reduce("ReduceProd"))
    assert verify_numerics(a, ir.serde.deserialize_model(_reduce("ReduceProd")), input_shapes=SIZES).ok
    assert not verify_numerics(a, ir.serde.deserialize_model(_reduce("ReduceSum"))).ok


# ---------------------------------------------------------------- real rewrites

def _sample_models():
    return sorted(glob.glob(os.path.join(MODELS, "*.onnx")))


def test_conversions_of_sample_models_verify():
    from rewriter.convert import convert_model

    paths = _sample_models()
    if not paths:
        pytest.skip("models/ holds no sample model yet")
    checked = 0
    for path in paths:
        model = onnx.load(path)
        for target in (11, 13, 18):
            try:
                result, _ = convert_model(model, target)
            except RewriterError:
                continue  # an impossible conversion is convert's business, not this test's
            report = verify_numerics(model, result, seed=checked)
            assert report.ok, (path, target, report.summary_lines())
            checked += 1
    assert checked


def test_fold_verifies():
    from rewriter.fold import fold_model

    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3] x) => (float[2,3] y) { p = ReduceProd <axes=[0], keepdims=1> (c)
          y = Mul (x, p) }''')
    model.graph.initializer.append(numpy_helper.from_array(np.linspace(0.5, 2, 6, dtype=np.float32).reshape(2, 3), "c"))
    folded, _ = fold_model(model)
    assert all(n.op_type != "ReduceProd" for n in folded.graph.node)
    assert verify_numerics(model, folded).ok


# ---------------------------------------------------------------- CLI --verify

def test_cli_verify_prints_max_abs_diff(tmp_path, capsys):
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_reduce("ReduceProd"), path)
    assert cli.main(["convert", path, "--opset", "18", "-o", out, "--verify", "--seed", "5"]) == 0
    stdout = capsys.readouterr().out
    assert "seed 5" in stdout and "y (float): max abs diff 0" in stdout
    assert os.path.exists(out)


def test_cli_verify_fails_on_a_numerically_wrong_rewrite(tmp_path, monkeypatch, capsys):
    from rewriter import convert

    def wrong(model, spec, *args, **kwargs):
        result = _reduce("ReduceMax", opset=spec.opset)  # same shapes, other values (a valid model)
        return result, _Report(spec.opset)

    monkeypatch.setattr(convert, "convert_for", wrong)
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_reduce("ReduceProd"), path)
    assert cli.main(["convert", path, "--opset", "13", "-o", out, "--verify"]) == 1
    assert not os.path.exists(out)
    assert "numerical verification failed" in capsys.readouterr().err
    # without --verify the shapes agree, so only the numbers could have told
    assert cli.main(["convert", path, "--opset", "13", "-o", out]) == 0


class _Report:
    def __init__(self, target):
        self.source_opset, self.target_opset = 13, target
        self.source_ml_opset = self.target_ml_opset = None
        self.decomposed = {}
        self.warnings = []

    def summary_lines(self):
        return []


def test_cli_fold_verify(tmp_path, capsys):
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3] x) => (float[2,3] y) { p = ReduceProd <axes=[0], keepdims=1> (c)
          y = Mul (x, p) }''')
    model.graph.initializer.append(numpy_helper.from_array(np.linspace(0.5, 2, 6, dtype=np.float32).reshape(2, 3), "c"))
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model, path)
    assert cli.main(["fold", path, "-o", out, "--verify"]) == 0
    assert "y (float): max abs diff" in capsys.readouterr().out


# ---------------------------------------------------------------- issue 10: external data, rank 0, options

def _external_pair(tmp_path, n: int = 256):
    """A model whose weight is external data, and a copy scaled by 1+1e-3 (a real difference)."""
    def model(scale):
        w = numpy_helper.from_array(np.linspace(0.5, 1.5, n, dtype=np.float32) * np.float32(scale), "w")
        m = onnx.parser.parse_model(f'''<ir_version: 8, opset_import: ["" : 13]>
            g (float[{n}] x) => (float[{n}] y) {{ y = Mul (x, w) }}''')
        m.graph.initializer.append(w)
        return m
    paths = []
    for name, scale in (("a.onnx", 1.0), ("b.onnx", 1.001)):
        path = str(tmp_path / name)
        onnx.save(model(scale), path, save_as_external_data=True, location=name + ".bin", size_threshold=0)
        paths.append(path)
    return paths


def test_external_data_models_run_on_onnx_runtime_from_any_directory(tmp_path, monkeypatch):
    from rewriter.io import load_model

    a, b = _external_pair(tmp_path)
    monkeypatch.chdir("/")
    report = verify_numerics(load_model(a), load_model(a))
    assert report.ok and report.backend_original == report.backend_rewritten == "onnxruntime"
    report = verify_numerics(load_model(a), load_model(b))  # the oracle: 1e-3 relative is beyond 1e-4
    assert not report.ok and report.backend_rewritten == "onnxruntime"
    assert report.outputs[0].reason == "beyond tolerance"
    assert verify_numerics(load_model(a), load_model(b), rtol=1e-2).ok  # --rtol widens it


def test_rank0_inputs_are_arrays_and_onnx_runtime_runs_if_models():
    model = onnx.load(os.path.join(MODELS, "reduce_prod_in_if_opset13.onnx"))
    feeds = random_inputs(model, seed=0)
    assert isinstance(feeds["cond"], np.ndarray) and feeds["cond"].shape == () and feeds["cond"].dtype == bool
    report = verify_numerics(model, model)
    assert report.ok and report.backend_original == "onnxruntime"


def test_input_shapes_pin_symbols_everywhere():
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[B,N] a, float[B,M] b) => (float[B,N] y) { y = Identity (a) }''')
    feeds = random_inputs(model, seed=0, input_shapes={"a": [5, 7]})
    assert feeds["a"].shape == (5, 7) and feeds["b"].shape == (5, 2)  # B pinned by a; M unpinned -> 2
    with pytest.raises(RewriterError, match="rank 2"):
        random_inputs(model, input_shapes={"a": [5]})
    with pytest.raises(RewriterError, match="no graph input 'q'"):
        random_inputs(model, input_shapes={"q": [1]})


@pytest.mark.parametrize("seed", range(12))
def test_axes_from_a_graph_input_are_refused_whatever_the_seed(seed):
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 18]>
        g (float[2,3,4] x, int64[1] axes) => (float[?,?,?] y) { y = ReduceProd <keepdims=1> (x, axes) }''')
    with pytest.raises(RewriterError, match="'axes' gives unnamed ReduceProd|'axes' gives .*ReduceProd"):
        verify_numerics(model, model, seed=seed)


def test_onnx_runtime_logs_nothing_on_the_terminal(capfd):
    """A run ORT fails (random indices out of range) becomes the message, not ORT's red log line."""
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2] x, int64[6] i) => (float[6] y) { y = Gather (x, i) }''')
    with pytest.raises(RewriterError, match="out of data bounds"):
        verify_numerics(model, model, seed=0)
    captured = capfd.readouterr()
    assert "onnxruntime" not in captured.err and "sequential_executor" not in captured.err, captured.err


def _qdq_conv():
    """A per-channel QDQ Conv as onnxruntime.quantization writes it (opset 13): ONNX Runtime's
    graph optimizations fuse it into an integer QLinearConv, whose requantization rounds
    differently from the float arithmetic ONNX defines."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    w_scale = (rng.random(8) * 0.01 + 0.001).astype(np.float32)
    inits = [nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(128, np.uint8), "xz"),
             nh.from_array(rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8), "w"),
             nh.from_array(w_scale, "ws"), nh.from_array(np.zeros(8, np.int8), "wz"),
             nh.from_array(rng.integers(-1000, 1000, 8).astype(np.int32), "b"),
             nh.from_array(w_scale * np.float32(0.02), "bs"), nh.from_array(np.zeros(8, np.int32), "bz"),
             nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(128, np.uint8), "yz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
             h.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 8, 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def test_a_quantized_model_is_compared_as_onnx_defines_it():
    """Converted to 11, the per-axis DequantizeLinear is Cast/Sub/Mul, which ORT does not fuse:
    with ORT's fusions on, the original alone would differ by whole quantization steps (1.65)."""
    import rewriter

    model = _qdq_conv()
    report = rewriter.verify_numerics(model, rewriter.convert_opset(model, 11))
    assert report.ok and report.backend_original == "onnxruntime", report
    assert max(o.max_abs_diff for o in report.outputs) == 0.0
