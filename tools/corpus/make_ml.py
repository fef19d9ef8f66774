#!/usr/bin/env python
"""Build a corpus of real ai.onnx.ml models from the field's own exporters.

Run with the ML venv (NOT the project's python):

    /work/venvs/ml/bin/python tools/corpus/make_ml.py [--out /work/corpus/ml]

The venv is made with:

    python -m venv /work/venvs/ml
    /work/venvs/ml/bin/pip install scikit-learn skl2onnx onnxmltools lightgbm \
        xgboost onnxruntime onnx pandas "protobuf<7"

(protobuf 7 refuses numpy bools in int attributes, which breaks skl2onnx 1.20
on HistGradientBoosting: "Expected an int, got a boolean".)

Writes, for every model <name>:
  <out>/<name>.onnx           the exported model, unchanged
  <out>/<name>.npz            a few rows of sample input, one array per graph
                              input, under the input's exact name and dtype
                              (string inputs are stored as numpy unicode arrays,
                              so np.load(..., allow_pickle=False) works)
  <out>/expected/<name>.npz   onnxruntime's outputs on that input (tensor
                              outputs only; ZipMap's sequence<map> outputs are
                              recorded in the manifest instead)
  <out>/manifest.json         one entry per model, plus the failures

Data sets are the ones scikit-learn ships (iris, wine, breast_cancer,
diabetes), plus a small deterministic mixed-type "customer" table with string
columns and missing values.  Models are kept small (few trees, shallow).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import traceback
import warnings
from collections import Counter

import numpy as np

warnings.filterwarnings("ignore")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import pandas as pd  # noqa: E402
import sklearn  # noqa: E402
import skl2onnx  # noqa: E402
from skl2onnx import to_onnx, update_registered_converter  # noqa: E402
from skl2onnx.common.shape_calculator import (  # noqa: E402
    calculate_linear_classifier_output_shapes,
    calculate_linear_regressor_output_shapes,
)
from sklearn import datasets  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import (  # noqa: E402
    Binarizer,
    LabelEncoder,
    Normalizer,
    OneHotEncoder,
    OrdinalEncoder,
    StandardScaler,
)
from sklearn.svm import SVC, SVR, LinearSVC, NuSVC, NuSVR, OneClassSVM  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402

import lightgbm  # noqa: E402
import onnxmltools  # noqa: E402
import xgboost  # noqa: E402
from lightgbm import LGBMClassifier, LGBMRegressor  # noqa: E402
from onnxmltools.convert.lightgbm.operator_converters.LightGbm import (  # noqa: E402
    convert_lightgbm as _oml_convert_lightgbm,
)
from onnxmltools.convert.xgboost.operator_converters.XGBoost import (  # noqa: E402
    convert_xgboost as _oml_convert_xgboost,
)
from xgboost import XGBClassifier, XGBRegressor  # noqa: E402

SEED = 0
N_SAMPLE_ROWS = 5

# target_opset settings (skl2onnx accepts a dict per domain).
T13_ML1 = {"": 13, "ai.onnx.ml": 1}
T15_ML3 = {"": 15, "ai.onnx.ml": 3}
T19_ML3 = {"": 19, "ai.onnx.ml": 3}
T21_ML5 = {"": 21, "ai.onnx.ml": 5}  # asked for; skl2onnx emits no ML-5 op
DEFAULT = None
TAGS = {
    None: "default",
}


def tag_of(t):
    if t is None:
        return "default"
    if isinstance(t, int):
        return f"op{t}"
    s = f"op{t['']}"
    if "ai.onnx.ml" in t:
        s += f"_ml{t['ai.onnx.ml']}"
    return s


# ---------------------------------------------------------------- data sets


def iris(str_labels=False):
    d = datasets.load_iris()
    X = d.data.astype(np.float32)
    y = d.target
    if str_labels:
        y = np.array(d.target_names)[y]
    return X, y, "sklearn.datasets.load_iris"


def wine():
    d = datasets.load_wine()
    return d.data.astype(np.float32), d.target, "sklearn.datasets.load_wine"


def cancer():
    d = datasets.load_breast_cancer()
    return d.data.astype(np.float32), d.target, "sklearn.datasets.load_breast_cancer"


def diabetes():
    d = datasets.load_diabetes()
    return d.data.astype(np.float32), d.target.astype(np.float32), "sklearn.datasets.load_diabetes"


def customers(n=400):
    """Deterministic mixed-type table: strings, floats, an int, some NaNs."""
    rng = np.random.RandomState(SEED)
    city = rng.choice(["Lisbon", "Porto", "Braga", "Faro", "Coimbra"], n, p=[.35, .25, .15, .15, .10])
    plan = rng.choice(["basic", "standard", "premium"], n, p=[.5, .3, .2])
    age = rng.normal(41, 12, n).clip(18, 90).round()
    tenure = rng.gamma(2.0, 14.0, n).round().astype(np.int64)
    monthly = (rng.normal(30, 8, n) + (plan == "standard") * 15 + (plan == "premium") * 35).round(2)
    logit = -1.5 + 0.04 * (45 - age) - 0.03 * tenure + 0.02 * monthly + (city == "Faro") * 0.8
    churn = (rng.rand(n) < 1 / (1 + np.exp(-logit)))
    age_nan = age.copy()
    age_nan[rng.rand(n) < 0.08] = np.nan
    monthly_nan = monthly.copy()
    monthly_nan[rng.rand(n) < 0.05] = np.nan
    df = pd.DataFrame({
        "city": city.astype(object),
        "plan": plan.astype(object),
        "age": age_nan.astype(np.float32),
        "tenure_months": tenure,
        "monthly_charges": monthly_nan.astype(np.float32),
    })
    y = np.where(churn, "churned", "stayed")
    return df, y, "synthetic customers table (tools/corpus/make_ml.py:customers, seed 0)"


# ------------------------------------------------------------ LightGBM/XGB
# Register onnxmltools' converters with skl2onnx, as the skl2onnx docs show,
# so that LightGBM/XGBoost also go through skl2onnx with options/zipmap.

update_registered_converter(
    LGBMClassifier, "LightGbmLGBMClassifier",
    calculate_linear_classifier_output_shapes, _oml_convert_lightgbm,
    options={"nocl": [True, False], "zipmap": [True, False, "columns"]},
)
update_registered_converter(
    LGBMRegressor, "LightGbmLGBMRegressor",
    calculate_linear_regressor_output_shapes, _oml_convert_lightgbm,
    options={"split": None},
)
update_registered_converter(
    XGBClassifier, "XGBoostXGBClassifier",
    calculate_linear_classifier_output_shapes, _oml_convert_xgboost,
    options={"nocl": [True, False], "zipmap": [True, False, "columns"]},
)
update_registered_converter(
    XGBRegressor, "XGBoostXGBRegressor",
    calculate_linear_regressor_output_shapes, _oml_convert_xgboost,
)


# ------------------------------------------------------------------- cases
# Each case: name, fit() -> (estimator, X_train, dataset), and a list of
# conversions (converter, target_opset, options, suffix).


class Case:
    def __init__(self, name, fit, convs, describe=None):
        self.name = name
        self.fit = fit
        self.convs = convs
        self.describe = describe


def S(t, options=None, suffix="", dtype=None):
    return ("skl2onnx", t, options, suffix, dtype)


def OML(t, zipmap=True, suffix=""):
    return ("onnxmltools", t, {"zipmap": zipmap}, suffix, None)


NOZM = {"zipmap": False}


def _fit(est, data):
    X, y, src = data
    est.fit(X, y)
    return est, X, src


CASES = [
    Case("scaler_logreg", lambda: _fit(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), iris()),
         [S(T13_ML1), S(T15_ML3), S(T19_ML3), S(DEFAULT), S(T21_ML5), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("linreg", lambda: _fit(LinearRegression(), diabetes()), [S(T13_ML1), S(DEFAULT)]),
    Case("ridge", lambda: _fit(Ridge(alpha=0.5), diabetes()), [S(T15_ML3), S(T21_ML5)]),
    # skl2onnx 1.20's Pipeline parser gives every classifier step a 'zipmap'
    # option, which LinearSVC does not accept; naming any option of the step
    # (here nocl=False, its default) avoids that.
    Case("linear_svc", lambda: _fit(make_pipeline(StandardScaler(), LinearSVC(max_iter=5000)), cancer()),
         [S(T13_ML1, {"nocl": False}), S(DEFAULT, {"nocl": False}), S(DEFAULT, None, "_nooption")]),
    Case("svc_proba", lambda: _fit(make_pipeline(StandardScaler(), SVC(probability=True, random_state=SEED)), iris()),
         [S(T13_ML1), S(T19_ML3), S(DEFAULT), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("svr", lambda: _fit(make_pipeline(StandardScaler(), SVR(C=50.0)), diabetes()), [S(T15_ML3), S(DEFAULT)]),
    # SVMs: every kernel, binary and multiclass, with and without probabilities (SVMClassifier),
    # regression (SVMRegressor) and OneClassSVM (SVMRegressor one_class... as skl2onnx writes it)
    *[Case(f"svc_{kernel}_{data.__name__}{'_proba' if proba else ''}",
           (lambda kernel=kernel, data=data, proba=proba: _fit(make_pipeline(
               StandardScaler(), SVC(kernel=kernel, degree=3, probability=proba, random_state=SEED)), data())),
           [S(DEFAULT, NOZM, "_nozipmap")] + ([S(T13_ML1)] if kernel == "rbf" else []))
      for kernel in ("linear", "poly", "rbf", "sigmoid") for data in (cancer, wine) for proba in (False, True)],
    Case("svc_strlabels", lambda: _fit(make_pipeline(StandardScaler(), SVC(probability=True, random_state=SEED)),
                                       iris(True)), [S(DEFAULT, NOZM, "_nozipmap")]),
    Case("nusvc", lambda: _fit(make_pipeline(StandardScaler(), NuSVC(nu=0.3, random_state=SEED)), wine()),
         [S(DEFAULT, NOZM, "_nozipmap")]),
    *[Case(f"svr_{kernel}", (lambda kernel=kernel: _fit(make_pipeline(StandardScaler(), SVR(kernel=kernel, C=5.0)),
                                                        diabetes())), [S(DEFAULT)])
      for kernel in ("linear", "poly", "sigmoid")],
    Case("nusvr", lambda: _fit(make_pipeline(StandardScaler(), NuSVR(nu=0.4)), diabetes()), [S(DEFAULT)]),
    Case("oneclass_svm", lambda: _fit(make_pipeline(StandardScaler(), OneClassSVM(nu=0.2)), wine()), [S(DEFAULT)]),
    Case("rf_clf", lambda: _fit(RandomForestClassifier(n_estimators=10, max_depth=5, random_state=SEED), wine()),
         [S(T13_ML1), S(T15_ML3), S(T19_ML3), S(DEFAULT), S(T21_ML5), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("rf_reg", lambda: _fit(RandomForestRegressor(n_estimators=10, max_depth=6, random_state=SEED), diabetes()),
         [S(T13_ML1), S(T19_ML3), S(DEFAULT),
          # double input -> TreeEnsembleRegressor v3 (ai.onnx.ml 3)
          S(T19_ML3, None, "_double", np.float64)]),
    Case("gb_clf", lambda: _fit(GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=SEED), cancer()),
         [S(T13_ML1), S(T19_ML3), S(DEFAULT)]),
    Case("gb_reg", lambda: _fit(GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=SEED), diabetes()),
         [S(T15_ML3), S(DEFAULT)]),
    Case("hgb_clf", lambda: _fit(HistGradientBoostingClassifier(max_iter=15, max_depth=4, random_state=SEED), iris()),
         [S(T15_ML3), S(T19_ML3), S(DEFAULT)]),
    Case("hgb_reg", lambda: _fit(HistGradientBoostingRegressor(max_iter=15, max_depth=4, random_state=SEED), diabetes()),
         [S(T13_ML1), S(DEFAULT)]),
    Case("dtree_clf", lambda: _fit(DecisionTreeClassifier(max_depth=4, random_state=SEED), iris()),
         [S(T13_ML1), S(DEFAULT), S(T21_ML5),
          S(T15_ML3, None, "_double", np.float64)]),
    Case("dtree_reg", lambda: _fit(DecisionTreeRegressor(max_depth=5, random_state=SEED), diabetes()),
         [S(T13_ML1), S(DEFAULT)]),
    Case("knn_clf", lambda: _fit(KNeighborsClassifier(n_neighbors=5), iris()), [S(T15_ML3), S(DEFAULT)]),
    Case("knn_reg", lambda: _fit(KNeighborsRegressor(n_neighbors=4), diabetes()), [S(DEFAULT)]),
    Case("normalizer", lambda: _fit(Normalizer(norm="l2"), wine()), [S(T13_ML1), S(DEFAULT)]),
    Case("binarizer", lambda: _fit(Binarizer(threshold=0.0), diabetes()), [S(T13_ML1), S(DEFAULT)]),
    Case("imputer_scaler", lambda: _fit_imputer(), [S(T13_ML1), S(DEFAULT)]),
    Case("coltrans_onehot_logreg", lambda: _fit_coltrans(),
         [S(T13_ML1), S(T15_ML3), S(T19_ML3), S(DEFAULT), S(T21_ML5), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("strlabel_rf", lambda: _fit(RandomForestClassifier(n_estimators=5, max_depth=4, random_state=SEED), iris(True)),
         [S(T13_ML1), S(T19_ML3), S(DEFAULT), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("ordinal_dtree", lambda: _fit_ordinal(), [S(T13_ML1), S(T15_ML3), S(DEFAULT)]),
    Case("label_encoder", lambda: _fit_label_encoder(), [S(T13_ML1), S(T15_ML3), S(DEFAULT)]),
    Case("lgbm_clf", lambda: _fit(LGBMClassifier(n_estimators=20, num_leaves=8, random_state=SEED, verbose=-1), iris()),
         [OML(13, True, "_oml"), OML(None, True, "_oml"), OML(None, False, "_oml_nozipmap"),
          S(T15_ML3), S(T19_ML3), S(T19_ML3, NOZM, "_nozipmap"), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("lgbm_reg", lambda: _fit(LGBMRegressor(n_estimators=20, num_leaves=8, random_state=SEED, verbose=-1), diabetes()),
         [OML(13, True, "_oml"), OML(None, True, "_oml"), S(T15_ML3), S(T19_ML3)]),
    Case("xgb_clf", lambda: _fit(XGBClassifier(n_estimators=15, max_depth=3, random_state=SEED), wine()),
         [OML(13, True, "_oml"), OML(None, True, "_oml"),
          S(T15_ML3), S(T19_ML3), S(T19_ML3, NOZM, "_nozipmap"), S(DEFAULT, NOZM, "_nozipmap")]),
    Case("xgb_reg", lambda: _fit(XGBRegressor(n_estimators=15, max_depth=3, random_state=SEED), diabetes()),
         [OML(13, True, "_oml"), OML(None, True, "_oml"), S(T15_ML3), S(T19_ML3)]),
]


def _fit_imputer():
    X, y, src = diabetes()
    X = X.copy()
    rng = np.random.RandomState(SEED)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    est = make_pipeline(SimpleImputer(strategy="median"), StandardScaler())
    est.fit(X)
    return est, X, src + " with 10% values set to NaN"


def _fit_coltrans():
    df, y, src = customers()
    pre = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "plan"]),
        ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()),
         ["age", "tenure_months", "monthly_charges"]),
    ])
    est = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=1000))])
    est.fit(df, y)
    return est, df, src


def _fit_ordinal():
    df, y, src = customers()
    df = df[["city", "plan"]]
    est = Pipeline([("ord", OrdinalEncoder()), ("tree", DecisionTreeClassifier(max_depth=4, random_state=SEED))])
    est.fit(df, y)
    return est, df, src + " (string columns only)"


def _fit_label_encoder():
    df, y, src = customers()
    est = LabelEncoder().fit(df["city"].values)
    return est, df["city"].values.astype(object), src + " (city column)"


# --------------------------------------------------------------- converting


def initial_types_for(X, dtype=None, types_module=None):
    """Inputs as the skl2onnx docs build them: a DataFrame gives one input
    per column, an array gives a single input named X.  onnxmltools' own
    converters want onnxmltools' own type classes (types_module)."""
    if types_module is not None:
        FloatTensorType, DoubleTensorType, Int64TensorType, StringTensorType = (  # noqa: N806
            types_module.FloatTensorType, types_module.DoubleTensorType,
            types_module.Int64TensorType, types_module.StringTensorType)
    else:
        from skl2onnx.common.data_types import (  # noqa: N811
            DoubleTensorType, FloatTensorType, Int64TensorType, StringTensorType)
    if isinstance(X, pd.DataFrame):
        types = []
        for c in X.columns:
            k = X[c].dtype
            # pandas 3 gives string columns a StringDtype, not object
            if k == object or pd.api.types.is_string_dtype(k):
                types.append((c, StringTensorType([None, 1])))
            elif np.issubdtype(k, np.integer):
                types.append((c, Int64TensorType([None, 1])))
            elif k == np.float64:
                types.append((c, DoubleTensorType([None, 1])))
            else:
                types.append((c, FloatTensorType([None, 1])))
        return types
    if X.dtype == object:
        return [("X", StringTensorType([None]))]
    if dtype == np.float64:
        return [("X", DoubleTensorType([None, X.shape[1]]))]
    return [("X", FloatTensorType([None, X.shape[1]]))]


def sample_for(X, model, dtype=None):
    rng = np.random.RandomState(SEED + 1)
    n = len(X)
    idx = rng.choice(n, N_SAMPLE_ROWS, replace=False)
    # make sure a row with a missing value is in the sample, where there is one
    nan_rows = np.flatnonzero(pd.DataFrame(X).isna().any(axis=1).values) \
        if not (isinstance(X, np.ndarray) and X.dtype == object) else []
    if len(nan_rows) and not np.isin(idx, nan_rows).any():
        idx[-1] = nan_rows[0]
    idx = np.sort(idx)
    feeds = {}
    onnx_types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    if isinstance(X, pd.DataFrame):
        for c in X.columns:
            col = X[c].values[idx]
            et = onnx_types[c]
            if et == onnx.TensorProto.STRING:
                feeds[c] = np.array(col, dtype=str).reshape(-1, 1)
            else:
                feeds[c] = col.astype(onnx.helper.tensor_dtype_to_np_dtype(et)).reshape(-1, 1)
        return feeds
    (name,) = onnx_types
    et = onnx_types[name]
    x = X[idx]
    if et == onnx.TensorProto.STRING:
        feeds[name] = np.array(x, dtype=str)
    else:
        feeds[name] = x.astype(onnx.helper.tensor_dtype_to_np_dtype(et))
    return feeds


def sklearn_reference(est, X, idx_feeds, dtype):
    """The estimator's own answer on the sample, to compare with onnxruntime."""
    try:
        if isinstance(X, pd.DataFrame):
            df = pd.DataFrame({k: v.ravel() for k, v in idx_feeds.items()})
            for c in X.columns:
                df[c] = df[c].astype(X[c].dtype)
            Xs = df
        else:
            (v,) = idx_feeds.values()
            Xs = v.astype(object) if v.dtype.kind == "U" else v
        if hasattr(est, "predict"):
            return "predict", est.predict(Xs)
        return "transform", est.transform(Xs)
    except Exception as e:  # pragma: no cover - informative only
        return "error", repr(e)


def convert(est, X, conv):
    converter, target, options, _suffix, dtype = conv
    if converter == "skl2onnx":
        itypes = initial_types_for(X, dtype)
        kw = {}
        if options:
            kw["options"] = {id(est): options} if not isinstance(est, Pipeline) else {id(est.steps[-1][1]): options}
        m = skl2onnx.convert_sklearn(est, initial_types=itypes, target_opset=target, **kw)
        return m, f"skl2onnx {skl2onnx.__version__}"
    from onnxmltools.convert.common import data_types as oml_types

    itypes = initial_types_for(X, dtype, oml_types)
    if isinstance(est, (LGBMClassifier, LGBMRegressor)):
        m = onnxmltools.convert_lightgbm(est, initial_types=itypes, target_opset=target,
                                         zipmap=options.get("zipmap", True))
        return m, f"onnxmltools {onnxmltools.__version__} (convert_lightgbm)"
    if isinstance(est, (XGBClassifier, XGBRegressor)):
        # convert_xgboost has no zipmap switch and emits no ZipMap
        m = onnxmltools.convert_xgboost(est, initial_types=itypes, target_opset=target)
        return m, f"onnxmltools {onnxmltools.__version__} (convert_xgboost)"
    raise ValueError(converter)


def describe_est(est):
    if isinstance(est, Pipeline):
        return "Pipeline(" + ", ".join(describe_est(s) for _, s in est.steps) + ")"
    if isinstance(est, ColumnTransformer):
        return "ColumnTransformer(" + ", ".join(describe_est(t) for _, t, _ in est.transformers) + ")"
    return type(est).__name__


def type_str(t):
    k = t.WhichOneof("value")
    if k == "tensor_type":
        tt = t.tensor_type
        dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in tt.shape.dim] \
            if tt.HasField("shape") else None
        return {"tensor": onnx.TensorProto.DataType.Name(tt.elem_type).lower(), "shape": dims}
    if k == "sequence_type":
        return {"sequence": type_str(t.sequence_type.elem_type)}
    if k == "map_type":
        return {"map": [onnx.TensorProto.DataType.Name(t.map_type.key_type).lower(),
                        type_str(t.map_type.value_type)]}
    return {k: str(t)}


def op_types(model):
    c = Counter()

    def walk(g):
        for n in g.node:
            c[(n.domain or "ai.onnx") + "::" + n.op_type] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)
    walk(model.graph)
    return dict(sorted(c.items()))


def to_jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.generic,)):
        return x.item()
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    return x


def compare(ref, outs, out_names):
    kind, val = ref
    if kind == "error":
        return {"kind": kind, "error": val}
    first = outs[0]
    ref = np.asarray(val)
    try:
        got = np.asarray(first).reshape(ref.shape)
        if ref.dtype.kind in "fc" or got.dtype.kind in "fc":
            d = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
            return {"kind": kind, "output": out_names[0], "max_abs_diff": d}
        return {"kind": kind, "output": out_names[0], "equal": bool(np.array_equal(got.astype(str), ref.astype(str)))}
    except Exception as e:
        return {"kind": kind, "output": out_names[0], "error": repr(e)}


def _merged(out, entries, failures):
    """With --only: the manifest's entries of the models not built again, then the new ones."""
    path = os.path.join(out, "manifest.json")
    if not os.path.exists(path):
        return entries, failures
    with open(path) as f:
        old = json.load(f)
    built = {e["name"] for e in entries} | {f["name"] for f in failures}
    return ([e for e in old.get("models", []) + old.get("rejected", []) if e["name"] not in built] + entries,
            [f for f in old.get("failures", []) if f["name"] not in built] + failures)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default="/work/corpus/ml")
    ap.add_argument("--only", nargs="*", help="case names to build (default all)")
    args = ap.parse_args(argv)
    out = args.out
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)

    versions = {
        "python": sys.version.split()[0], "numpy": np.__version__, "scikit-learn": sklearn.__version__,
        "skl2onnx": skl2onnx.__version__, "onnxmltools": onnxmltools.__version__,
        "lightgbm": lightgbm.__version__, "xgboost": xgboost.__version__,
        "onnx": onnx.__version__, "onnxruntime": ort.__version__, "pandas": pd.__version__,
    }
    entries, failures = [], []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        try:
            est, X, src = case.fit()
        except Exception as e:
            failures.append({"name": case.name, "stage": "fit", "error": repr(e)})
            print(f"FIT FAIL {case.name}: {e!r}")
            continue
        for conv in case.convs:
            converter, target, options, suffix, dtype = conv
            name = f"{case.name}_{tag_of(target)}{suffix}"
            requested = {"converter": converter, "target_opset": target, "options": options,
                         "input_dtype": np.dtype(dtype).name if dtype else None}
            try:
                model, conv_ver = convert(est, X, conv)
                onnx.checker.check_model(model)
            except Exception as e:
                msg = str(e).strip().splitlines()
                failures.append({"name": name, "stage": "convert", "requested": requested,
                                 "error": f"{type(e).__name__}: {msg[0] if msg else ''}"[:500]})
                print(f"CONVERT FAIL {name}: {type(e).__name__}: {msg[:1]}")
                continue
            feeds = sample_for(X, model, dtype)
            try:
                sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
                outs = sess.run(None, feeds)
            except Exception as e:
                failures.append({"name": name, "stage": "onnxruntime", "requested": requested,
                                 "error": f"{type(e).__name__}: {str(e)[:500]}"})
                print(f"ORT FAIL {name}: {e!s:.300}")
                # still keep the model, apart: a field-made model that
                # onnxruntime refuses is worth having, but not in the main set
                outs = None
            sub = "" if outs is not None else "rejected"
            os.makedirs(os.path.join(out, sub), exist_ok=True)
            data = model.SerializeToString()
            with open(os.path.join(out, sub, name + ".onnx"), "wb") as f:
                f.write(data)
            np.savez(os.path.join(out, sub, name + ".npz"), **feeds)
            out_names = [o.name for o in model.graph.output]
            exp, seq_outputs = {}, {}
            if outs is not None:
                for on, ov in zip(out_names, outs):
                    if isinstance(ov, np.ndarray):
                        exp[on] = ov.astype(str) if ov.dtype == object else ov
                    else:
                        seq_outputs[on] = to_jsonable(ov)
                np.savez(os.path.join(out, "expected", name + ".npz"), **exp)
            opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
            entry = {
                "name": name,
                "file": os.path.join(sub, name + ".onnx"),
                "sample": os.path.join(sub, name + ".npz"),
                "expected": ("expected/" + name + ".npz") if outs is not None else None,
                "case": case.name,
                "estimator": describe_est(est),
                "dataset": src,
                "converter": conv_ver,
                "requested": requested,
                "default_opset": opsets.get("ai.onnx"),
                "ml_opset": opsets.get("ai.onnx.ml"),
                "opset_import": opsets,
                "ir_version": model.ir_version,
                "producer": f"{model.producer_name} {model.producer_version}".strip(),
                "op_types": op_types(model),
                "inputs": [{"name": i.name, **type_str(i.type)} for i in model.graph.input],
                "outputs": [{"name": o.name, **type_str(o.type)} for o in model.graph.output],
                "sample_rows": N_SAMPLE_ROWS,
                "onnxruntime_ok": outs is not None,
                "sequence_outputs": seq_outputs or None,
                "vs_estimator": compare(sklearn_reference(est, X, feeds, dtype), outs, out_names)
                if outs is not None else None,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            entries.append(entry)
            print(f"ok {name:40s} opsets={opsets} ir={model.ir_version} ort={'ok' if outs is not None else 'FAIL'}"
                  f" {entry['vs_estimator']}")
    if args.only:
        entries, failures = _merged(out, entries, failures)
    manifest = {"generator": "tools/corpus/make_ml.py", "versions": versions,
                "layout": {"<name>.onnx": "model, runs in onnxruntime on <name>.npz",
                           "<name>.npz": "sample input: one array per graph input, exact name and dtype",
                           "expected/<name>.npz": "onnxruntime outputs on the sample (tensor outputs)",
                           "rejected/": "models the converter wrote but onnxruntime refused"},
                "models": [e for e in entries if e["onnxruntime_ok"]],
                "rejected": [e for e in entries if not e["onnxruntime_ok"]],
                "failures": failures}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, default=to_jsonable)
    n_ok = sum(e["onnxruntime_ok"] for e in entries)
    print(f"\n{n_ok} models written (+{len(entries) - n_ok} rejected by onnxruntime), {len(failures)} failures; manifest at {out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
