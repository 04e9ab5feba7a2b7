"""Chart helpers shared by the sections: Vega-Lite specs built as plain dicts (the contract; no Altair at run
time, see "building specs" below), sizes that fit the page, units on every axis, and the colour scales of
reportgen/palette.py.

Sizes: a chart either takes its container's width (``fit``: ``width: "container"``, drawn to the figure's box
and redrawn when the window changes) or is computed from its rank / step count with a maximum
(``band``, ``PLOT_MAX_WIDTH``) so that at the reference width (1400 px window, 1070 px figure box) nothing
is cut. ``static_spec`` gives the ``--static`` renderer (no container there) a fixed width instead.

Units: values stay in their base unit in the embedded data (ms, MB, FLOP...); ``in_unit`` divides them in the
page by the factor fmt.unit_for chose, and the axis / legend / tooltip titles name that unit
(``fmt.header``); numbers are formatted with ``fmt.D3_FORMAT`` / ``fmt.D3_PCT``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import fmt, palette
from . import thresholds as th
from .report import Figure
from .report import natural_key  # noqa: F401 - the one natural order (tables and charts), re-exported

#: Widest plot area (px) of a chart whose size is computed (heatmaps, matrices, small multiples): with its axis
#: and legend it fits the 1070 px figure box of a 1400 px window.
PLOT_MAX_WIDTH = 760
#: Width of a ``"container"`` chart in the ``--static`` SVG, which has no container to measure.
STATIC_WIDTH = 900
#: Autosize of a chart sized to its container: the axes, titles and legends fit inside the container too, and
#: the layout is redone when a control changes the labels (a longer legend label must not be cut).
FIT = {"type": "fit-x", "contains": "padding", "resize": True}
#: Autosize of every other chart: grows with its labels, also after a control changed them.
PAD = {"type": "pad", "resize": True}
#: The Vega-Lite schema the specs follow (the one vl-convert and the page's bundle draw).
SCHEMA_URL = "https://vega.github.io/schema/vega-lite/v6.4.1.json"


# --------------------------------------------------------------------------- building specs
#
# A chart is a plain Vega-Lite dict. ``Spec`` is a dict with the few builder methods the sections use (named as
# the Vega-Lite properties they set); each returns a new Spec and leaves its receiver unchanged, so a base chart can
# be shared by several layers. Channel, scale, axis and legend helpers return plain dicts. Data is inlined where a
# chart is made (``{"values": rows}``); ``to_spec`` moves it to the top-level ``datasets`` (named by content, so a
# table used by several views of one chart is stored once) and completes the top level.

class _Undefined:
    """Marks a property that is not set (left out of the spec; ``None`` is written as ``null``)."""

    def __repr__(self) -> str:
        return "Undefined"


Undefined = _Undefined()

_TYPES = {"Q": "quantitative", "N": "nominal", "O": "ordinal", "T": "temporal"}
_SHORTHAND_AGG = re.compile(r"^(\w+)\((.*)\)$")
#: channels whose definitions carry no type (Vega-Lite SecondaryFieldDef)
_SECONDARY = {"x2", "y2", "theta2", "radius2", "latitude2", "longitude2", "xError", "xError2", "yError", "yError2"}


def _clean(props: dict) -> dict:
    return {k: v for k, v in props.items() if v is not Undefined}


def field(shorthand: str | dict | None = None, **props) -> dict:
    """A channel definition: ``"name:Q"`` (type letter Q/N/O/T), ``"op(name):Q"`` or ``"count()"`` plus
    properties (title, axis, scale, legend, sort, format...)."""
    out: dict[str, Any] = {}
    if isinstance(shorthand, dict):
        out.update(shorthand)
    elif shorthand is not None:
        name, _, kind = shorthand.rpartition(":") if shorthand[-2:-1] == ":" else (shorthand, "", "")
        m = _SHORTHAND_AGG.match(name)
        if m:
            out["aggregate"] = m.group(1)
            if m.group(2):
                out["field"] = m.group(2)
        else:
            out["field"] = name
        if kind:
            out["type"] = _TYPES[kind]
        elif "aggregate" in out and "field" not in out:
            out["type"] = "quantitative"
    out.update(_clean(props))
    return out


X = Y = X2 = Y2 = Color = Tooltip = Text = Size = StrokeWidth = Order = Detail = Shape = Opacity = field


def Axis(**props) -> dict:  # noqa: N802 - the Vega-Lite name
    return _clean(props)


Legend = Scale = TitleParams = Axis


def EncodingSortField(field: str, op: str = Undefined, order: str = Undefined) -> dict:  # noqa: N802
    return _clean({"field": field, "op": op, "order": order})


def value(v: Any) -> dict:
    return {"value": v}


def condition(test: str, if_true: dict, if_false: dict) -> dict:
    """``if_true`` where the Vega expression ``test`` holds, else ``if_false`` (both ``value(...)`` or fields)."""
    return {"condition": {"test": test, **if_true}, **if_false}


def param(name: str, value: Any = Undefined, **props) -> dict:
    """A variable parameter (a signal a control or a finding sets); ``to_spec`` lifts it to the top level."""
    return _clean({"name": name, "value": value, **props})


def selection_interval(name: str, encodings: list[str] | None = None, bind: Any = Undefined) -> dict:
    select = {"type": "interval", **({"encodings": list(encodings)} if encodings else {})}
    return _clean({"name": name, "select": select, "bind": bind})


def records(df) -> list[dict]:
    """The rows of a DataFrame as JSON-ready dicts (NaN and infinities as null, numpy scalars as Python ones,
    times as ISO text)."""
    cols = []
    for name in df.columns:
        s = df[name]
        kind = s.dtype.kind
        if kind in "iub" and not s.hasnans:  # (a nullable integer column with <NA> goes by _native)
            vals = s.tolist()
        elif kind == "f" and isinstance(s.dtype, np.dtype):
            vals = s.tolist()
            if not np.isfinite(s.to_numpy(dtype=float)).all():
                vals = [v if math.isfinite(v) else None for v in vals]
        elif kind == "M":
            vals = [None if v is None or v != v else v.isoformat() for v in s.astype(object)]
        else:
            vals = [_native(v) for v in s.astype(object).tolist()]
        cols.append(vals)
    names = [str(c) for c in df.columns]
    return [dict(zip(names, row)) for row in zip(*cols)] if names else [{} for _ in range(len(df))]


def _native(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, np.ndarray):
        return [_native(x) for x in v.tolist()]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalar
        return _native(v.item())
    if v is None or isinstance(v, (str, bool, int, list, dict, tuple)):
        return v
    if pd.isna(v):  # pd.NA, NaT
        return None
    return v.isoformat() if hasattr(v, "isoformat") else v


def data(source: Any) -> dict:
    """Inline data of a chart from a DataFrame, a list of row dicts or a data dict. A DataFrame's rows are read
    by ``to_spec`` (columns added to it after the chart was made are part of the chart, as in Altair)."""
    if isinstance(source, dict):
        return source
    return {"values": source}


def LookupData(source: Any, key: str, fields: list[str] | None = None) -> dict:  # noqa: N802
    return _clean({"data": data(source), "key": key, "fields": list(fields) if fields is not None else Undefined})


_param = param  # for the helpers below whose argument is named param


class Spec(dict):
    """A Vega-Lite (sub)spec; the methods return a new Spec with the property set (the receiver is unchanged)."""

    def _with(self, **props) -> "Spec":
        return Spec({**self, **_clean(props)})

    def mark(self, type_: str, **props) -> "Spec":
        return self._with(mark={"type": type_, **_clean(props)})

    def encode(self, **channels) -> "Spec":
        enc = dict(self.get("encoding") or {})
        for ch, d in channels.items():
            if d is Undefined:
                continue
            if isinstance(d, list):
                d = [field(x) if isinstance(x, str) else x for x in d]
            elif isinstance(d, str):
                d = field(d)
            if ch in _SECONDARY and isinstance(d, dict):
                d = {k: v for k, v in d.items() if k != "type"}
            enc[ch] = d
        return self._with(encoding=enc)

    def transform(self, *steps: dict) -> "Spec":
        return self._with(transform=list(self.get("transform") or []) + list(steps))

    def transform_calculate(self, **exprs: str) -> "Spec":
        return self.transform(*({"calculate": e, "as": k} for k, e in exprs.items()))

    def transform_filter(self, test: str | dict) -> "Spec":
        return self.transform({"filter": test})

    def transform_joinaggregate(self, groupby: list[str] | None = None, **ops: str) -> "Spec":
        agg = []
        for name, shorthand in ops.items():
            d = field(shorthand)
            agg.append(_clean({"op": d["aggregate"], "field": d.get("field", Undefined), "as": name}))
        return self.transform(_clean({"joinaggregate": agg, "groupby": groupby if groupby else Undefined}))

    def transform_lookup(self, lookup: str, from_: dict, **props) -> "Spec":
        return self.transform({"lookup": lookup, "from": from_, **_clean(props)})

    def transform_fold(self, fold: list[str], as_: list[str] | None = None) -> "Spec":
        return self.transform(_clean({"fold": list(fold), "as": list(as_) if as_ else Undefined}))

    def properties(self, **props) -> "Spec":
        return self._with(**props)

    def add_params(self, *params: dict) -> "Spec":
        return self._with(params=list(self.get("params") or []) + list(params))

    def resolve_scale(self, **channels: str) -> "Spec":
        resolve = dict(self.get("resolve") or {})
        resolve["scale"] = {**resolve.get("scale", {}), **channels}
        return self._with(resolve=resolve)

    def __add__(self, other: "Spec") -> "Spec":
        """``self`` and ``other`` layered (a layer gets ``other`` as its last layer, as Altair's ``+``)."""
        if "layer" in self:
            return self._with(layer=[*self["layer"], other])
        return layer(self, other)

    def __getattr__(self, name: str):
        if name.startswith("mark_"):
            return lambda **props: self.mark(name[5:], **props)
        raise AttributeError(name)


def Chart(source: Any = None, **props) -> Spec:  # noqa: N802
    """A unit (or, given ``layer`` etc., composite) chart over ``source`` (a DataFrame or rows)."""
    return Spec(_clean({"data": data(source) if source is not None else Undefined, **props}))


def layer(*specs: dict, **props) -> Spec:
    return Spec({"layer": list(specs), **_clean(props)})


def vconcat(*specs: dict, **props) -> Spec:
    return Spec({"vconcat": list(specs), **_clean(props)})


def hconcat(*specs: dict, **props) -> Spec:
    return Spec({"hconcat": list(specs), **_clean(props)})


_COMPOSITE = ("layer", "hconcat", "vconcat", "concat")


def _dataset(values: Any, datasets: dict, names: dict) -> str:
    """The name of inline ``values`` (rows or a DataFrame) in ``datasets``: "data-" + a digest of the rows, so
    equal tables share one entry; ``names`` remembers the tables already named (by identity)."""
    if id(values) not in names:
        rows = values if isinstance(values, list) else records(values)
        text = json.dumps(rows, separators=(",", ":"), allow_nan=False)
        name = "data-" + hashlib.sha256(text.encode()).hexdigest()[:32]
        datasets.setdefault(name, rows)
        names[id(values)] = (name, values)  # the table is kept so that its id stays its own
    return names[id(values)][0]


def _plain(node: Any, datasets: dict, params: dict, top: bool, names: dict) -> Any:
    """A JSON-ready copy of ``node``: inline data moved to ``datasets``, variable params below the top to ``params``."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "data" and isinstance(v, dict) and "values" in v and not isinstance(v["values"], (str, dict)):
                out[k] = {"name": _dataset(v["values"], datasets, names),
                          **{kk: vv for kk, vv in v.items() if kk != "values"}}
            elif k == "params" and isinstance(v, list) and not top:
                kept = []
                for p in v:
                    if "select" in p:
                        kept.append(p)
                    else:
                        params.setdefault(p["name"], p)
                if kept:
                    out[k] = kept
            else:
                out[k] = _plain(v, datasets, params, False, names)
        return out
    if isinstance(node, (list, tuple)):
        return [_plain(v, datasets, params, False, names) for v in node]
    return node


def to_spec(chart: dict) -> dict[str, Any]:
    """The complete top-level Vega-Lite dict of ``chart``: its data in ``datasets`` (``data: {"name": ...}``),
    every variable parameter at the top (where the page and vega-embed find them), ``$schema``, ``autosize``
    (``PAD`` unless set) and ``CONFIG`` merged into its config.

    With ``REPORTGEN_VALIDATE_SPECS=1`` (the test suite sets it, tests/conftest.py) the spec is validated against
    the Vega-Lite JSON schema (``validate``); a report never pays for that.
    """
    datasets: dict[str, list] = {}
    params: dict[str, dict] = {}
    spec = _plain(chart, datasets, params, True, {})
    if params:
        top = list(spec.get("params") or [])
        names = {p["name"] for p in top}
        spec["params"] = top + [p for n, p in params.items() if n not in names]
    spec.setdefault("autosize", dict(PAD))
    spec = _fit_with_discrete_size(spec)
    config = spec.setdefault("config", {})
    for key, value_ in CONFIG.items():
        config[key] = {**value_, **config.get(key, {})}
    if datasets:
        spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    spec = {"$schema": SCHEMA_URL, **spec}
    if os.environ.get("REPORTGEN_VALIDATE_SPECS") == "1":
        validate(spec)
    return spec


#: autosize types that ask Vega-Lite to fit the chart to a width and / or height
_FIT_TYPES = ("fit", "fit-x", "fit-y")
#: keys of a top-level spec that stay at the top when a single view is wrapped (``_fit_with_discrete_size``)
_TOP_KEYS = ("$schema", "datasets", "data", "params", "autosize", "config", "padding", "title", "usermeta",
             "background", "description", "name")


def _discrete(enc: Any, channel: str) -> bool:
    """Whether ``channel`` (x / y) of an encoding has a discrete (band / point) scale."""
    d = (enc or {}).get(channel) if isinstance(enc, dict) else None
    if not isinstance(d, dict):
        return False
    kind = (d.get("scale") or {}).get("type") if isinstance(d.get("scale"), dict) else None
    if kind:
        return kind in ("band", "point")
    return d.get("type") in ("nominal", "ordinal")


def _step_size(view: dict, size: str) -> bool:
    """Whether a unit or layer view's ``size`` ("width" / "height") is discrete (Vega-Lite's layout size "step"):
    set as ``{"step": n}``, or not set with a discrete x / y in the view or one of its layers."""
    value = view.get(size)
    if isinstance(value, dict):
        return "step" in value
    if value is not None:
        return False
    channel = "x" if size == "width" else "y"
    return _discrete(view.get("encoding"), channel) or any(
        isinstance(sub, dict) and ("layer" in sub or "mark" in sub) and _step_size(sub, size)
        for sub in view.get("layer") or ())


def fit_drops(spec: dict) -> list[str]:
    """What Vega-Lite would drop of ``spec``'s autosize, with its warning ('Dropping "fit-y" because spec has
    discrete height'): a single (unit or layer) view asking to fit (``fit`` / ``fit-x`` / ``fit-y``) while its width
    or height is a step per category. Vega-Lite warns even for ``fit-x`` with a step height (it checks the fit type,
    not the axis), so such a chart must not be a single view with a fit autosize. Empty when nothing is dropped."""
    if not isinstance(spec, dict) or not ("mark" in spec or "layer" in spec):
        return []
    auto = spec.get("autosize")
    kind = auto.get("type") if isinstance(auto, dict) else auto
    if kind not in _FIT_TYPES:
        return []
    return [f"fit-{'y' if size == 'height' else 'x'} (discrete {size})" for size in ("width", "height")
            if _step_size(spec, size)]


#: composite marks: Vega-Lite warns "Selection not supported for <mark> yet" and ignores a selection on them
_COMPOSITE_MARKS = ("boxplot", "errorbar", "errorband")


def vega_lite_warnings(spec: dict) -> list[str]:
    """What Vega-Lite would warn about while compiling ``spec`` (and then ignore), found without a browser: a fit
    autosize it drops (:func:`fit_drops`) and a selection on a composite mark (boxplot, errorbar, errorband)."""
    out = [f'Dropping "{d}"' for d in fit_drops(spec)]

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            mark = node.get("mark")
            kind = mark.get("type") if isinstance(mark, dict) else mark
            if kind in _COMPOSITE_MARKS and any(isinstance(p, dict) and "select" in p for p in node.get("params") or ()):
                out.append(f"Selection not supported for {kind} ({path or 'top'})")
            for key in ("layer", "vconcat", "hconcat", "concat"):
                for i, sub in enumerate(node.get(key) or ()):
                    walk(sub, f"{path}/{key}/{i}")
            if isinstance(node.get("spec"), dict):
                walk(node["spec"], f"{path}/spec")
    walk(spec, "")
    return out


def _fit_with_discrete_size(spec: dict) -> dict:
    """``spec`` as wide as its container with a height of one step per category, without Vega-Lite's warning: a
    single view whose autosize fits while one of its sizes is a step (:func:`fit_drops`) goes into a one-view
    ``vconcat`` (whose height is the sum of its views, so nothing is dropped); data, variable parameters,
    autosize, config and title stay at the top, the view and its selections move into the concatenation."""
    if not fit_drops(spec):
        return spec
    top = {k: v for k, v in spec.items() if k in _TOP_KEYS}
    view = {k: v for k, v in spec.items() if k not in _TOP_KEYS}
    params = list(spec.get("params") or [])
    selections = [p for p in params if isinstance(p, dict) and "select" in p]
    if selections:
        view["params"] = selections
    if params:
        top["params"] = [p for p in params if not (isinstance(p, dict) and "select" in p)]
        if not top["params"]:
            del top["params"]
    top["vconcat"] = [view]
    return top


def single_view(spec: dict) -> dict:
    """The one view of a chart (``spec`` itself, or the view ``_fit_with_discrete_size`` wrapped)."""
    v = spec.get("vconcat") if isinstance(spec, dict) else None
    if isinstance(v, list) and len(v) == 1 and "mark" not in spec and "layer" not in spec:
        return v[0]
    return spec


#: Defaults of every chart: axis labels that would touch another are dropped (never drawn over each other); the
#: size of a continuous view without a width or height.
CONFIG = {"axis": {"labelOverlap": True, "labelSeparation": 4},
          "view": {"continuousWidth": 300, "continuousHeight": 300}}

_validator = None


def schema_path() -> str:
    """The Vega-Lite JSON schema Altair ships (a test dependency; found without importing altair)."""
    import importlib.util

    found = importlib.util.find_spec("altair")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("REPORTGEN_VALIDATE_SPECS=1 needs altair installed (the test extra) for its schema")
    return os.path.join(list(found.submodule_search_locations)[0], "vegalite", "v6", "schema",
                        "vega-lite-schema.json")


#: reprs of the specs (rows of their inline data sets left out, see ``_rows_valid``) already found valid
_valid_seen: set[str] = set()


def _rows_valid(rows) -> bool:
    """Whether ``rows`` is an ``InlineDataset`` of the schema (an array of numbers, strings, booleans or
    objects: it says nothing about what an object holds) - checked as jsonschema's type checker does, in one
    pass; False also when unsure (the schema then checks it)."""
    if not isinstance(rows, list) or not rows:
        return False
    import numbers

    first = rows[0]
    if isinstance(first, dict):
        return all(isinstance(r, dict) for r in rows)
    if isinstance(first, str):
        return all(isinstance(r, str) for r in rows)
    if isinstance(first, bool):
        return all(isinstance(r, bool) for r in rows)
    return all(isinstance(r, numbers.Number) and not isinstance(r, bool) for r in rows)


def _json_form(spec: Any) -> Any:
    """``spec`` as JSON says it (a numpy scalar as its number, a tuple as an array, NaN as null), or None when it
    holds something JSON cannot say (then the caller checks the object itself). Not ``render.chart_spec`` (which
    also cuts long texts for the page): render imports this module, and the package has no import circles
    (tests/test_imports.py)."""
    import msgspec

    def hook(obj: Any) -> Any:
        if isinstance(obj, np.generic):
            return obj.item()
        raise TypeError(type(obj).__name__)

    try:
        return msgspec.json.decode(msgspec.json.encode(spec, enc_hook=hook))
    except (TypeError, msgspec.EncodeError, msgspec.DecodeError, OverflowError):
        return None


def _rs_schema(node: Any) -> Any:
    """The schema for jsonschema-rs: every ``$ref`` to a definition with its name percent-encoded (Vega-Lite names
    definitions like ``MarkPropDef<(Gradient|string|null)>``; jsonschema-rs checks that a ``$ref`` is a URI
    reference, and a JSON pointer in a URI fragment is percent-decoded: the same definitions)."""
    from urllib.parse import quote

    if isinstance(node, dict):
        return {k: ("#/definitions/" + quote(v[len("#/definitions/"):], safe="")
                    if k == "$ref" and isinstance(v, str) and v.startswith("#/definitions/") else _rs_schema(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_rs_schema(v) for v in node]
    return node


def _validators() -> tuple[Any, Any]:
    """(jsonschema-rs validator or None when it is not installed, the jsonschema validator), built once."""
    global _validator
    if _validator is None:
        import jsonschema

        with open(schema_path(), encoding="utf-8") as fh:
            schema = json.load(fh)
        try:
            import jsonschema_rs
        except ImportError:
            fast = None
        else:  # formats not checked, as jsonschema does without a FormatChecker
            fast = jsonschema_rs.validator_for(_rs_schema(schema), validate_formats=False)
        _validator = (fast, jsonschema.validators.validator_for(schema)(schema))
    return _validator


def validate(spec: dict) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``spec`` follows the Vega-Lite schema (tests only).

    The spec checked is its JSON form (``_json_form``). The verdict is jsonschema-rs's (the
    test extra; ~700x faster than jsonschema on the specs of a report, which made a fifth to a third of a test's
    report); a spec it refuses is checked again with jsonschema, which raises its error with the path of the
    problem (and a disagreement is an error of its own). Without jsonschema-rs, or for an object JSON cannot say,
    jsonschema checks it alone. Either way, the rows of a top-level data set (``datasets`` or ``data.values``)
    that ``_rows_valid`` accepts are replaced by ``[]`` first (the schema allows both at those places, so the
    verdict is the same), and with jsonschema alone a spec whose ``repr`` was already found valid in this process
    is not checked again."""
    fast, full = _validators()
    if isinstance(spec, dict):
        sets = spec.get("datasets")
        if isinstance(sets, dict) and any(_rows_valid(v) for v in sets.values()):
            spec = {**spec, "datasets": {k: [] if _rows_valid(v) else v for k, v in sets.items()}}
        data = spec.get("data")
        if isinstance(data, dict) and _rows_valid(data.get("values")):
            spec = {**spec, "data": {**data, "values": []}}
    plain = _json_form(spec) if fast is not None else None
    if plain is not None:
        if fast.is_valid(plain):
            return
        full.validate(plain)  # raises the error, with its path
        raise RuntimeError("jsonschema-rs refuses a Vega-Lite spec that jsonschema accepts: " + repr(plain)[:2000])
    key = repr(spec)
    if key in _valid_seen:
        return
    full.validate(spec)
    _valid_seen.add(key)


#: The font of --static charts. vl-convert lays text out with the metrics of the font it is told; a browser draws
#: "sans-serif" with its own (on Linux DejaVu Sans, wider than vl-convert's default), so labels measured with the
#: default overflow their SVG ("tage 1 · rank 0"). Measured with DejaVu Sans, they fit where it is drawn, and
#: wherever it is missing the fallback sans-serif fonts (Arial, Helvetica) are narrower.
STATIC_FONT = "DejaVu Sans, sans-serif"
#: Room around a pre-rendered SVG for text a reader's font still draws a little wider than measured.
STATIC_PADDING = {"left": 24, "right": 24, "top": 8, "bottom": 8}


def static_spec(spec: dict[str, Any], width: int = STATIC_WIDTH) -> dict[str, Any]:
    """``spec`` for the pre-rendered --static SVG (``spec`` itself is not changed): every ``width: "container"``
    replaced by ``width`` px (there is no container to measure; data is left alone), text measured with
    ``STATIC_FONT``, and ``STATIC_PADDING`` around the chart unless the spec sets a padding."""
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (width if k == "width" and v == "container" else v if k in ("data", "datasets")
                        else walk(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node
    out = walk(spec)
    out["config"] = {"font": STATIC_FONT, **(out.get("config") or {})}
    out.setdefault("padding", dict(STATIC_PADDING))
    return out


# --------------------------------------------------------------------------- sizes


def fit(chart: Spec, height: int | dict) -> Spec:
    """``chart`` as wide as its figure (axes and legends included), ``height`` px (or ``{"step": n}``)."""
    return chart.properties(width="container", height=height, autosize=FIT)


def fit_concat(chart: Spec) -> Spec:
    """A concatenation of ``fit``-width views: the whole stays inside the figure."""
    return chart.properties(autosize=FIT)


def band(n: int, most: int = 40, least: int = 4, total: int = PLOT_MAX_WIDTH) -> int:
    """Band (cell) size in px for ``n`` discrete positions: as large as ``most`` but ``n`` of them within
    ``total`` px, and never below ``least`` (then the chart scrolls rather than drawing invisible cells)."""
    return max(least, min(most, total // max(1, n)))


# --------------------------------------------------------------------------- units


def in_unit(chart: Spec, factor: float, *fields: str, suffix: str = "_u") -> Spec:
    """``chart`` with ``<field><suffix> = datum[field] / factor`` for each field (drawn in the unit whose
    factor fmt.unit_for chose; the data keeps the base unit)."""
    return chart.transform_calculate(**{f + suffix: f"datum['{f}'] / {float(factor)!r}" for f in fields})


def _inline_values(spec: Any, out: dict[str, list]) -> dict[str, list]:
    """Every inline data row's values by field name (``datasets`` and ``data.values`` anywhere in ``spec``)."""
    if isinstance(spec, dict):
        rows = []
        if isinstance(spec.get("datasets"), dict):
            rows += [r for v in spec["datasets"].values() if isinstance(v, list) for r in v]
        data = spec.get("data")
        if isinstance(data, dict) and isinstance(data.get("values"), list):
            rows += data["values"]
        for r in rows:
            if isinstance(r, dict):
                for k, v in r.items():
                    out.setdefault(k, []).append(v)
        for k, v in spec.items():
            if k not in ("datasets", "data"):
                _inline_values(v, out)
    elif isinstance(spec, list):
        for v in spec:
            _inline_values(v, out)
    return out


def tooltip_formats(spec: dict) -> dict:
    """``spec`` with each quantitative tooltip field of the general number format (:data:`fmt.D3_FORMAT`) in the
    format its inline values need (:func:`fmt.d3_format`: an exponent below 1e-4, as the tables write them), in
    place. A field computed in the spec (no inline values) keeps its format."""
    values = _inline_values(spec, {})

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            tips = node.get("tooltip")
            for t in (tips if isinstance(tips, list) else [tips] if isinstance(tips, dict) else []):
                if not isinstance(t, dict) or t.get("type") != "quantitative" or t.get("formatType"):
                    continue
                vals = values.get(t.get("field"))
                if "format" not in t:  # a count (every value an integer) reads 1,234; any other number as fmt writes it
                    ints = vals and all(isinstance(v, int) or (isinstance(v, float) and v.is_integer())
                                        for v in vals if v is not None)
                    t["format"] = fmt.D3_INT if ints else fmt.d3_format(vals or ())
                elif t["format"] == fmt.D3_FORMAT and vals:
                    t["format"] = fmt.d3_format(vals)
            for k, v in node.items():
                if k not in ("datasets", "data"):
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return spec


def tip(field: str, title: str, unit: str = "", kind: str = "", **kw) -> dict:
    """A tooltip row: quantitative ``field`` with its unit in the title and the report's number format
    (``kind='ratio'`` shows a 0..1 field as percent)."""
    if kind == "ratio":
        return Tooltip(f"{field}:Q", title=title, format=fmt.D3_PCT, **kw)
    return Tooltip(f"{field}:Q", title=fmt.header(title, kind, unit) if unit else title, format=fmt.D3_FORMAT,
                       **kw)


def axis(title: str, unit: str = "", kind: str = "", **kw) -> dict:
    """Title and number format of a quantitative axis (or legend) in ``unit``."""
    return {"title": fmt.header(title, kind, unit) if (unit or kind in ("ratio", "pct")) else title,
            "format": fmt.D3_PCT if kind == "ratio" else fmt.D3_FORMAT, **kw}


def metric_switch(param: str, metrics: dict[str, tuple[str, str, Any]]) -> tuple[str, dict]:
    """For a chart whose metric a control switches (signal ``param``): ``metrics`` = {column: (label, fmt kind,
    values)}; each column gets its own unit (fmt.unit_for). Returns the Vega expression of the drawn value
    (``datum[column] / factor``) and the parameter ``<param>_units`` = {column: [title with unit, factor]}; the
    title of the chosen metric is ``<param>_units[<param>][0]`` (for a title, an axis or legend labelExpr)."""
    units = {}
    for col, (label, kind, values) in metrics.items():
        unit, factor = fmt.unit_for(kind, values)
        units[col] = [fmt.header(label, kind, unit), factor]
    return (f"datum[{param}] / {param}_units[{param}][1]",
            _param(name=f"{param}_units", value=units))


# --------------------------------------------------------------------------- colour


def role_color(field: str, parts: Iterable[tuple[str, str]], title: str | None = None,
               legend: bool = True) -> dict:
    """Colour by the meaning of each part: ``parts`` = [(label, palette role), ...] in stacking/legend order."""
    parts = list(parts)
    return Color(f"{field}:N", title=title, sort=[label for label, _ in parts],
                     scale=Scale(**palette.role_scale(parts)),
                     legend=Legend(orient="top") if legend else None)


def stage_color(field: str, stages: Iterable, title: str = "Stage", legend: bool = True) -> dict:
    """Colour by pipeline stage: ``stages`` = the field's values, stage numbers as text ("0", "1", ...);
    anything else ("none") takes the 'other' colour."""
    values = list(dict.fromkeys(stages))
    scale = {"domain": values, "range": [palette.identity(int(v)) if str(v).isdigit() else palette.ROLE["other"]
                                         for v in values]}
    return Color(f"{field}:N", title=title, scale=Scale(**scale),
                     legend=Legend(orient="top") if legend else None)


def identity_color(field: str, values: Iterable, title: str, legend: bool = True) -> dict:
    """Colour by an identity (host, group index), in the given order."""
    values = list(dict.fromkeys(values))
    return Color(f"{field}:N", title=title, scale=Scale(**palette.identity_scale(values)),
                     legend=Legend(orient="top", columns=10) if legend else None)


def sequential(domain: list | None = None) -> dict:
    """Scale for an amount (palette.SEQUENTIAL): over ``domain``, by default from zero to the largest value (an
    amount read from its min to its max would make a 0.1% difference look like the whole range)."""
    return Scale(scheme=palette.SEQUENTIAL, **({"domain": domain} if domain is not None else {"domainMin": 0}))


def median_domain(values: Iterable[Any], reference: float | None = None) -> list[float] | None:
    """[low, median, high] of a diverging heatmap scale: centred on the median of ``values`` (the steps in
    scope), as wide as the largest deviation but never narrower than ±th.HEATMAP_MIN_SPAN × ``reference``
    (default: the median itself; heatmaps of parts of a step pass the median step time) and never below zero.
    None without a finite value."""
    vals = [float(v) for v in values if v is not None and v == v and abs(float(v)) != float("inf")]
    if not vals:
        return None
    mid = statistics.median(vals)
    ref = abs(reference if reference is not None else mid)
    span = max(max(abs(v - mid) for v in vals), th.HEATMAP_MIN_SPAN * ref)
    if span == 0:
        span = 1.0  # every value 0: any span keeps the scale valid
    return [fmt.clean(max(0.0, mid - span)), fmt.clean(mid), fmt.clean(mid + span)]


def diverging(domain: list | dict) -> dict:
    """Scale for "below / above the median" (palette.DIVERGING): ``domain`` = [low, median, high] (or an
    expression giving it); values beyond it take the end colours."""
    return Scale(domain=domain, scheme=palette.DIVERGING, reverse=palette.DIVERGING_REVERSE, clamp=True)


def ink(position_expr: str, diverging_scale: bool = False) -> dict:
    """Colour of text drawn on a coloured cell, from the cell's position on its scale (a Vega expression
    0..1): light ink on the dark end(s) of the scale, dark ink elsewhere."""
    if diverging_scale:
        dark = f"abs(({position_expr}) - 0.5) > 0.3"
    else:
        dark = f"({position_expr}) < {palette.SEQUENTIAL_LIGHT_FROM}"
    return condition(dark, value(palette.INK_ON_DARK), value(palette.INK_ON_LIGHT))


def scale_position(chart: Spec, field: str, domain: list | None = None) -> Spec:
    """``chart`` with ``pos`` = where ``field`` sits on its ``sequential`` colour scale (0..1): on ``domain`` when
    the scale has a fixed one, else from zero to the rows' largest value (the scale's default domain)."""
    if domain is None:
        return (chart.transform_joinaggregate(vmax=f"max({field})")
                .transform_calculate(pos=f"datum.vmax > 0 ? clamp(datum['{field}'] / datum.vmax, 0, 1) : 0"))
    lo, hi = float(domain[0]), float(domain[-1])
    return chart.transform_calculate(pos=f"clamp((datum['{field}'] - {lo!r}) / {hi - lo!r}, 0, 1)")


def cell_labels(base: Spec, text: dict, tooltip: list | None = None, size: int = 10) -> Spec:
    """Values written on the cells of a sequential heatmap whose rows carry ``pos`` (``scale_position``), in the
    ink that reads on each cell."""
    return base.mark_text(fontSize=size).encode(text=text, color=ink("datum.pos"), tooltip=tooltip or [])


def shade_in_scope(chart: Spec, value_expr: str, domain_expr: str) -> Spec:
    """Colour value ``shade`` for median heatmaps: ``value_expr`` (a Vega expression over the row, e.g.
    ``datum.x``) as it is: the scale's domain (``domain_expr``, [low, median, high], computed without the warm-up
    steps) is fixed and clamped, so a value beyond it (a warm-up step, reportgen/facts.py) takes the END colour
    (issue 27 #23: it was clamped to the largest in-scope value, which a 1,381 ms warm-up painted like a 337 ms
    step). ``beyond`` = 1 above the domain's high end, -1 below its low end, else 0 (the heatmap marks those
    cells). Rows keep ``value`` for their tooltip."""
    return (chart.transform_calculate(value=value_expr)
            .transform_calculate(shade="datum.value",
                                 beyond=f"datum.value > ({domain_expr})[2] ? 1 : "
                                        f"datum.value < ({domain_expr})[0] ? -1 : 0"))


#: the glyph on a heatmap cell whose value is beyond the colour scale's span (above / below)
BEYOND_MARK = {1: "▲", -1: "▼"}


def stacked_parts(base: Spec, parts: list[tuple[str, str]], x: dict, unit: str, factor: float,
                  tooltip: list, height: int = 280) -> Spec:
    """Per-rank stacked bars of the parts of a step, as wide as the figure. ``base`` rows (already filtered to
    one step) carry ``ms`` (the part, base unit), ``step_ms``, ``phase`` (the part's label) and ``order``;
    ``parts`` = [(label, palette role)] in stacking order; ``tooltip`` = the rows' identifying fields."""
    chart = in_unit(base, factor, "ms", "step_ms").mark_bar().encode(
        x=x, y=Y("ms_u:Q", stack="zero", axis=Axis(**axis("Time", unit))),
        color=role_color("phase", parts), order=Order("order:Q"),
        tooltip=tooltip + [Tooltip("phase:N", title="Part"), tip("ms_u", "Time", unit),
                           tip("step_ms_u", "Step", unit)])
    return fit(chart, height)


#: rows of a rank × step heatmap at most: beyond, ranks are grouped (:func:`bin_ranks`), so the chart stays within
#: ~600 px at any rank count with cells tall enough to read their colour (1024 ranks drew 512 rows of 2 px: 1,300 px)
HEATMAP_MAX_RANK_ROWS = 96


def bin_ranks(df, cols: list[str], max_rows: int | None = None, keep=(),
              first: tuple = ("warmup",)) -> tuple[Any, int]:
    """``df`` (one row per rank and step: ``rank``, ``step``, ``cols`` and the ``first`` columns) with its ranks in
    groups of consecutive ranks so that at most ``max_rows`` rows remain, each cell the group's maximum; the ranks of
    ``keep`` (those findings name) keep a row of their own. Returns (frame, ranks per group; 1: not grouped). A
    grouped row's ``rank`` is its first rank, ``rank_last`` its last and ``ranks`` says which ranks it holds
    ("512–519"). At most half the rows go to ``keep`` ranks (the first of them, in their order)."""
    max_rows = HEATMAP_MAX_RANK_ROWS if max_rows is None else max_rows
    ranks = sorted(int(r) for r in df["rank"].unique())
    if len(ranks) <= max_rows:
        return df, 1
    have = set(ranks)
    keep = set(list(dict.fromkeys(int(r) for r in keep if int(r) in have))[:max_rows // 2])  # half the rows at most
    per_bin = math.ceil(len(ranks) / max(1, max_rows - len(keep)))
    pos = {r: i for i, r in enumerate(ranks)}
    out = df.copy()
    own = out["rank"].isin(keep).to_numpy()
    idx = out["rank"].map(pos).to_numpy()
    out["_bin"] = np.where(own, -1 - out["rank"].to_numpy(), idx // per_bin)
    named = {c: (c, "max") for c in cols if c in out}
    named.update({c: (c, "max") for c in first if c in out and c not in named})
    named.update({c: (c, "first") for c in out.columns if c not in named and c not in ("_bin", "step", "rank")})
    named.update({"rank_min": ("rank", "min"), "rank_max": ("rank", "max")})
    g = out.groupby(["_bin", "step"], as_index=False).agg(**named)
    lo, hi = g["rank_min"].astype(int), g["rank_max"].astype(int)
    g["ranks"] = [str(a) if a == b else f"{a}–{b}" for a, b in zip(lo, hi)]
    g["rank"], g["rank_last"] = lo, hi
    return g.drop(columns=["_bin", "rank_min", "rank_max"]), per_bin


def median_heatmap(df, metrics: dict[str, str], *, param: str, y_title: str = "Rank", reference: str | None = None,
                   tooltip: list | None = None, legend_title: str = "Time") -> Spec:
    """Rank × step heatmap of times, coloured by the difference from the median (``diverging``).

    ``df``: one row per (rank, step) with ``warmup`` and the ``metrics`` columns (base unit ms; {column: label});
    the signal ``param`` picks the metric drawn (its first column by default). Each metric's scale is centred on
    the median of the steps in scope (warm-up steps left out: they take the end colour, ``shade_in_scope``),
    with at least ±th.HEATMAP_MIN_SPAN × the median of the ``reference`` column (the step time) as its span.
    ``tooltip``: the rows' identifying fields besides rank and step."""
    cols = list(metrics)
    unit, factor = fmt.unit_for("ms", df[cols].to_numpy().ravel())
    warm = df["warmup"].astype(bool)
    scope = df[~warm] if not warm.all() else df
    ref = float(scope[reference].median()) / factor if reference and reference in scope else None
    domains = {k: median_domain(scope[k] / factor, ref) or [0.0, 0.5, 1.0] for k in cols}
    n_steps, n_ranks = df["step"].nunique(), df["rank"].nunique()
    domain = f"{param}_domains[{param}]"
    legend = Legend(**axis(legend_title, unit), values={"expr": domain}, gradientLength=120)
    base = in_unit(shade_in_scope(Chart(df), f"datum[{param}] / {float(factor)!r}", domain), factor, *cols)
    x, y = X("step:O", title="Step", axis=Axis(labelAngle=0)), Y("rank:O", title=y_title)
    tips = ([Tooltip("ranks:N", title="Ranks") if "ranks" in df else Tooltip("rank:O", title="Rank"),
             Tooltip("step:O", title="Step")] + (tooltip or [])
            + [tip(f"{k}_u", label, unit) for k, label in metrics.items()])
    cells = base.mark_rect().encode(
        x=x, y=y, color=Color("shade:Q", scale=diverging({"expr": domain}), legend=legend), tooltip=tips)
    # cells beyond the span are at the end colour AND carry a glyph, so they do not read as the span's end
    marks = base.transform_filter("datum.beyond != 0").transform_calculate(
        mark=f"datum.beyond > 0 ? '{BEYOND_MARK[1]}' : '{BEYOND_MARK[-1]}'").mark_text(fontSize=9).encode(
        x=x, y=y, text=field("mark:N"), color=value(palette.INK_ON_DARK), tooltip=tips)
    return (layer(cells, marks)
            .add_params(_param(name=param, value=cols[0]), _param(name=f"{param}_domains", value=domains))
            .properties(width={"step": band(n_steps, 48)}, height={"step": band(n_ranks, 24, 2, 600)}))


WARMUP_CAPTION = (" Warm-up steps are left out of the scale's median and span; a value beyond the span takes the "
                  f"end colour and is marked {BEYOND_MARK[1]} (above) or {BEYOND_MARK[-1]} (below).")
MEDIAN_CAPTION = (f" Colour = difference from the median of the steps in scope: blue below it, red above it, "
                  f"light near it; the scale spans at least ±{th.HEATMAP_MIN_SPAN * 100:g}% of the median step time, "
                  "so jitter stays pale.")


#: chart parameters a finding's view sets to highlight what it is about (report.EvidenceView)
FOCUS_RANKS, FOCUS_LINKS = "focus_ranks", "focus_links"
_FOCUS_MARKS = {"bar", "rect", "square", "circle", "point", "tick", "arc"}
_FOCUS_TESTS = {FOCUS_RANKS: "indexof(focus_ranks, datum.rank) >= 0",
                # the finding's links; a finding about ranks only (no link): the links those ranks send on
                FOCUS_LINKS: "length(focus_links) ? indexof(focus_links, datum.src_rank + '>' + datum.dst_rank) >= 0"
                             " : indexof(focus_ranks, datum.src_rank) >= 0"}


def _field(enc: dict, channel: str) -> str | None:
    d = enc.get(channel)
    return d.get("field") if isinstance(d, dict) else None


def _focus_unit(unit: dict[str, Any], used: set[str]) -> dict[str, Any]:
    mark = unit["mark"] if isinstance(unit["mark"], dict) else {"type": unit["mark"]}
    enc = unit.get("encoding") or {}
    if mark.get("type") not in _FOCUS_MARKS or "stroke" in enc or "strokeWidth" in enc:
        return unit
    xy = {_field(enc, "x"), _field(enc, "y")}
    name = FOCUS_LINKS if {"src_rank", "dst_rank"} <= xy else FOCUS_RANKS if "rank" in xy else None
    if name is None:
        return unit
    used.update({name, FOCUS_RANKS})
    test = _FOCUS_TESTS[name]
    return {**unit, "encoding": {
        **enc, "stroke": {"condition": {"test": test, "value": "currentColor"}, "value": mark.get("stroke")},
        "strokeWidth": {"condition": {"test": test, "value": 2.5},
                        "value": mark.get("strokeWidth", 1 if mark.get("stroke") else 0)}}}


def _focus(spec: dict[str, Any], used: set[str]) -> dict[str, Any]:
    out = _focus_unit(spec, used) if "mark" in spec else dict(spec)
    for key in ("layer", "hconcat", "vconcat", "concat"):
        if isinstance(spec.get(key), list):
            out[key] = [_focus(sub, used) if isinstance(sub, dict) else sub for sub in spec[key]]
    if isinstance(spec.get("spec"), dict):
        out["spec"] = _focus(spec["spec"], used)
    return out


def focusable(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` with the highlight a finding's link switches on (report.EvidenceView): bars, cells and
    points whose x or y is the rank (``focus_ranks``), or whose x / y are a link's destination / source rank
    (``focus_links``, "src>dst"; without links, those the focused ranks send on), get an outline in the page's text colour while the parameter lists them. Both
    start empty, so the chart looks the same until a finding sets them; ``spec`` itself is not changed."""
    used: set[str] = set()
    out = _focus(spec, used)
    if not used:
        return spec
    out["params"] = list(spec.get("params") or []) + [{"name": n, "value": []} for n in sorted(used)]
    return out


# --------------------------------------------------------------------------- many ranks
#
# Beyond th.PAGE_RANKS_ALL ranks a per-rank bar chart draws th.ranks_shown ranks only (issue 15, goal 2). These helpers
# give the three sections that cut (trajectory, overlap, communication) the same rule for the ranks findings add, the
# same note and the chart of every rank that sits beside the cut one.

#: bins of a per-rank distribution (``rank_distribution``): Rice's rule (2·n^(1/3) bins for n ranks) within these
#: bounds; 256 ranks -> 13 bins, 4096 -> 32, so the chart holds a few dozen rows at any rank count
DIST_BINS = (10, 40)
#: height (px) of the distribution chart's histogram and of the rug under it (the ranks the bar chart draws)
DIST_HEIGHT, DIST_RUG_HEIGHT = 110, 16


def finding_ranks(findings) -> list[int]:
    """The ranks the findings name, for ``th.ranks_shown``'s ``named``: at most th.PAGE_RANKS_EXTREMES of them,
    taken in turn from each finding (every finding's first rank, then every finding's second...). A finding about a
    whole stage or host names hundreds of ranks at scale (1024 ranks in 4 stages: 256); they must not all come back
    into a chart meant to draw a few."""
    lists = [list(dict.fromkeys(int(r) for r in f.ranks)) for f in findings]
    out: dict[int, None] = {}
    for i in range(max(map(len, lists), default=0)):
        for ranks in lists:
            if len(out) >= th.PAGE_RANKS_EXTREMES:
                return list(out)
            if i < len(ranks):
                out.setdefault(ranks[i])
    return list(out)


def named_ranks(a) -> list[int]:
    """The ranks every rank sample of a section's views keeps: its own findings' ranks (:func:`finding_ranks`) and
    those any finding of the page names (the analysis's focus, reportgen/focus.py), in that order."""
    from . import focus
    out = dict.fromkeys(finding_ranks(a.findings))
    out.update(dict.fromkeys(focus.of(a).ranks))
    return list(out)


def rank_cut_note(shown: list[int], total: int, by: str, table: str) -> str:
    """The note of a section whose per-rank charts draw ``shown`` ranks of ``total``: ``th.ranks_shown_note``, where
    every rank is drawn (``rank_distribution``) and how to see any one rank (the per-rank table ``table``)."""
    return (th.ranks_shown_note(shown, total, by) + f" The distribution chart below the bars counts all {total:,} ranks; "
            f"to see any one rank, type its id in the Rank filter of the table '{table}', or look it up in the metrics "
            f"JSON (--json) when the page had no room for it.")


def rank_distribution(fid: str, values: pd.Series, shown: list[int], label: str, what: str) -> Figure:
    """Histogram of ``values`` (one per rank, indexed by rank, base unit ms) over every rank, binned here (a few dozen
    rows at any rank count, ``DIST_BINS``), with a tick under the bars for each of the ``shown`` ranks (those the cut
    bar chart draws). ``label``: the quantity ("Step time"); ``what``: what a value is ("average over the steps in
    scope"). Ranks without a value (NaN) are left out and the caption says how many."""
    v = pd.to_numeric(values, errors="coerce").astype(float)
    v = v[np.isfinite(v.to_numpy())]
    unit, factor = fmt.unit_for("ms", v)
    k = min(DIST_BINS[1], max(DIST_BINS[0], math.ceil(2 * len(v) ** (1 / 3))))
    counts, edges = np.histogram(v.to_numpy(), bins=k) if len(v) else (np.zeros(0, int), np.zeros(1))
    bins = [{"lo": float(lo), "hi": float(hi), "ranks": int(c)} for lo, hi, c in zip(edges[:-1], edges[1:], counts)]
    marks = [{"rank": int(r), "ms": float(v[r])} for r in shown if r in v.index]
    # enough significant digits that neighbouring bin edges read differently (ranks 0.05% apart: 194.862, 194.869)
    width = float(edges[1] - edges[0]) / factor if len(edges) > 1 else 0.0
    top = float(np.abs(edges).max()) / factor if len(edges) else 0.0
    sig = max(4, math.ceil(math.log10(top / width)) + 1) if width > 0 and top > 0 else 4
    edge_fmt = f",.{min(sig, 12)}~r"
    x_axis = {**axis(label, unit), "format": edge_fmt}
    bars = in_unit(Chart(bins), factor, "lo", "hi").mark_bar(color=palette.ROLE["compute_range"], binSpacing=0,
                                                              stroke=palette.ROLE["compute"], strokeWidth=0.5).encode(
        x=X("lo_u:Q", scale=Scale(zero=False), axis=Axis(**{**x_axis, "title": None}, labels=False, ticks=False)),
        x2=X("hi_u:Q"), y=Y("ranks:Q", axis=Axis(title="Ranks", format=fmt.D3_INT, tickMinStep=1)), y2={"datum": 0},
        tooltip=[Tooltip("lo_u:Q", title=fmt.header("From", "ms", unit), format=edge_fmt),
                 Tooltip("hi_u:Q", title=fmt.header("To", "ms", unit), format=edge_fmt),
                 Tooltip("ranks:Q", title="Ranks", format=fmt.D3_INT)])
    # the ranks the bar chart draws: a rug under the histogram, on the same x scale
    rug = in_unit(Chart(marks), factor, "ms").mark_tick(color="currentColor", thickness=1.5).encode(
        x=X("ms_u:Q", axis=Axis(**x_axis)),
        tooltip=[Tooltip("rank:O", title="Rank"), Tooltip("ms_u:Q", title=fmt.header(label, "ms", unit),
                                                          format=edge_fmt)])
    chart = fit_concat(vconcat(bars.properties(width="container", height=DIST_HEIGHT),
                               rug.properties(width="container", height=DIST_RUG_HEIGHT), spacing=2)
                       .resolve_scale(x="shared"))
    left = len(values) - len(v)
    spread = (f" From the lowest to the highest rank: {fmt.percent((v.max() - v.min()) / v.median())} of the median."
              if len(v) and v.median() > 0 else "")
    caption = (f"How many of the {len(v):,} ranks fall in each of {k} equal ranges of {label.lower()} ({what}); a tick "
               f"under the bars marks each of the {len(marks)} ranks the bar chart above draws.{spread}"
               + (f" {left:,} ranks without a value are left out." if left else ""))
    return Figure(fid, f"{label} of every rank: distribution", to_spec(chart),
                  caption=caption, alt=f"Histogram of {label.lower()} over all ranks")
