"""The committee's members in node order, and which member a short name is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.config import ConfigError
from benchmark.faults.members import committee_names, named_index

NAMES = [
    "f42cfc75f040557800f65b0a7349600e8aba05226caafada578a716aa7d87a1a",
    "3d8b8b0724dfbb71f95952304584497c2ad48ea126ce266fd5a45dfe000b71c4",
    "4f6bd3c9d49be268653455f9fe8194a84e51c61bd95a8ed889a0ca5826919d23",
    "8cfbfb35623ce215325a1925f4479210792d8091db7b3b29f7db9488df74fbff",
]


def test_members_are_in_the_order_of_the_committee_file(tmp_path: Path) -> None:
    path = tmp_path / "committee.json"
    path.write_text(json.dumps({"authorities": {name: {"stake": 1} for name in NAMES}}))
    assert committee_names(path) == NAMES
    path.write_text(json.dumps({"authorities": {}}))
    with pytest.raises(ConfigError, match="no 'authorities'"):
        committee_names(path)


def test_a_short_name_is_the_member_whose_key_it_begins() -> None:
    assert named_index(NAMES, "4F6BD3C9") == 2
    assert named_index(NAMES, "8cfbfb35") == 3
    assert named_index(NAMES, "00000000") is None
