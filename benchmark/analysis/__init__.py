"""From a run's logs to its numbers: METRICS records and the node's description of the pipeline
in, the summary out, grouped as the printed summary is.

- At the top: what every group reads (`metrics`, `counters`, `samples`, `node_lives`, `stats`,
  `pipeline`), the run's window and throughput (`throughput`), the timelines saved with a result
  (`timelines`), the summary put together (`run_summary`) and the saved results (`results`).
- `stages/`: the stage table, each stage's CPU, the limiting stage and its rules, the capacity
  projection and the cost model.
- `consensus/`: the rounds and the hops of sample transactions.
- `audit/`: the audit after every run and the report of a run with faults.
- `resources/`: CPU and memory, network traffic, energy, cost, profiles.

Groups import the top level and one another in one direction (stages read consensus and
resources; nothing reads stages back). It knows nothing of how the processes were run
(runners) or how the numbers are printed (report) or drawn (plots)."""
