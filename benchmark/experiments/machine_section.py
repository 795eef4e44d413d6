"""The section of a page on the machine during its runs: the speed probe (`probe.py`) before and
after each configuration, and how far it drifted."""

from __future__ import annotations

from collections.abc import Sequence

from .experiment import Outcome
from .page import Page
from .probe import Probe, drift


def machine_section(page: Page, outcomes: Sequence[Outcome]) -> None:
    """The speed probe before and after each configuration, and how far it drifted."""
    probed = [o for o in outcomes if o.probe_before is not None]
    if not probed:
        return

    def pair(before: float, after: float | None) -> str:
        return f"{before:,.0f} / {'-' if after is None else f'{after:,.0f}'}"

    # A configuration without its `after` probe (its run was stopped before the next began, in
    # a record older than saving it at once) keeps its row, with `-` for what is missing.
    rows = [
        [
            o.configuration.label,
            pair(o.probe_before.sha256_mb_per_s, o.probe_after and o.probe_after.sha256_mb_per_s),
            pair(o.probe_before.signatures_per_s, o.probe_after and o.probe_after.signatures_per_s),
            "-" if o.probe_after is None else f"{o.probe_after.load:.2f}",
        ]
        for o in probed
        if o.probe_before is not None
    ]
    # Every probe once: a configuration's `before` is the one before it's `after` when they ran
    # in one go, and a probe of its own when only it ran again (`--only`).
    probes: list[Probe] = []
    for outcome in probed:
        for found in (outcome.probe_before, outcome.probe_after):
            if found is not None and (not probes or probes[-1] != found):
                probes.append(found)
    page.section(
        "The machine during the runs",
        "A fixed-work probe on every core before each configuration and after it"
        " (`benchmark/experiments/probe.py`: SHA-256 of 1 MiB buffers and ed25519 signing, summed"
        " over the cores), and the 1-minute load average after it: figures of configurations"
        " between which the machine drifted are not comparable to better than the drift.",
        "",
        *drift(probes),
    )
    page.table(
        [
            "configuration",
            "SHA-256 MB/s, before / after",
            "signatures/s, before / after",
            "load average after",
        ],
        rows,
    )
