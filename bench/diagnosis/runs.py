"""The diagnosis benchmark's runs: how each is made and what is wrong with it (the ground truth).

Each run is a real multi-rank PyTorch training on CPU (gloo on 127.0.0.1) made by ``train_diag.py`` with at most
ONE injected problem. ``truth`` says where the cause is, in the terms a finding names it:

* ``cause``: ``compute`` (a rank computes more), ``dataloader`` (a rank's input pipeline is slow), ``link`` (one
  point-to-point transfer is late), ``overlap`` (communication that could hide behind compute does not),
  ``stage`` (a pipeline stage has more work), ``launch`` (a rank is bound by host-side op launches),
  ``memory`` (a rank holds more memory); None for a clean run.
* ``ranks``: the rank(s) at the cause; ``link``: [src, dst] in global ranks; ``stage``: the stage as the report numbers stages (1-based).

Layouts: ``dp2tp2`` = 4 ranks (DDP over dp, TP pairs {0,1} {2,3}); ``dp2pp2tp2`` = 8 ranks (stage 0 = ranks 0-3,
stage 1 = ranks 4-7, pipeline pairs {r, r+4}).
"""

L4 = ["--dp", "2", "--tp", "2", "--pp", "1"]
L8 = ["--dp", "2", "--tp", "2", "--pp", "2"]

RUNS = {
    # clean runs of each layout (several: the noise of a shared machine is part of the test)
    "clean4_a": dict(args=L4, truth=None),
    "clean4_b": dict(args=L4 + ["--seed", "7"], truth=None),
    "clean4_c": dict(args=L4 + ["--tp-ring-exchange"], truth=None),
    "clean8_a": dict(args=L8, truth=None),
    "clean8_b": dict(args=L8 + ["--seed", "11"], truth=None),
    # one problem each
    "slowrank4": dict(args=L4 + ["--slow-rank", "2", "--slow-iters", "40", "--slow-dim", "384"],
                      truth=dict(cause="compute", ranks=[2])),
    "slowrank8": dict(args=L8 + ["--slow-rank", "6", "--slow-iters", "40", "--slow-dim", "384"],
                      truth=dict(cause="compute", ranks=[6])),
    "slowlayer8": dict(args=L8 + ["--slow-layer", "2", "--slow-layer-rank", "5", "--slow-layer-iters", "30", "--slow-dim", "384"],
                       truth=dict(cause="compute", ranks=[5])),
    "loader4": dict(args=L4 + ["--loader-rank", "2", "--loader-ms", "400"],
                    truth=dict(cause="dataloader", ranks=[2])),
    "loader8": dict(args=L8 + ["--loader-rank", "0", "--loader-ms", "400"],
                    truth=dict(cause="dataloader", ranks=[0])),
    "p2p8": dict(args=L8 + ["--p2p-slow-src", "3", "--p2p-ms", "150"],
                 truth=dict(cause="link", ranks=[3], link=[3, 7])),
    "syncgrad4": dict(args=L4 + ["--sync-grad"], truth=dict(cause="overlap", ranks=[])),
    "stages8": dict(args=L8 + ["--layers", "6", "--stage-layers", "1,5"],
                    truth=dict(cause="stage", ranks=[4, 5, 6, 7], stage=2)),
    "launch4": dict(args=L4 + ["--launch-rank", "1", "--launch-ops", "6000"],
                    truth=dict(cause="launch", ranks=[1])),
    "memory4": dict(args=L4 + ["--mem-rank", "3", "--mem-gb", "1.5"],
                    truth=dict(cause="memory", ranks=[3])),
    # holdout: the same classes at other places and layouts (not used to set any threshold)
    "clean4_d": dict(args=L4 + ["--seed", "23", "--microbatches", "3"], truth=None, holdout=True),
    "clean8_c": dict(args=L8 + ["--seed", "5", "--microbatches", "3"], truth=None, holdout=True),
    "slowrank4_b": dict(args=L4 + ["--slow-rank", "1", "--slow-iters", "30", "--slow-dim", "384"],
                        truth=dict(cause="compute", ranks=[1]), holdout=True),
    "slowlayer4": dict(args=L4 + ["--slow-layer", "1", "--slow-layer-rank", "3", "--slow-layer-iters", "30",
                                  "--slow-dim", "384"], truth=dict(cause="compute", ranks=[3]), holdout=True),
    "loader4_b": dict(args=L4 + ["--loader-rank", "0", "--loader-ms", "250"],
                      truth=dict(cause="dataloader", ranks=[0]), holdout=True),
    "p2p8_b": dict(args=L8 + ["--p2p-slow-src", "0", "--p2p-ms", "100"], truth=dict(cause="link", ranks=[0], link=[0, 4]),
                   holdout=True),
    "stages8_b": dict(args=L8 + ["--layers", "6", "--stage-layers", "5,1"],
                      truth=dict(cause="stage", ranks=[0, 1, 2, 3], stage=1), holdout=True),
    "launch8": dict(args=L8 + ["--launch-rank", "6", "--launch-ops", "4000"], truth=dict(cause="launch", ranks=[6]),
                    holdout=True),
    "memory8": dict(args=L8 + ["--mem-rank", "4", "--mem-gb", "1.0"], truth=dict(cause="memory", ranks=[4]),
                    holdout=True),
}
