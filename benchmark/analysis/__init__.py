"""From a run's logs to its numbers: METRICS records and the node's description of the pipeline
in, the summary (window, throughput, latency, stage table, limiting stage), its parts (CPU,
resources, rounds, hops, projection, cost, timelines), the audit and the saved results out.
It knows nothing of how the processes were run (runners) or how the numbers are printed (report)
or drawn (plots)."""
