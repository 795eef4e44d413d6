"""What a `with` block holds for a run and gives back however the block ends: its processes
(`processes.ProcessSet`), its cgroups (`cgroups.RunGroups`). A subclass says how it is given back
(`release`), and takes it in `__enter__` where taking can fail."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Released:
    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def release(self) -> None:
        raise NotImplementedError
