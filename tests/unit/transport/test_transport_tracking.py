"""The transport's commit tracking: handled offsets in, commit offsets out (no broker)."""

from __future__ import annotations

import pytest

from kafka_core.client.metadata import TopicPartition
from kafka_core.transport.tracking import CommitTracker

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def fetched(tracker: CommitTracker, tp: TopicPartition, offsets: list[int]) -> None:
    for off in offsets:
        tracker.fetched(tp, off)


def test_nothing_handled_commits_nothing() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1, 2])
    assert tracker.commit_offsets() == {}


def test_commit_is_one_past_the_last_handled_record() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1, 2])
    tracker.handled(TP, 0)
    tracker.handled(TP, 1)
    assert tracker.commit_offsets() == {TP: 2}
    tracker.handled(TP, 2)
    assert tracker.commit_offsets() == {TP: 3}


def test_never_commits_past_a_record_not_handled() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1, 2, 3])
    tracker.handled(TP, 0)
    tracker.handled(TP, 2)  # handled out of order: 1 is still pending
    tracker.handled(TP, 3)
    assert tracker.commit_offsets() == {TP: 1}
    tracker.handled(TP, 1)
    assert tracker.commit_offsets() == {TP: 4}


def test_gaps_in_offsets_compaction_or_markers() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [5, 9, 10])
    tracker.handled(TP, 5)
    assert tracker.commit_offsets() == {TP: 6}
    tracker.handled(TP, 9)
    assert tracker.commit_offsets() == {TP: 10}
    tracker.handled(TP, 10)
    assert tracker.commit_offsets() == {TP: 11}


def test_partitions_are_independent() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1])
    fetched(tracker, TP1, [7, 8])
    tracker.handled(TP1, 7)
    assert tracker.commit_offsets() == {TP1: 8}
    assert tracker.commit_offsets([TP]) == {}
    tracker.handled(TP, 0)
    assert tracker.commit_offsets([TP]) == {TP: 1}


def test_committed_offsets_are_not_returned_again() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1])
    tracker.handled(TP, 0)
    offsets = tracker.commit_offsets()
    tracker.committed(offsets)
    assert tracker.commit_offsets() == {}
    assert tracker.last_committed() == {TP: 1}
    tracker.handled(TP, 1)
    assert tracker.commit_offsets() == {TP: 2}


def test_a_stuck_record_holds_the_commit_across_batches() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1])
    tracker.handled(TP, 0)  # 1 failed under "stop": never handled
    fetched(tracker, TP, [2, 3])
    tracker.handled(TP, 2)
    tracker.handled(TP, 3)
    assert tracker.commit_offsets() == {TP: 1}


def test_redelivered_lower_offset_keeps_the_lowest_pending_first() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [4, 5])
    tracker.fetched(TP, 3)  # out of fetch order
    tracker.handled(TP, 4)
    tracker.handled(TP, 5)
    assert tracker.pending(TP) == [3]
    assert tracker.commit_offsets() == {TP: 3}


def test_forget_drops_revoked_partitions() -> None:
    tracker = CommitTracker()
    fetched(tracker, TP, [0, 1])
    tracker.handled(TP, 0)
    tracker.committed(tracker.commit_offsets())
    tracker.forget([TP])
    assert tracker.commit_offsets() == {}
    assert tracker.last_committed() == {}
    # Assigned again later and fetched from the group's commit: tracked afresh.
    fetched(tracker, TP, [1])
    tracker.handled(TP, 1)
    assert tracker.commit_offsets() == {TP: 2}


def test_handling_an_unknown_record_is_an_error() -> None:
    tracker = CommitTracker()
    with pytest.raises(ValueError, match="not fetched"):
        tracker.handled(TP, 0)
    fetched(tracker, TP, [0])
    tracker.handled(TP, 0)
    with pytest.raises(ValueError, match="already handled"):
        tracker.handled(TP, 0)
