"""`fab plot`: graphs of saved results (robustness, latency, best throughput, batch sizes), a
per-stage timeline per run and every node's commits over time with its faults."""
