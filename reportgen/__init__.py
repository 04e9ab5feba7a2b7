"""reportgen: one self-contained offline HTML report of a distributed training run's profiler output."""

__version__ = "0.1.0"
