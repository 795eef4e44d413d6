"""`scaling`: the report's axes measured on this machine, committee size and cores per node, and
a cost model fitted on some of the runs and checked against the others.

Every node runs under a CPU budget of its own (`--node-cpus`), so a point is "n nodes of X cores
each" whatever else shares the machine, and more nodes than cores stay meaningful.

* Committee: `hotstuff` and `hotcrypto` at n = 4 to 31 nodes of 0.05 cores each (31 of them and
  their clients fill the machine's 2 cores; that is where the sweep stops). Per node and per
  transaction: CPU, bytes sent and received, and per round the frames and consensus signatures.
* Cores: 4 nodes of 0.1 to 0.4 cores, and one node alone of 0.5 and 1 core: `hotcrypto`,
  `hotmove` executing sequentially and under Block-STM.
* The model (`analysis/stages/model.py`) is fitted on the points `FITTED` names and predicts
  every other one; the page prints each prediction beside what the point delivered, and the error.

A point's capacity is what it delivered at saturation: the best median over the rates it was
asked (each above what it can do), executed transactions for the modes that execute, committed
for `hotstuff`. The uncommitted bound is `COMMITTEE_BOUND` bytes per node throughout: the default
(8 MiB) lets a committee of 31 hold 248 MiB in flight before its mempools hold clients back,
which nodes of 0.05 cores take longer to receive than a round's timeout.
"""

from __future__ import annotations

from ..experiment import Experiment
from .axes import write
from .points import (
    COMMITTEE_BUDGET,
    configurations,
    rounds_per_second,
    sent_per_tx,
    txs_per_round,
)

SCALING = Experiment(
    name="scaling",
    title="Scaling: committee size and cores per node, measured, and a cost model checked",
    question=(
        "How do throughput and a node's costs grow with the committee, at a fixed CPU budget per"
        " node, and with the cores per node? Does a model fitted on some of these points"
        " predict the others? (Every node under its own CPU budget, `--node-cpus`, on this"
        " machine's 2 cores.)"
    ),
    configurations=configurations,
    write=write,
)

__all__ = ["COMMITTEE_BUDGET", "SCALING", "rounds_per_second", "sent_per_tx", "txs_per_round"]
