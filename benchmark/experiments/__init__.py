"""Named experiments: `fab experiment NAME` runs one end to end and writes its results page,
`docs/results/NAME.md`, with its plots beside it (`runner.py`, `page.py`). Each experiment
(a module here) says which `fab local` configurations (or criterion benches) it runs, full and
`--quick`, and how their
summaries become tables and plots; every number of a page comes from the runs it made."""

from __future__ import annotations

from .diemvm import DIEMVM
from .dilation import DILATION
from .experiment import Configuration, Experiment, Outcome
from .fault_scenarios import FAULTS
from .leaders import LEADERS
from .links import LINKS
from .modes import MODES
from .multi_region import MULTI_REGION
from .overload import OVERLOAD
from .parallel_execution import PARALLEL
from .scale import SCALE, SCALE_CORES, SCALE_CORES_36
from .store import STORE
from .workloads import WORKLOADS_EXPERIMENT

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        MODES,
        MULTI_REGION,
        FAULTS,
        WORKLOADS_EXPERIMENT,
        STORE,
        OVERLOAD,
        LEADERS,
        PARALLEL,
        SCALE,
        SCALE_CORES,
        SCALE_CORES_36,
        LINKS,
        DIEMVM,
        DILATION,
    )
}

__all__ = ["EXPERIMENTS", "Configuration", "Experiment", "Outcome"]
