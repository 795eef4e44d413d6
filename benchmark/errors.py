"""The root of the harness's own errors, so callers (the `fab` tasks) can report any of them
as a clean message without importing every module."""


class HarnessError(Exception):
    """A benchmark could not be prepared, run or analysed; the message says why."""
