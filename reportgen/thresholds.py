"""Every threshold the findings use, in one place; the report shows them.

Seed rules are MindInsight 2.3.1's cluster performance helper (``parallel_proposer.py``):
../shared/research/mindinsight-cluster-profiling.md §3.8.
"""

#: A rank (or host) whose average step interval exceeds the mean of ranks by more than this
#: fraction is slow at loading data (seed rule ``step_interval``: p = s/mean - 1 > 0.2).
STEP_INTERVAL_ABOVE_MEAN = 0.20

#: Differences smaller than this share of the step time are never reported, whatever their
#: relative size (a 27 % longer 0.2 ms preparing time in an 800 ms step is noise). Departure from the
#: seed, which has no floor; its own example (+0.44 ms of a 180 ms step, 0.25 %) still fires.
MIN_EXCESS_SHARE = 0.001

#: A rank whose forward+backward time exceeds the median of the other ranks of its pipeline
#: stage by more than this fraction is a slow device (compute straggler).
FP_BP_ABOVE_STAGE_PEERS = 0.20

#: Pure (not overlapped) communication share above which the seed helper warns (data/model-parallel
#: communication rate, pipeline between-stage and within-stage rates: 10 %).
COMM_SHARE = 0.10

#: A link whose bandwidth is more than this fraction below the mean of its transport type's links is slow
#: (seed rule ``cluster_link``).
LINK_BELOW_TYPE_MEAN = 0.20
#: The fastest link of each class of transport, GB/s (a physical ceiling, never a target): a bandwidth above it is
#: impossible, so it is not a bandwidth (a clock-resolution time, or a file's figure that sums its operators'
#: bandwidths). Intra-node: NVLink 4 (H100 SXM, 900 GB/s per GPU over all its links), above Ascend HCCS (910B, 392
#: GB/s); inter-node: one 800 Gb/s NIC (InfiniBand XDR, 800G Ethernet) = 100 GB/s; PCIe 6.0 x16: 128 GB/s per
#: direction. Vendors' published figures; see research/ on the seed's link types (SDMA = on-server, RDMA = NIC).
LINK_CEILING_GBPS = {"intra-node": 900.0, "inter-node": 100.0, "PCIe": 128.0}
TRANSPORT_CLASS = {"SDMA": "intra-node", "HCCS": "intra-node", "NVLINK": "intra-node", "NVLS": "intra-node",
                   "P2P": "intra-node", "SHM": "intra-node", "RDMA": "inter-node", "IB": "inter-node",
                   "NET": "inter-node", "ROCE": "inter-node", "TCP": "inter-node", "PCIE": "PCIe"}


def link_ceiling_gbps(transport) -> float | None:
    """The fastest link of ``transport``'s class (:data:`LINK_CEILING_GBPS`); None for an unknown or on-chip
    (LOCAL) transport."""
    cls = TRANSPORT_CLASS.get(str(transport).upper())
    return LINK_CEILING_GBPS.get(cls) if cls else None


#: Links that moved less than this (MB) are left out of the slow-link rule: control messages and barriers
#: are latency-bound, so their "bandwidth" says nothing about the link (departure from the seed, which has
#: only large-op links in its data).
LINK_MIN_MB = 1.0

#: A rank whose peak memory is above this share of its device capacity is flagged ``memory_near_capacity``
#: (headroom below 10% leaves no room for fragmentation, a longer sequence or a larger micro-batch).
MEMORY_NEAR_CAPACITY = 0.90
#: A rank whose peak memory differs from its stage's median peak (all ranks' median without stages) by
#: more than this share of the median is flagged ``memory_imbalance``.
MEMORY_IMBALANCE = 0.20
#: ... and only when it also differs by more than this (MB): a few MB are no memory problem whatever the ratio
#: (clean CPU runs whose host peaks are 12-26 MB spread up to 2.9 MB, 11.8 %, from their peers' median).
#: Departure from the seed, which has no floor; it never binds above a 320 MB median, where 20 % is more.
MEMORY_IMBALANCE_MIN_MB = 64.0
#: exposed communication that grew by this share of the step since the --baseline run is named (issue 26, point 4)
BASELINE_COMM_GROWTH = 0.03
#: Seed rule ``flops_per_second``: a rank whose FLOP/s is more than this below the mean of ranks.
FLOPS_BELOW_MEAN = 0.20
#: Seed rule ``pipeline_parallel_flops``: a stage whose FLOPs per rank is more than this above the stage mean.
STAGE_FLOPS_ABOVE_MEAN = 0.20
#: Severity of the FLOPs findings by the size of the gap (the seed has none).
FLOPS_SEVERITY_HIGH_GAP = 0.50
FLOPS_SEVERITY_MEDIUM_GAP = 0.35

#: msprof-analyze advisor SlowRankAnalyzer: (max - min) of computing / exposed communication / free time across
#: ranks (here: within a pipeline stage) above this share of the mean step time flags a slow rank.
SLOW_RANK_SPREAD = 0.05
#: Collective vote (msprof-analyze slow_rank recipe): a rank is reported when it was the outlying fastest (= last
#: to arrive) in at least this many collective instances, more often than chance allows: someone always arrives
#: last, so under "nobody is slow" each vote falls on any of the n ranks of the group (p = 1/n); the rank's vote
#: count must have a binomial tail probability below this (departure: msprof-analyze lists every rank with votes).
VOTE_MIN_COUNT = 3
VOTE_P_VALUE = 0.001
#: msprof-analyze Packet Analysis: operations below these sizes are small (intra-node SDMA-class / RDMA) and
#: more than this share of small operations is flagged.
SMALL_PACKET_SDMA_MB = 16.0
SMALL_PACKET_RDMA_MB = 1.0
SMALL_PACKET_SHARE = 0.20
#: Waiting for input (step interval / preparing) above this share of the step, mean over ranks.
DATA_WAIT_SHARE = 0.05
#: msprof-analyze slow dataloader: DataLoader __next__ above this per step (ms).
DATALOADER_MS = 10.0
#: MindSpore dataset pipeline (MindInsight's bottleneck rule, thresholds ours): an operation whose input queue is at
#: least this full and whose output queue is at most QUEUE_EMPTY full holds the pipeline back.
QUEUE_FULL = 0.8
QUEUE_EMPTY = 0.2
#: MindSpore's BottleneckAnalyzer (minddata_analyzer.py): an operation whose workers each use more than this share of
#: a core is CPU-bound (more workers help); the device queue's input found empty in more than DEVICE_QUEUE_EMPTY of
#: the batches means the host does not keep up with the device.
MINDDATA_CPU_PER_WORKER = 0.75
DEVICE_QUEUE_EMPTY = 0.6
#: MindInsight's step gap (MinddataAnalyser.analyse_queue_summary): when the data queue (the device's, GetNext) was
#: empty on more than one step, a host queue empty on more than this share of the steps means the data processing is
#: too slow, else the transfer to the device is; with the host queue only, the same share means data processing.
HOST_QUEUE_EMPTY = 0.7
#: Free (idle device) time above this share of the step, mean over ranks.
LONG_FREE_SHARE = 0.10

#: msprof-analyze Bandwidth Contention: an intra-node (SDMA-class) operation that overlaps computation for at least
#: this share of its duration and moves its bytes below this fraction of the bandwidth the same transport reaches
#: without computation running (the peer compares with a fixed 18 GB/s; we with the run's own uncontended ops).
CONTENTION_OVERLAP = 0.5
CONTENTION_BELOW = 0.8

#: Warm-up steps (reportgen/facts.py): leading steps whose slowest rank took more than this many times the median
#: of the later steps' slowest-rank times are labelled warm-up and left out of headline numbers by default.
#: Compilation / communicator set-up makes the first step 3-100x a steady step on real runs (pp2x4: 12x); normal
#: jitter stays well under 2x.
WARMUP_STEP_FACTOR = 2.0

#: Heatmaps of time per rank and step colour the deviation from the median (diverging scale, median = neutral).
#: The colour saturates at the largest deviation, but never before this share of the median step time: a
#: one-step Ascend run whose ranks took 809.4-810.2 ms (0.1% apart) must not look like a straggler. Healthy
#: ranks jitter well under 1% of the step; the slow-rank rule starts at 5% (SLOW_RANK_SPREAD), so at a 2% span
#: jitter stays pale and anything approaching a finding is clearly coloured. A chart setting, not a finding
#: threshold: it is not in as_dict().
HEATMAP_MIN_SPAN = 0.02

#: Severity by the share of step time at stake (issue #8 advisor convention).
SEVERITY_HIGH_SHARE = 0.05
SEVERITY_MEDIUM_SHARE = 0.03


def severity(share_of_step: float) -> str:
    """``high`` at >= 5 % of the step time at stake, ``medium`` at >= 3 %, else ``low``."""
    if share_of_step >= SEVERITY_HIGH_SHARE:
        return "high"
    if share_of_step >= SEVERITY_MEDIUM_SHARE:
        return "medium"
    return "low"


def as_dict() -> dict[str, float]:
    return {
        "step_interval_above_mean_ratio": STEP_INTERVAL_ABOVE_MEAN,
        "fp_bp_above_stage_peers_ratio": FP_BP_ABOVE_STAGE_PEERS,
        "comm_share_ratio": COMM_SHARE,
        "min_excess_share_ratio": MIN_EXCESS_SHARE,
        "link_below_type_mean_ratio": LINK_BELOW_TYPE_MEAN,
        "link_min_mb": LINK_MIN_MB,
        "memory_near_capacity_ratio": MEMORY_NEAR_CAPACITY,
        "memory_imbalance_ratio": MEMORY_IMBALANCE,
        "memory_imbalance_min_mb": MEMORY_IMBALANCE_MIN_MB,
        "baseline_comm_growth_ratio": BASELINE_COMM_GROWTH,
        "flops_below_mean_ratio": FLOPS_BELOW_MEAN,
        "stage_flops_above_mean_ratio": STAGE_FLOPS_ABOVE_MEAN,
        "slow_rank_spread_ratio": SLOW_RANK_SPREAD,
        "vote_min_count": VOTE_MIN_COUNT,
        "vote_p_value": VOTE_P_VALUE,
        "small_packet_sdma_mb": SMALL_PACKET_SDMA_MB,
        "small_packet_rdma_mb": SMALL_PACKET_RDMA_MB,
        "small_packet_share_ratio": SMALL_PACKET_SHARE,
        "data_wait_share_ratio": DATA_WAIT_SHARE,
        "minddata_cpu_per_worker_ratio": MINDDATA_CPU_PER_WORKER,
        "device_queue_empty_ratio": DEVICE_QUEUE_EMPTY,
        "dataloader_ms": DATALOADER_MS,
        "long_free_share_ratio": LONG_FREE_SHARE,
        "contention_overlap_ratio": CONTENTION_OVERLAP,
        "contention_below_ratio": CONTENTION_BELOW,
        "warmup_step_factor": WARMUP_STEP_FACTOR,
        "severity_high_share_ratio": SEVERITY_HIGH_SHARE,
        "severity_medium_share_ratio": SEVERITY_MEDIUM_SHARE,
    }


# ---------------------------------------------------------------------------------------------------------------
# Page budget (issue 15 goal 2): the sizes at which the page and the metrics JSON switch to aggregated / cut forms.
# Not finding thresholds (not in as_dict()); the page and the JSON state every cut they make.
#
# Measured before (MindInsight synth, 10 steps): 256 ranks 11.6 MB HTML / 19 MB JSON, 1024 ranks 33 MB / 63 MB;
# the largest items were per-operator rows (communication ops: 61,440 rows at 256 ranks, 12 MB of JSON and 3.2 MB
# of page data), per-rank chart data (long form rank x step x phase: 1.6 MB per chart at 256 ranks) and 300 HTML
# rows per table (23k table cells at 256 ranks). Goal: HTML <= 10 MB, JSON <= 20 MB at any rank or step count.
# With the byte budgets below (same synth): 1024 ranks 7.6 MB / 12.7 MB (nothing cut by them), 4096 ranks
# 9.3 MB / 16.3 MB (was 13.7 / 23.7); Kineto 64 ranks x 100 steps 9.3 MB / 12.1 MB (was 12.6 / 12.1).
# ---------------------------------------------------------------------------------------------------------------

#: Per-rank charts (one bar / cell / line per rank) draw every rank up to this many ranks. Beyond it they draw the
#: :data:`PAGE_RANKS_EXTREMES` slowest and fastest ranks, the median rank and the ranks findings name; the page says
#: so, and the per-rank tables (every rank, paged; their CSV) and the metrics JSON keep every rank.
PAGE_RANKS_ALL = 128
#: ranks at each end (slowest / fastest) a per-rank chart keeps beyond :data:`PAGE_RANKS_ALL`
PAGE_RANKS_EXTREMES = 16
#: rows of a table the page lists at once; "List more" (table.js) lists as many more from the embedded rows, and sorting
#: and the filters cover every embedded row. A page of 1,024 ranks lists ~30 tables: at 100 rows each they were 35k of
#: its 69k elements (issue 28 #8: 20k for the whole page)
PAGE_TABLE_ROWS = 25
#: rows of a table the --static page lists (it has no script to list more; the metrics JSON has the rest)
STATIC_TABLE_ROWS = 100
#: rows of one table embedded in the page (the CSV download, the filters and the pages); beyond it the page keeps
#: the first rows in the section's order (its most important: slowest / longest first) and says how many it left out
PAGE_EMBEDDED_ROWS = 20_000
#: rows of one per-operator table (name ending in ``ops``: one row per operator instance or operator name and rank)
#: in the metrics JSON, the longest kept; the section's ``tables_left_out`` says how many rows were cut and which were
#: kept, and so does the page. Per-rank tables are never cut (up to metrics.MAX_TABLE_ROWS).
JSON_OP_ROWS = 20_000
#: rows of one per-(rank, step) table (columns ``rank`` and ``step``) in the metrics JSON: whole steps, every rank of
#: each, the first steps (4096 ranks: 4 steps; 1024 ranks: 19); ``tables_left_out`` says which steps were kept
JSON_STEP_ROWS = 20_000
#: a metrics JSON holding more table rows than this is written without indentation (a third smaller)
JSON_INDENT_ROWS = 20_000
#: size of the page (characters of HTML). The rows of the tables embedded in the page for the filters and the CSV
#: downloads share what the rest of the page leaves of it (render.fit_table_data: per-rank tables first, then the
#: others, by :func:`fair_shares`); the page says, per table, how many rows it left out.
PAGE_BYTES = 9_500_000
#: size of the charts' data in the page (render.share_chart_data's store); above it the charts holding the most data
#: are left out, each with a note (4096 MindInsight ranks x 10 steps: 3.6 MB)
PAGE_CHART_BYTES = 5_000_000
#: size of the metrics JSON (characters). Per-operator and per-(rank, step) tables share what the rest of the file
#: leaves of it (document.plan_cuts, :func:`fair_shares`); per-rank tables are never cut, so a run with enough ranks
#: (about 8,000 MindInsight ranks: 2.3 kB of per-rank rows per rank) still writes every per-rank number, above this.
JSON_BYTES = 19_000_000


def fair_shares(sizes, budget: float) -> list[float]:
    """Max-min fair shares of ``budget`` among items of ``sizes``: an item smaller than an equal share keeps its
    size, the others split what is left equally (water-filling). The shares sum to at most ``budget``."""
    sizes = [max(0.0, float(x)) for x in sizes]
    out = [0.0] * len(sizes)
    left, budget = len(sizes), max(0.0, float(budget))
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        out[i] = min(sizes[i], budget / left)
        budget -= out[i]
        left -= 1
    return out


def ranks_shown(values, named=()) -> list[int] | None:
    """The ranks a per-rank chart draws: None (every rank) up to :data:`PAGE_RANKS_ALL` ranks; beyond it the
    :data:`PAGE_RANKS_EXTREMES` ranks with the highest and the lowest value, the median rank and the ``named`` ranks
    (those findings name), sorted. ``values``: rank -> the value that orders them (a pandas Series indexed by rank,
    or a dict); ties are broken by rank id."""
    items = sorted(((float(v), int(r)) for r, v in dict(values).items() if v == v), key=lambda x: (x[0], x[1]))
    ranks = {int(r) for r in dict(values)}
    if len(ranks) <= PAGE_RANKS_ALL:
        return None
    n = PAGE_RANKS_EXTREMES
    keep = {r for _, r in items[:n]} | {r for _, r in items[-n:]}
    if items:
        keep.add(items[len(items) // 2][1])
    keep |= {int(r) for r in named if int(r) in ranks}
    return sorted(keep)


def ranks_shown_note(shown: list[int], total: int, by: str) -> str:
    """The sentence a section adds when its per-rank charts draw :func:`ranks_shown` ranks only."""
    return (f"{total:,} ranks: the per-rank charts draw {len(shown)} of them (above {PAGE_RANKS_ALL} ranks), the "
            f"{PAGE_RANKS_EXTREMES} with the highest and the {PAGE_RANKS_EXTREMES} with the lowest {by}, the median "
            f"rank and up to {PAGE_RANKS_EXTREMES} ranks the findings name; the heatmaps group ranks; the metrics JSON "
            f"holds every rank, and the tables (filter them by rank) and their CSV downloads every rank the page has "
            f"room for, these ranks first (a table says how many rows it left out).")
#: a chart with more data rows than this is drawn on a canvas (one element) instead of SVG (one element per mark):
#: a 20,000-cell heatmap was 20,000 SVG paths; the --static page stays SVG
PAGE_CANVAS_ROWS = 100
