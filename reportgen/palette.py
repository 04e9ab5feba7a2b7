"""The report's colours: one meaning per colour, in every chart, light and dark.

Three kinds of colour, never mixed in one scale:

* **Meaning** (``ROLE``): what a stretch of time is spent on. Computation is always blue, communication
  orange, waiting for a peer red, idle grey... A chart that stacks or compares parts of a step colours each
  part by its role (``role_scale``), so orange means communication on every chart of the report.
* **Identity** (``IDENTITY``): which pipeline stage, host or group a rank belongs to. A separate categorical
  list whose hues are not the meaning hues; a chart coloured by identity always titles its legend
  ("Stage", "Host", "dp index"). Ranks are never coloured on a sequential scale: a rank id is a name, not an
  amount.
* **Amount**: a value on a continuous scale. ``SEQUENTIAL`` (viridis: perceptually even, readable by
  colour-blind readers, no end that vanishes on both a white and a dark page) for amounts from zero
  (shares, bytes, FLOPs); ``DIVERGING`` for "faster / slower than the median" heatmaps (blue below, red
  above, the median light; domain from ``charts.median_domain``).

Every colour is chosen to stay visible on the light page (#fff) and the dark page (#15181c). Chart text,
axes, rules and legend symbols carry no colour in the specs: the theme (assets/charts.js) gives them the
page's text colour, so they follow dark mode. Text drawn ON a coloured cell is the one exception: it uses
``INK_ON_LIGHT`` / ``INK_ON_DARK`` chosen by the cell's lightness (``charts.cell_text``), which does not
depend on the page theme.

The print palette is the same: every meaning colour prints distinguishably on white paper and in greyscale
by lightness (blue, orange, red, grey and brown differ in lightness).
"""

from __future__ import annotations

from typing import Iterable

#: Meaning -> colour. The keys are the roles a chart part can take.
ROLE: dict[str, str] = {
    "compute": "#4c78a8",         # blue: computation (forward+backward, computing, kernels)
    "comm": "#f58518",            # orange: communication the step waits for (exposed, not overlapped)
    "compute_range": "#9ecae9",   # light blue: the spread of computation / step time over ranks (a band)
    "comm_overlapped": "#fdae6b",  # light orange: communication hidden under computation
    "wait": "#e45756",            # red: waiting for a peer inside a collective (synchronisation)
    "free": "#8c8c8c",            # grey: the device idles (free time)
    "receive": "#b279a2",         # purple: pipeline receive / bubble
    "memcpy": "#72b7b2",          # teal: memory copies
    "data_wait": "#9d755d",       # brown: step interval / preparing (waiting for input data)
    "tail": "#54a24b",            # green: tail of the step (gradient sync + parameter update)
    "other": "#bab0ac",           # light warm grey: anything the profiler does not split further
    "memory": "#17becf",          # cyan: memory in use
}

#: Identity colours (stages, hosts, groups), in order: stage 0 is always IDENTITY[0]. Hues apart from ROLE's.
IDENTITY: list[str] = ["#8c6bc8", "#d4a017", "#e377c2", "#8c6d31", "#9c9ede", "#637939", "#ad494a", "#a05195",
                       "#bcbd22"]

#: Vega scheme for amounts from zero.
SEQUENTIAL = "viridis"
#: Vega scheme for deviations from the median (reversed so below the median is blue and above is red).
#: The same for marks drawn on the page background (graph nodes): its darkest and lightest ends left out, so
#: every mark stands out from a white and from a dark page.
SEQUENTIAL_ON_BACKGROUND = {"name": "viridis", "extent": [0.4, 0.8]}
DIVERGING = "redblue"
DIVERGING_REVERSE = True

#: Text drawn on a coloured cell: dark ink on light cells, light ink on dark cells (theme independent).
INK_ON_LIGHT = "#1c2128"
INK_ON_DARK = "#ffffff"
#: viridis (and the diverging ends) are dark below this position of the scale (0..1) and light above it.
SEQUENTIAL_LIGHT_FROM = 0.55

#: Every colour literal a chart spec may carry; tests check specs against it.
ALL: frozenset[str] = frozenset([*ROLE.values(), *IDENTITY, INK_ON_LIGHT, INK_ON_DARK])


def ink(fill: str) -> str:
    """The ink (INK_ON_LIGHT or INK_ON_DARK) with the higher contrast on a cell of colour ``fill`` (#rrggbb)."""
    def lum(c: str) -> float:
        ch = [int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    bg = lum(fill)
    on_dark = (lum(INK_ON_DARK) + 0.05) / (bg + 0.05)
    on_light = (bg + 0.05) / (lum(INK_ON_LIGHT) + 0.05)
    return INK_ON_DARK if on_dark >= on_light else INK_ON_LIGHT


def role_scale(parts: Iterable[tuple[str, str]]) -> dict:
    """Vega-Lite scale for a colour field whose values are labels: ``parts`` = [(label, role), ...] in legend
    order. Unknown roles raise (a new part must be given a meaning here first)."""
    parts = list(parts)
    return {"domain": [label for label, _ in parts], "range": [ROLE[role] for _, role in parts]}


def distinguishable(n: int) -> bool:
    """Can ``n`` identities (hosts, dp indices) each take a colour of their own? Beyond :data:`IDENTITY`'s colours
    they repeat, and a colour no longer names one host: encode the identity by position or label instead."""
    return n <= len(IDENTITY)


def identity(i: int) -> str:
    """The identity colour of stage (host, group) number ``i``: the same stage has the same colour in every
    chart."""
    return IDENTITY[int(i) % len(IDENTITY)]


def identity_scale(values: Iterable, numbers: Iterable[int] | None = None) -> dict:
    """Vega-Lite scale for identity values (stage labels, host names) in legend order. Value i gets
    ``identity(numbers[i])`` (for stages: the stage number) or, without ``numbers``, ``identity(i)``."""
    values = list(values)
    nums = list(numbers) if numbers is not None else list(range(len(values)))
    return {"domain": values, "range": [identity(n) for n in nums]}


#: The role of each time column of the run model: a column drawn as a part of a step takes its role's colour.
ROLE_OF_COLUMN: dict[str, str] = {
    "step_interval_ms": "data_wait", "preparing_ms": "data_wait",
    "fp_bp_ms": "compute", "computing_ms": "compute", "computation_incl_free_ms": "compute", "other_ms": "compute",
    "tail_ms": "tail",
    "comm_ms": "comm", "comm_not_overlapped_ms": "comm", "comm_not_overlapped_exclude_receive_ms": "comm",
    "comm_overlapped_ms": "comm_overlapped",
    "wait_ms": "wait",
    "free_ms": "free",
    "receive_only_ms": "receive", "bubble_ms": "receive",
    "memcpy_ms": "memcpy",
}


def column_parts(phases: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """[(label, role)] for [(column, label)] phases of a step (ROLE_OF_COLUMN)."""
    return [(label, ROLE_OF_COLUMN[col]) for col, label in phases]


__all__ = ["ROLE", "IDENTITY", "SEQUENTIAL", "SEQUENTIAL_ON_BACKGROUND", "DIVERGING", "DIVERGING_REVERSE",
           "INK_ON_LIGHT", "INK_ON_DARK", "SEQUENTIAL_LIGHT_FROM", "ALL", "ROLE_OF_COLUMN", "ink", "role_scale",
           "identity", "identity_scale", "column_parts"]
