"""Benchmark harness of HotMove, in layers: the run's configuration at the top level, then
`faults`, `analysis`, `report`, `plots`, `aws`, and `runners` and `experiments` above them (see
README.md). `fabfile.py` at the repository root holds only thin `fab` tasks over this package."""
