"""The one label of each quantity the report names in several sections (issue 28: "Computation (incl. idle)" in one
place and "(incl. free)" in another for the same quantity). A section's column, legend or sentence naming one of
these quantities takes its label from here; tests/test_labels_units.py checks that every table of a report labels
one metric key one way.

Labels name the quantity without its unit (the renderer adds the unit: fmt.header)."""

from __future__ import annotations

#: computation measured as the step minus the communication not overlapped (MindInsight step trace: the device's
#: idle time cannot be told apart from its computation)
COMPUTATION_INCL_FREE = "Computation (incl. free)"

#: metric key -> its label, wherever a table, a legend or a tooltip names it
LABELS: dict[str, str] = {
    "step_ms": "Step time",
    "step_interval_ms": "Step interval (data wait)",
    "computing_ms": "Computing",
    "comm_not_overlapped_ms": "Communication not overlapped",
    "overlapped_ms": "Communication overlapped",
    "free_ms": "Free (idle device)",
    "preparing_ms": "Preparing time (step start to first device op)",
    "computation_incl_free_ms": COMPUTATION_INCL_FREE,
    "comm_busy_ms": "Communication busy (union)",
    "flops_per_s": "Rate",
    "delta_ms": "Delta",
    "waited_ms": "Waited for others (sum over calls)",
    "src_rank": "Source",
    "dst_rank": "Destination",
}


def label(key: str) -> str:
    """The label of metric ``key`` (KeyError for a key without one: add it to :data:`LABELS`)."""
    return LABELS[key]

#: the option that sets the gradient bucket / fusion size, per framework (Run.framework): advice names the run's own
#: framework's option, both where the framework is unknown or mixed
FUSION_OPTION = {"pytorch": "DDP bucket_cap_mb", "mindspore": "all_reduce_fusion_config",
                 "": "all_reduce_fusion_config in MindSpore, DDP bucket_cap_mb in PyTorch"}


def group_label(values) -> str:
    """The label of a column of process groups, which in Kineto traces without collective records holds the CUDA
    stream a communication kernel ran on ("stream 84"): "Group or stream" then, "Group" otherwise."""
    return "Group or stream" if any(isinstance(v, str) and v.startswith("stream ") for v in values) else "Group"


def group_column(df, key: str = "group", **kw):
    """A table column of ``df[key]`` (process groups, or streams: :func:`group_label`)."""
    from .report import Column

    values = []
    if df is not None and key in df:
        try:  # each distinct value once (a group repeats in every row of its ops)
            values = df[key].unique()
        except TypeError:  # unhashable values
            values = df[key].tolist()
    return Column(key, group_label(values), "text", **kw)
