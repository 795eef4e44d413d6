"""Running a bench: the command lines of `node` and `client`, the processes on this machine or
on remote hosts, progress while they run, the sweep over points, and after each run its
analysis (`finish.py`). It uses every other subpackage; none of them imports it."""
