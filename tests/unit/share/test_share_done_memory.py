"""DoneMemory: the share consumer's memory of acknowledged offsets, kept as runs."""

from __future__ import annotations

from kafka_core.share.records import DoneMemory


def test_a_range_is_remembered_as_one_run_and_found_offset_by_offset() -> None:
    m = DoneMemory(100)
    m.add_offsets("t", 0, range(10, 20))
    assert len(m) == 10
    assert ("t", 0, 10) in m and ("t", 0, 19) in m
    assert ("t", 0, 9) not in m and ("t", 0, 20) not in m
    assert ("t", 1, 15) not in m and ("u", 0, 15) not in m


def test_single_offsets_and_runs_of_several_partitions() -> None:
    m = DoneMemory(100)
    m.add_offsets("t", 0, (1, 2, 3, 7))
    m.add_offsets("t", 1, range(1, 3))
    m.add_offsets("t", 0, [8])
    assert {o for o in range(10) if ("t", 0, o) in m} == {1, 2, 3, 7, 8}
    assert {o for o in range(10) if ("t", 1, o) in m} == {1, 2}
    assert len(m) == 7


def test_only_the_newest_limit_offsets_are_kept() -> None:
    m = DoneMemory(5)
    m.add_offsets("t", 0, range(0, 4))
    m.add_offsets("t", 1, range(0, 4))  # 8 remembered: the 3 oldest go
    assert len(m) == 5
    assert [o for o in range(4) if ("t", 0, o) in m] == [3]
    assert all(("t", 1, o) in m for o in range(4))
    m.add_offsets("t", 2, range(0, 10))  # more than the limit at once: its newest 5
    assert len(m) == 5
    assert [o for o in range(10) if ("t", 2, o) in m] == [5, 6, 7, 8, 9]
    assert ("t", 1, 3) not in m


def test_empty_range_and_odd_keys() -> None:
    m = DoneMemory(5)
    m.add_offsets("t", 0, range(3, 3))
    assert len(m) == 0
    assert "t" not in m and ("t", 0) not in m
