"""The METRICS parser: prose is ignored, broken METRICS lines are counted and skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import MalformedLineError, load_run, parse_line, parse_text


def test_parse_line_reads_the_json_after_the_prefix() -> None:
    record = parse_line('METRICS {"role": "node", "name": "a", "time_ms": 5, "final": false}')
    assert record == {"role": "node", "name": "a", "time_ms": 5, "final": False}


def test_parse_line_ignores_prose() -> None:
    assert parse_line("2024-01-01T00:00:00Z INFO committed B12") is None
    assert parse_line("WARN METRICS are printed to stdout") is None
    assert parse_line("") is None


def test_parse_line_tolerates_a_prefix_glued_by_interleaved_output() -> None:
    record = parse_line('INFO partial line METRICS {"role": "client", "time_ms": 1}')
    assert record is not None
    assert record["role"] == "client"


@pytest.mark.parametrize(
    "line",
    [
        'METRICS {"role": "node", "time_ms": 1',  # truncated
        "METRICS {not json}",
        'METRICS {"time_ms": 1}',  # no role
        'METRICS {"role": "node"}',  # no time
        'METRICS {"role": "node", "time_ms": "soon"}',
    ],
)
def test_parse_line_rejects_broken_metrics(line: str) -> None:
    with pytest.raises(MalformedLineError):
        parse_line(line)


def test_parse_text_groups_by_process_and_sorts_by_time() -> None:
    text = "\n".join(
        [
            'METRICS {"role": "node", "name": "a", "time_ms": 2000}',
            "prose",
            'METRICS {"role": "node", "name": "a", "time_ms": 1000}',
            'METRICS {"role": "client", "name": "c", "time_ms": 1500}',
            'METRICS {"role": "node", "name": "a", "time_ms": 30',
        ]
    )
    processes = parse_text(text, "mixed.log")
    assert [(p.role, p.name) for p in processes] == [("node", "a"), ("client", "c")]
    assert [r["time_ms"] for r in processes[0].records] == [1000, 2000]
    assert processes[0].malformed == 1
    assert processes[0].source == "mixed.log"


def test_load_run_on_fixture_logs(fixtures: Path) -> None:
    run = load_run(fixtures / "hotcrypto")
    assert [p.source for p in run.nodes] == ["node-0.log", "node-1.log"]
    assert [p.source for p in run.clients] == ["client-0.log", "client-1.log"]
    assert [len(p.records) for p in run.nodes] == [11, 10]  # node-1's last line is truncated
    assert [len(p.records) for p in run.clients] == [10, 10]
    assert run.malformed_lines == 2
    assert run.nodes[0].has_final
    assert not run.nodes[1].has_final
    assert run.movevm == []


def test_load_run_sorts_numerically_and_reports_silent_files(tmp_path: Path) -> None:
    for index in (10, 2):
        (tmp_path / f"node-{index}.log").write_text(
            f'METRICS {{"role": "node", "name": "n{index}", "time_ms": 1}}\n'
        )
    (tmp_path / "client-0.log").write_text("error: could not connect\n")
    run = load_run(tmp_path)
    assert [p.source for p in run.nodes] == ["node-2.log", "node-10.log"]
    assert run.unparsed_files == ["client-0.log"]
