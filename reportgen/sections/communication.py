"""Communication: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "communication"
TITLE = "Communication"
SOURCES = "MindSpore Insight: hccl_raw_<rank>.csv (profile with HCCL/communication data on); Ascend: communication.json and communication_matrix.json; PyTorch: NCCL/gloo collectives in the trace"

analyze, present = pending(("hccl_raw", "communication", "communication_matrix"), SOURCES)
