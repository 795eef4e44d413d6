"""Consensus as a run saw it: its rounds (timeouts, back-pressure, withheld proposals) and the
hops of sample transactions from a client's send to their commit and execution."""
