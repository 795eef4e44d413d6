"""The flags of the analysis reach the processes and the summary: `--executor-delay-us`,
`--no-instrumentation`, `--profile`, `--project-cores`, `--instance-price` (flag or settings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.analysis.options import AnalysisOptions, AnalysisOptionsError
from benchmark.aws.settings import Settings, SettingsError
from benchmark.config import BenchParameters, ConfigError
from benchmark.flags import FlagError, optional_float, sweep_from_flags
from benchmark.runners.commands import movevm_command, node_command
from benchmark.runners.plan import RunPlan

from .conftest import described_flags, standin_bench

EXAMPLE = Path(__file__).resolve().parents[1] / "settings.example.json"


def _node(bench: BenchParameters, profile: str | None = None) -> list[str]:
    return node_command(
        "node",
        keys="k",
        committee="c",
        parameters="p",
        genesis="g",
        bench=bench,
        flags=described_flags(bench.mode),
        profile=profile,
    )


def test_executor_delay_and_profile_reach_the_node_command() -> None:
    bench = BenchParameters(mode="hotmove", executor_delay_us=250)
    command = _node(bench, profile="logs/profile-node-0")
    assert command[command.index("--executor-delay-us") + 1] == "250"
    assert command[-2:] == ["--profile", "logs/profile-node-0"]
    plain = _node(BenchParameters(mode="hotcrypto"))
    assert "--executor-delay-us" not in plain
    assert "--profile" not in plain
    movevm = BenchParameters(mode="movevm")
    assert movevm_command("client", movevm, described_flags("movevm"), None, "d")[-2:] == [
        "--profile",
        "d",
    ]


def test_no_instrumentation_reaches_the_node_command_from_its_flag() -> None:
    [point] = sweep_from_flags({"no_instrumentation": True})
    assert point.no_instrumentation
    assert "--no-instrumentation" in _node(point)
    [default] = sweep_from_flags({"no_instrumentation": None})
    assert "--no-instrumentation" not in _node(default)
    assert BenchParameters.from_dict(point.to_dict()).no_instrumentation


def test_executor_delay_is_checked() -> None:
    with pytest.raises(ConfigError, match="needs an executor"):
        described_flags("hotstuff").check(BenchParameters(mode="hotstuff", executor_delay_us=10))
    with pytest.raises(ConfigError, match="must be at least 0"):
        described_flags("hotcrypto").check(BenchParameters(mode="hotcrypto", executor_delay_us=-1))
    [point] = sweep_from_flags({"executor_delay_us": "40", "channel_capacity": "2"})
    assert (point.executor_delay_us, point.node.channel_capacity) == (40, 2)
    [point] = sweep_from_flags({"max_uncommitted_bytes": "33554432"})
    assert point.node.max_uncommitted_bytes == 33554432


def test_analysis_options() -> None:
    assert AnalysisOptions().to_config() == {"project_cores": 4}
    assert AnalysisOptions(2, 0.5).to_config() == {"project_cores": 2, "instance_price": 0.5}
    with pytest.raises(AnalysisOptionsError):
        AnalysisOptions(project_cores=0)
    with pytest.raises(AnalysisOptionsError):
        AnalysisOptions(instance_price=-1.0)
    assert optional_float(None, "instance_price") is None
    assert optional_float("0.25", "instance_price") == 0.25
    with pytest.raises(FlagError, match="--instance-price must be a number"):
        optional_float("cheap", "instance_price")


def test_settings_price_the_instance_type() -> None:
    data = json.loads(EXAMPLE.read_text())
    settings = Settings.from_dict(data)
    assert settings.instance_price == data["prices_usd_per_hour"][settings.instance_type]
    del data["prices_usd_per_hour"]
    assert Settings.from_dict(data).instance_price is None
    data["prices_usd_per_hour"] = {data["instances"]["type"]: "a lot"}
    with pytest.raises(SettingsError, match="positive number"):
        Settings.from_dict(data)


def test_a_profiled_local_run_summarises_its_profiles(tmp_path: Path) -> None:
    local = standin_bench(
        tmp_path,
        analysis=AnalysisOptions(project_cores=8, instance_price=0.2),
        # This run's numbers pass the audit: one that failed would fail the test.
        enforce_audit=True,
    )
    [summary] = RunPlan(local, profile=True).run(
        BenchParameters(mode="hotcrypto", nodes=4, rate=2_000, duration=2)
    )
    logs = Path(summary.config["logs"])
    assert len(list(logs.glob("profile-node-*/flamegraph.svg"))) == 4
    assert summary.profile is not None
    assert summary.profile.samples == 400
    assert summary.profile.top[0].function == "ed25519_verify"
    assert summary.config["cores"] is not None
    assert summary.config["project_cores"] == 8
    assert summary.projection is not None
    assert summary.projection.cores == 8
    assert summary.cost is not None
    assert summary.cost.instances == 4
    text = local.out.getvalue()  # type: ignore[attr-defined]
    assert "PROFILE (top functions of 400 samples" in text
    assert "60.0%" in text
    [saved] = (tmp_path / "results").glob("*.json")
    result = json.loads(saved.read_text())
    assert result["profile"]["top"][0]["function"] == "ed25519_verify"
    assert result["resources"]["series"]["node-0"]["cpu_cores"]
    assert result["timeline"]["stages"]["verifier"]["cpu_cores"]
    # The fault analysis adds its per-node commits timeline beside the per-stage one.
    assert sorted(result["commits_timeline"]["nodes"]) == ["0", "1", "2", "3"]
    assert "AUDIT: ok" in text
    assert result["cost"]["usd_per_million_tx"] is not None
    assert [hop["start"] for hop in result["hops"]][:3] == ["send", "receive", "seal"]
