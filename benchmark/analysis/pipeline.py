"""A mode's pipeline as the node describes it (`node describe --mode M`): the processes that run
it, its stages in order, when a transaction is done (committed or executed) and the counter of
done transactions. The runner asks the node before each run and writes the answer beside the
run's logs (`pipeline.json`); analysis reads it there instead of deriving it from the mode's name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..config import run_tool
from ..errors import HarnessError


@dataclass(frozen=True)
class Pipeline:
    """What a mode runs, field for field as `node describe` prints it."""

    mode: str
    # The role of the processes that run it: `node` (a committee fed by clients) or `movevm`
    # (one process fed by its own generator).
    process: str
    consensus: bool
    signatures: bool
    # "native", "move", or None: nothing executes.
    execution: str | None
    # Every stage row its METRICS can report, in pipeline order (`store` only with `--store`).
    stages: tuple[str, ...]
    # The sample event at which a transaction is done: "commit" or "execute".
    done: str
    # The METRICS counter of done transactions.
    done_counter: tuple[str, ...]
    # The events nodes report of sample transactions, in order.
    sample_events: tuple[str, ...]
    # Whether the mode starts from genesis accounts.
    genesis: bool

    @property
    def executes(self) -> bool:
        return self.execution is not None

    @property
    def runs_move(self) -> bool:
        return self.execution == "move"

    @property
    def done_verb(self) -> str:
        return "executed" if self.done == "execute" else "committed"

    @classmethod
    def from_json(cls, data: object, source: str) -> Pipeline:
        if not isinstance(data, Mapping):
            raise PipelineError(f"{source}: a pipeline description is a JSON object")
        try:
            execution = data["execution"]
            pipeline = cls(
                mode=_text(data["mode"]),
                process=_text(data["process"]),
                consensus=_flag(data["consensus"]),
                signatures=_flag(data["signatures"]),
                execution=None if execution is None else _text(execution),
                stages=_texts(data["stages"]),
                done=_text(data["done"]),
                done_counter=_texts(data["done_counter"]),
                sample_events=_texts(data["sample_events"]),
                genesis=_flag(data["genesis"]),
            )
        except KeyError as error:
            raise PipelineError(f"{source}: the description has no {error}") from error
        except TypeError as error:
            raise PipelineError(f"{source}: {error}") from error
        if pipeline.done not in ("commit", "execute"):
            raise PipelineError(f"{source}: done is {pipeline.done!r}, not commit or execute")
        return pipeline

    def to_json(self) -> dict[str, Any]:
        """As `node describe` prints it (lists, not tuples)."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in asdict(self).items()
        }


class PipelineError(HarnessError):
    """The node's description of a pipeline is missing or malformed."""


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {value!r}")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return tuple(_text(item) for item in value)


# Where a run's log directory keeps the description.
FILE = "pipeline.json"


def describe(node_binary: Path, mode: str) -> Pipeline:
    """Ask the node what `mode` runs (a binary that is missing or fails: `ConfigError`)."""
    command = [str(node_binary), "describe", "--mode", mode]
    printed = run_tool(command)
    try:
        data = json.loads(printed)
    except json.JSONDecodeError as error:
        raise PipelineError(f"`{' '.join(command)}` printed no JSON: {error}") from error
    pipeline = Pipeline.from_json(data, " ".join(command))
    if pipeline.mode != mode:
        raise PipelineError(f"asked the node about mode {mode}, it described {pipeline.mode}")
    return pipeline


def save(pipeline: Pipeline, log_dir: Path) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / FILE
    path.write_text(json.dumps(pipeline.to_json(), indent=2) + "\n")
    return path


def load(log_dir: Path) -> Pipeline | None:
    """The description beside a run's logs; None when there is none (`require` says why)."""
    path = log_dir / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PipelineError(f"cannot read {path}: {error}") from error
    return Pipeline.from_json(data, str(path))


def missing_in_logs(log_dir: str) -> PipelineError:
    """The error for logs without the node's description (a run made before runs saved it):
    the mode's pipeline is not guessed from its name."""
    return PipelineError(
        f"{log_dir} has no {FILE}, the node's description of the run's pipeline (logs of a run"
        f" older than it): write it with `node describe --mode MODE > {log_dir}/{FILE}`"
    )


def missing_in_result(result: str) -> PipelineError:
    """The error for a saved result without the node's description (saved before results
    carried it)."""
    return PipelineError(
        f"{result} has no key `pipeline`, the node's description of the run's pipeline (a result"
        " older than it): rerun it, or add the key with what `node describe --mode MODE` prints"
    )
