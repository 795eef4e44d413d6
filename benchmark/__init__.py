"""Benchmark harness of HotMove: local and remote runners, config files, METRICS parsing,
summaries, plots and AWS instance management. `fabfile.py` at the repository root holds only thin
`fab` tasks over this package."""
