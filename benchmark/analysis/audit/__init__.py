"""After a run: the audit (agreement, supply, samples, accounting) and, for a run with faults,
its fault log, commits timeline and catch-up times."""
