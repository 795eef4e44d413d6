"""The Python leader rule against leaders a real 4-node run committed (node logs:
`committed B<round>(<digest>, <author's first 8 hex digits>, ...)`)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.faults.leader import committee_names, leader_index, leader_name

# The committee file of that run, node i's key at position i.
NAMES = [
    "f42cfc75f040557800f65b0a7349600e8aba05226caafada578a716aa7d87a1a",
    "3d8b8b0724dfbb71f95952304584497c2ad48ea126ce266fd5a45dfe000b71c4",
    "4f6bd3c9d49be268653455f9fe8194a84e51c61bd95a8ed889a0ca5826919d23",
    "8cfbfb35623ce215325a1925f4479210792d8091db7b3b29f7db9488df74fbff",
]
# Round -> author of the block committed for it, from that run's log.
COMMITTED = {
    1: "4f6bd3c9",
    2: "8cfbfb35",
    3: "f42cfc75",
    4: "3d8b8b07",
    5: "4f6bd3c9",
    19: "f42cfc75",
}


def test_leaders_match_the_blocks_a_real_run_committed() -> None:
    for round_, author in COMMITTED.items():
        assert leader_name(NAMES, round_).startswith(author)
        assert NAMES[leader_index(NAMES, round_)].startswith(author)


def test_leader_index_is_the_position_in_the_committee_file(tmp_path: Path) -> None:
    path = tmp_path / "committee.json"
    path.write_text(json.dumps({"authorities": {name: {"stake": 1} for name in NAMES}}))
    names = committee_names(path)
    assert names == NAMES
    assert [leader_index(names, r) for r in range(8)] == [1, 2, 3, 0, 1, 2, 3, 0]
