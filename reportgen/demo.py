"""The embedded demo run: 16 ranks on 2 hosts, pipeline parallel with 2 stages, one slow rank.

Generated deterministically by :mod:`reportgen.synth` in the legacy MindInsight layout (rank
table + host mapping), so the report shows hosts as well as ranks.
"""

from __future__ import annotations

#: The rank whose data loading is slowed down on purpose.
DEMO_SLOW_RANK = 11
DEMO_SLOW_FACTOR = 6.0


def demo_spec():
    from .synth import MindInsightSpec

    return MindInsightSpec(hosts=2, devices_per_host=8, stages=2, steps=8, seed=7, layout="legacy",
                           host_names=["node-a", "node-b"], slow_ranks={DEMO_SLOW_RANK: DEMO_SLOW_FACTOR})
