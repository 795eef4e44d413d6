"""Faults and network conditions of a run: the schedule (`--crash`, `--kill-leader-every`,
`--partition`), the leader of a round, the injector that carries a schedule out through a
`NodeControl` (runners implement it), the emulated links, and the log of what happened
(`faults.json`). It knows the configuration only: no analysis, no runner."""
