"""One-node quantized forms in a runtime's release against ONNX Runtime (what the ``quantized_forms``
entries of rewriter/targets/data/<runtime>.json record; tools/runtime_data/README.md, "Quantized
models"): QuantizeLinear as the op and as Div + Clip + Round + Add + Cast (ties at .5, saturation),
QuantizeLinear as the op and as the threshold table of rewriter/convert/lowering/quant_table.py
(QT_*: every threshold, 1 and 2 ulps below it, 1 above, the ties, random values, NaN, +-inf, +-0,
subnormals; uint8 / int8, 4 scales per tensor, 16 per axis), DynamicQuantizeLinear as the op and with
exact residuals (rewriter/convert/lowering/quant_dynamic.py; DQLX_*: 64 tensors of 32768), QLinearConv / QLinearMatMul as the op
and as ConvInteger / MatMulInteger + the requantization (per tensor, per channel, ties with a
combined scale of 0.5), Round at ties, and a blocked uint4 DequantizeLinear-21 + MatMul. Each line:
the form, then per release how many outputs differ. The table inside whole models:
tools/runtime_probe_quant_models.py.

    python tools/runtime_probe_quant.py openvino-2026.4,openvino-2024.6,tract-0.23,litert-2.6,tvm-0.27 [NAME-SUBSTRING ...]

(the names are venvs of tools/runtime_venvs.py under ~/.cache/rewriter/runtime-venvs). The forms
inside whole models were measured with bench/bench_runtime_targets.py --only and by cutting the
converted models at intermediate outputs (docs: tools/runtime_data/README.md).
"""
import sys, os, subprocess, tempfile, json
from pathlib import Path
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, numpy_helper as nh, TensorProto as T
rng = np.random.default_rng(0)
D = tempfile.mkdtemp(prefix="quant-forms")
def C(name, arr): return nh.from_array(np.asarray(arr), name)
def model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)]); m.ir_version = 8
    return m
def requant(prefix, v, zp, elem, out):
    info = np.iinfo(np.uint8 if elem == T.UINT8 else np.int8)
    return [h.make_node("Clip", [v, prefix+"lo", prefix+"hi"], [prefix+"c"]),
            h.make_node("Round", [prefix+"c"], [prefix+"r"]),
            h.make_node("Add", [prefix+"r", prefix+"zpf"], [prefix+"a"]),
            h.make_node("Cast", [prefix+"a"], [out], to=elem)], \
           [C(prefix+"lo", np.float32(info.min - zp)), C(prefix+"hi", np.float32(info.max - zp)), C(prefix+"zpf", np.float32(zp))]
cases = {}
# ---- QuantizeLinear
s, zp = np.float32(0.0173), np.uint8(121)
k = rng.integers(-200, 200, 4000)
x = np.concatenate([((k + 0.5) * s).astype(np.float32), rng.normal(0, 2, 4000).astype(np.float32),
                    np.float32([1e9, -1e9, 3.0, -3.0, 127 * s, 128 * s, -121 * s, -122 * s])]).astype(np.float32)
feeds = {"x": x.reshape(1, -1)}
xi = h.make_tensor_value_info("x", T.FLOAT, [1, x.size])
for elem, zpv in ((T.UINT8, np.uint8(121)), (T.INT8, np.int8(-7))):
    tn = "u8" if elem == T.UINT8 else "i8"
    yo = h.make_tensor_value_info("y", elem, [1, x.size])
    cases[f"QL_op_{tn}"] = (model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [xi], [yo], [C("s", s), C("z", zpv)]), feeds)
    nodes, inits = requant("q", "d", int(zpv), elem, "y")
    cases[f"QL_div_{tn}"] = (model([h.make_node("Div", ["x", "s"], ["d"])] + nodes, [xi], [yo], [C("s", s)] + inits), feeds)
# ---- QLinearConv, per tensor and per channel, uint8 x / int8 w
cin, cout = 64, 16
X = rng.integers(0, 256, (1, cin, 12, 12)).astype(np.uint8)
W = rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8)
B = rng.integers(-20000, 20000, cout).astype(np.int32)
sx, zx, sy, zy = np.float32(0.02), np.uint8(118), np.float32(0.9), np.uint8(130)
for pc in (False, True):
    sw = (rng.uniform(0.001, 0.004, cout).astype(np.float32) if pc else np.float32(0.0021))
    scales = (sx * sw / sy).astype(np.float32) if pc else np.float32(sx * sw / sy)
    xin = h.make_tensor_value_info("x", T.UINT8, list(X.shape))
    yo = onnx.ValueInfoProto(name="y", type=h.make_tensor_type_proto(T.UINT8, None))
    tag = "pc" if pc else "pt"
    cases[f"QC_op_{tag}"] = (model([h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], pads=[1,1,1,1])],
        [xin], [yo], [C("sx", sx), C("zx", zx), C("w", W), C("sw", sw), C("zw", np.zeros(cout, np.int8) if pc else np.int8(0)), C("sy", sy), C("zy", zy), C("b", B)]), {"x": X})
    sc = scales.reshape(1, -1, 1, 1) if pc else scales
    nodes, inits = requant("q", "m", int(zy), T.UINT8, "y")
    cases[f"QC_int_{tag}"] = (model([h.make_node("ConvInteger", ["x", "w", "zx"], ["acc"], pads=[1,1,1,1]),
        h.make_node("Add", ["acc", "b4"], ["accb"]), h.make_node("Cast", ["accb"], ["f"], to=T.FLOAT),
        h.make_node("Mul", ["f", "sc"], ["m"])] + nodes, [xin], [yo], [C("w", W), C("zx", zx), C("b4", B.reshape(1, -1, 1, 1)), C("sc", sc)] + inits), {"x": X})
    cases[f"QC_flt_{tag}"] = (model([h.make_node("Cast", ["x"], ["xi"], to=T.INT32), h.make_node("Sub", ["xi", "zxi"], ["xs"]),
        h.make_node("Cast", ["xs"], ["xf"], to=T.FLOAT), h.make_node("Conv", ["xf", "wf", "bf"], ["acc"], pads=[1,1,1,1]),
        h.make_node("Mul", ["acc", "sc"], ["m"])] + nodes, [xin], [yo],
        [C("zxi", np.int32(zx)), C("wf", W.astype(np.float32)), C("bf", B.astype(np.float32)), C("sc", sc)] + inits), {"x": X})
# ---- QLinearMatMul u8 x u8? use u8 a, i8 b
A = rng.integers(0, 256, (8, 96)).astype(np.uint8); Bm = rng.integers(-127, 128, (96, 24)).astype(np.int8)
sa, za, sb, zb, sy2, zy2 = np.float32(0.03), np.uint8(120), np.float32(0.005), np.int8(0), np.float32(0.7), np.uint8(128)
ain = h.make_tensor_value_info("a", T.UINT8, list(A.shape)); yo = onnx.ValueInfoProto(name="y", type=h.make_tensor_type_proto(T.UINT8, None))
cases["QMM_op"] = (model([h.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])], [ain], [yo],
    [C("sa", sa), C("za", za), C("b", Bm), C("sb", sb), C("zb", zb), C("sy", sy2), C("zy", zy2)]), {"a": A})
nodes, inits = requant("q", "m", int(zy2), T.UINT8, "y")
cases["QMM_int"] = (model([h.make_node("MatMulInteger", ["a", "b", "za"], ["acc"]), h.make_node("Cast", ["acc"], ["f"], to=T.FLOAT),
    h.make_node("Mul", ["f", "sc"], ["m"])] + nodes, [ain], [yo], [C("b", Bm), C("za", za), C("sc", np.float32(sa * sb / sy2))] + inits), {"a": A})
# ---- Round ties
r = np.float32(np.arange(-8, 8) + 0.5)
cases["Round"] = (model([h.make_node("Round", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [16])], [h.make_tensor_value_info("y", T.FLOAT, [16])], []), {"x": r})


# ---- ties: combined scale 0.5 (acc odd -> a tie)
Xt = rng.integers(0, 256, (1, 4, 30, 30)).astype(np.uint8); Wt = rng.integers(-3, 4, (8, 4, 3, 3)).astype(np.int8)
xin = h.make_tensor_value_info("x", T.UINT8, list(Xt.shape))
yo8 = onnx.ValueInfoProto(name="y", type=h.make_tensor_type_proto(T.UINT8, None))
cases["QC_op_tie"] = (model([h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])], [xin], [yo8],
    [C("sx", np.float32(0.5)), C("zx", np.uint8(128)), C("w", Wt), C("sw", np.float32(1/64)), C("zw", np.int8(0)), C("sy", np.float32(1/64)), C("zy", np.uint8(128))]), {"x": Xt})
nodes, inits = requant("q", "m", 128, T.UINT8, "y")
cases["QC_int_tie"] = (model([h.make_node("ConvInteger", ["x", "w", "zx"], ["acc"]), h.make_node("Cast", ["acc"], ["f"], to=T.FLOAT),
    h.make_node("Mul", ["f", "sc"], ["m"])] + nodes, [xin], [yo8], [C("w", Wt), C("zx", np.uint8(128)), C("sc", np.float32(0.5))] + inits), {"x": Xt})
At = rng.integers(0, 256, (64, 16)).astype(np.uint8); Bt = rng.integers(-3, 4, (16, 32)).astype(np.int8)
ain = h.make_tensor_value_info("a", T.UINT8, list(At.shape))
cases["QMM_op_tie"] = (model([h.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])], [ain], [yo8],
    [C("sa", np.float32(0.5)), C("za", np.uint8(128)), C("b", Bt), C("sb", np.float32(1/64)), C("zb", np.int8(0)), C("sy", np.float32(1/64)), C("zy", np.uint8(128))]), {"a": At})
cases["QMM_int_tie"] = (model([h.make_node("MatMulInteger", ["a", "b", "za"], ["acc"]), h.make_node("Cast", ["acc"], ["f"], to=T.FLOAT),
    h.make_node("Mul", ["f", "sc"], ["m"])] + nodes, [ain], [yo8], [C("b", Bt), C("za", np.uint8(128)), C("sc", np.float32(0.5))] + inits), {"a": At})
# ---- blocked DequantizeLinear-21 (uint4, block 32, constant scale) + MatMul
import ml_dtypes
K, N = 64, 8
codes = rng.integers(0, 16, (K, N)).astype(ml_dtypes.uint4); sc4 = rng.uniform(0.01, 0.1, (K // 32, N)).astype(np.float32); z4 = rng.integers(0, 16, (K // 32, N)).astype(ml_dtypes.uint4)
xa = rng.normal(0, 1, (2, K)).astype(np.float32)
m21 = model([h.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=32), h.make_node("MatMul", ["x", "wf"], ["y"])],
    [h.make_tensor_value_info("x", T.FLOAT, [2, K])], [h.make_tensor_value_info("y", T.FLOAT, [2, N])], [C("w", codes), C("s", sc4), C("z", z4)], opset=21)
m21.ir_version = 10
cases["DQ_blocked_u4"] = (m21, {"x": xa})

# ---- QuantizeLinear as the threshold table (rewriter/convert/lowering/quant_table.py): per channel,
# every threshold, 1 and 2 ulps below it, 1 above, the ties (k + 0.5) * s, random values over the
# whole code range and beyond, NaN, +-inf, +-0, subnormals; per tensor (4 scales) and per axis (16)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from rewriter.convert.lowering.quant_table import thresholds
def table_points(s, zp, elem, n):
    t = thresholds(np.float32([s]), np.int64([zp]), elem)[0, 1:-1]
    t = t[np.isfinite(t)]
    dn = np.nextafter(t, np.float32(-np.inf))
    k = np.arange(-300, 300)
    pts = [t, dn, np.nextafter(dn, np.float32(-np.inf)), np.nextafter(t, np.float32(np.inf)), ((k + 0.5) * s).astype(np.float32),
           (rng.uniform(-300, 300, 3000) * s).astype(np.float32), rng.normal(0, 40 * s, 1000).astype(np.float32),
           np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-39, 3e38, -3e38])]
    x = np.concatenate(pts).astype(np.float32)
    return np.concatenate([x, rng.choice(x, n - x.size)]).astype(np.float32)
def table_scales(n):
    return np.concatenate([np.float32([1 / 255, 0.5]), np.exp(rng.uniform(np.log(1e-5), np.log(10), n))]).astype(np.float32)[:n]
for elem in (T.UINT8, T.INT8):
    info = np.iinfo(np.uint8 if elem == T.UINT8 else np.int8)
    tn = "u8" if elem == T.UINT8 else "i8"
    for axis_case, nch in (("a", 1), ("b", 1), ("c", 1), ("d", 1), ("pa", 16)):
        sc = table_scales(nch) if nch > 1 else table_scales(4)["abcd".index(axis_case)].reshape(1)
        zps = rng.integers(info.min, info.max + 1, nch).astype(np.uint8 if elem == T.UINT8 else np.int8)
        n = 6000
        xq = np.stack([table_points(sc[i], int(zps[i]), elem, n) for i in range(nch)])[None]
        xi = h.make_tensor_value_info("x", T.FLOAT, list(xq.shape)); yo = h.make_tensor_value_info("y", elem, list(xq.shape))
        init = [C("s", sc if nch > 1 else sc[0]), C("z", zps if nch > 1 else zps[0])]
        mq = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)], [xi], [yo], init)
        cases[f"QT_op_{tn}{axis_case}"] = (mq, {"x": xq})
        mt = onnx.ModelProto(); mt.CopyFrom(mq)
        assert rewrite_quantized(mt, {"QuantizeLinear": "threshold_table"}, "probe")[0] == 1
        cases[f"QT_table_{tn}{axis_case}"] = (mt, {"x": xq})
        for form in ("divide", "divide_by_fed"):  # the same points through the Div forms (LiteRT)
            md = onnx.ModelProto(); md.CopyFrom(mq)
            assert rewrite_quantized(md, {"QuantizeLinear": form}, "probe")[0] == 1
            cases[f"QT_{form.replace('divide', 'div').replace('_by_', '')}_{tn}{axis_case}"] = (md, {"x": xq})

# ---- QLinearConv / ConvInteger as a Conv in double (form "double", rewriter/convert/lowering/quant_double.py:
# TVM has neither op): K = 2304 (a float32 sum is not exact there), depthwise, per channel, ties
def double_of(m, op):
    md = onnx.ModelProto(); md.CopyFrom(m)
    assert rewrite_quantized(md, {op: "double"}, "probe")[0] == 1
    return md
Xb = rng.integers(0, 256, (1, 256, 9, 9)).astype(np.uint8); Wb = rng.integers(-128, 128, (32, 256, 3, 3)).astype(np.int8)
xin = h.make_tensor_value_info("x", T.UINT8, list(Xb.shape))
cases["QC_op_big"] = (model([h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], pads=[1,1,1,1])], [xin], [yo8],
    [C("sx", np.float32(0.013)), C("zx", np.uint8(3)), C("w", Wb), C("sw", rng.uniform(0.001, 0.01, 32).astype(np.float32)),
     C("zw", np.zeros(32, np.int8)), C("sy", np.float32(7.5)), C("zy", np.uint8(128)), C("b", rng.integers(-99999, 99999, 32).astype(np.int32))]), {"x": Xb})
Xd = rng.integers(0, 256, (1, 24, 17, 17)).astype(np.uint8); Wd = rng.integers(0, 256, (24, 1, 5, 5)).astype(np.uint8)
xin = h.make_tensor_value_info("x", T.UINT8, list(Xd.shape))
cases["QC_op_dw"] = (model([h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], group=24, strides=[2, 2], pads=[2,2,2,2])], [xin], [yo8],
    [C("sx", np.float32(0.02)), C("zx", np.uint8(131)), C("w", Wd), C("sw", np.float32(0.004)), C("zw", np.uint8(119)), C("sy", np.float32(0.3)), C("zy", np.uint8(100))]), {"x": Xd})
for tag in ("pt", "pc", "tie", "big", "dw"):
    cases[f"QC_dbl_{tag}"] = (double_of(cases[f"QC_op_{tag}"][0], "QLinearConv"), cases[f"QC_op_{tag}"][1])
xin, zin = h.make_tensor_value_info("x", T.UINT8, list(Xb.shape)), h.make_tensor_value_info("zx", T.UINT8, [])
yi = onnx.ValueInfoProto(name="y", type=h.make_tensor_type_proto(T.INT32, None))
cases["CI_op_fed"] = (model([h.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=[1,1,1,1], strides=[2, 2])], [xin, zin], [yi],
    [C("w", Wb.view(np.uint8)), C("zw", np.uint8(121))]), {"x": Xb, "zx": np.array(77, np.uint8)})
cases["CI_dbl_fed"] = (double_of(cases["CI_op_fed"][0], "ConvInteger"), cases["CI_op_fed"][1])
# ---- DynamicQuantizeLinear (quantize_dynamic's models: its scale, zero point and codes)
xq = np.concatenate([rng.normal(0.7, 3, 5000), rng.uniform(-1, 9, 3000), [0.0, -0.0]]).astype(np.float32)[None]
for i, out in enumerate(("y", "ys", "yz")):
    cases[f"DQL_op_{out}"] = (model([h.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])], [h.make_tensor_value_info("x", T.FLOAT, list(xq.shape))],
        [onnx.ValueInfoProto(name=out, type=h.make_tensor_type_proto([T.UINT8, T.FLOAT, T.UINT8][i], None))], []), {"x": xq})

# ---- DynamicQuantizeLinear with exact residuals (rewriter/convert/lowering/quant_dynamic.py): 64 tensors of
# 32768 (Split, one DynamicQuantizeLinear each, Concat): per tensor a min / max over 2^-100..2^100 (all zero,
# all negative, all positive too), 70% of the points at (k + 1/2) * s moved by 0..3 ulps for every code
def dql_group(n):
    kind, mag = rng.integers(0, 8), np.float32(2.0 ** rng.uniform(-100, 100) if rng.random() < 0.3 else 2.0 ** rng.uniform(-12, 12))
    if kind == 0: return np.zeros(n, np.float32)
    lo, hi = sorted(rng.normal(0, 1, 2).astype(np.float32) * mag)
    lo, hi = (lo, min(hi, -abs(lo) * 0.01)) if kind == 1 else (max(lo, abs(hi) * 0.01), hi) if kind == 2 else (lo, hi)
    lo, hi = np.float32(min(lo, hi, 0)), np.float32(max(lo, hi, 0))
    sc = np.float32(np.float32(hi - lo) / np.float32(255)); z = int(np.round(np.clip(-np.float32(lo / sc), 0, 255)))
    t = ((rng.integers(-z - 2, 258 - z, n) + np.float32(0.5)) * sc).astype(np.float32)
    for _ in range(int(rng.integers(0, 4))):
        d = rng.integers(-1, 2, n); t = np.where(d > 0, np.nextafter(t, np.float32(np.inf)), np.where(d < 0, np.nextafter(t, np.float32(-np.inf)), t))
    x = np.clip(np.where(rng.random(n) < 0.7, t, lo + (hi - lo) * rng.random(n)), lo, hi).astype(np.float32)
    x[:4] = [lo, hi, 0.0, -0.0]
    return rng.permutation(x)
G, N = 64, 32768
xg = np.stack([dql_group(N) for _ in range(G)]).astype(np.float32)
dn = [h.make_node("Split", ["x"], [f"x{i}" for i in range(G)], axis=0, num_outputs=G)]
for i in range(G):
    dn += [h.make_node("DynamicQuantizeLinear", [f"x{i}"], [f"y{i}", f"s{i}", f"z{i}"], name=f"dql{i}"),
           h.make_node("Unsqueeze", [f"s{i}", "ax"], [f"su{i}"]), h.make_node("Unsqueeze", [f"z{i}", "ax"], [f"zu{i}"])]
for i, (out, pre, t) in enumerate((("y", "y", T.UINT8), ("ys", "su", T.FLOAT), ("yz", "zu", T.UINT8))):
    mg = model(dn + [h.make_node("Concat", [f"{pre}{j}" for j in range(G)], [out], axis=0)], [h.make_tensor_value_info("x", T.FLOAT, [G, N])],
               [onnx.ValueInfoProto(name=out, type=h.make_tensor_type_proto(t, None))], [C("ax", np.int64([0]))], opset=18)
    cases[f"DQLX_op_{out}"] = (mg, {"x": xg})
    me = onnx.ModelProto(); me.CopyFrom(mg)
    assert rewrite_quantized(me, {"DynamicQuantizeLinear": "exact_residual"}, "probe")[0] == G
    cases[f"DQLX_exact_{out}"] = (me, {"x": xg})

only = sys.argv[2:] 
rts = sys.argv[1].split(",")
ref = {}
for name, (m, f) in cases.items():
    if only and not any(o in name for o in only): continue
    p = os.path.join(D, name + ".onnx"); onnx.save(m, p); np.savez(os.path.join(D, name + "_in.npz"), **f)
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if "_dbl_" in name:  # ONNX Runtime has no double Conv: the op's result (same inputs)
        ref[name] = ref[name.replace("_dbl_", "_op_")]; continue
    ref[name] = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, f)[0]
# every form against the op form's ORT result (same family), and each runtime against ORT
fam = lambda n: n.split("_")[0] + "_" + n.split("_")[-1] if n.count("_") >= 2 else n
for name in ref:
    base = [k for k in ref if k.startswith(name.split("_")[0] + "_op") and k.split("_")[-1] == name.split("_")[-1]]
    b = ref[base[0]] if base else ref[name]
    line = f"{name:12s} ORT-vs-op:{int(np.count_nonzero(ref[name].astype(np.int64) - b.astype(np.int64)))}"
    for rt in rts:
        py = os.path.expanduser(f"~/.cache/rewriter/runtime-venvs/{rt}/bin/python")
        out = os.path.join(D, f"{name}_{rt}.npz")
        res = subprocess.run([py, str(Path(__file__).parent / f"runtime_run_{rt.split('-')[0]}.py"), os.path.join(D, name + ".onnx"), os.path.join(D, name + "_in.npz"), out], capture_output=True, text=True)
        j = json.loads(res.stdout.strip().splitlines()[-1]) if res.stdout.strip() else {"ok": False, "error": res.stderr[-200:]}
        if not j.get("ok"): line += f"  {rt}: refused {j.get('error','')[:60]!r}"; continue
        g = list(np.load(out).values())[0].reshape(ref[name].shape)
        d = g.astype(np.float64) - ref[name].astype(np.float64)
        tol = 1e-4 * np.abs(ref[name]).max() if ref[name].dtype.kind == 'f' and not name.startswith("DQL") else 0  # DQL: bit for bit
        differ = np.count_nonzero(g.view(np.uint32) != ref[name].view(np.uint32)) if name.startswith("DQL") and g.dtype == np.float32 else np.count_nonzero(np.abs(d) > tol)
        line += f"  {rt}: {differ}/{d.size} differ (max {np.abs(d).max():g})"
    print(line, flush=True)
