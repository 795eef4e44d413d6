"""The printed summary of a run and the table after a sweep, from the analysis's numbers (it
never computes them, and the analysis never prints through it)."""
