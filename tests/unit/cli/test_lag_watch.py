"""``groups lag --watch`` without a broker: the rates and trends, the rebalance count, the plain and
JSON renderings, and the loop's exits (Ctrl-C, a group that does not exist, a failed refresh)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kafka_core.admin import GroupDescription, GroupLag, MemberDescription, PartitionLag, Result
from kafka_core.cli import main, watch
from kafka_core.cli.groupwatch import Frame, frame_json, frame_text
from kafka_core.cli.lagrates import (
    Offsets,
    PartitionRates,
    RateWindow,
    RebalanceCounter,
    format_rate,
    top_by,
    totals,
    trend_text,
)
from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaConnectionError
from kafka_core.protocol.errors import ErrorCode, error_for

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def rates_of(rows: list[PartitionRates]) -> dict[TopicPartition, tuple[Any, Any, Any]]:
    return {
        TopicPartition(r.topic, r.partition): (r.lag_per_s, r.consumed_per_s, r.produced_per_s) for r in rows
    }


# -- rates and trends ------------------------------------------------------------------------------


def test_first_reading_has_no_rates_then_rates_over_the_window() -> None:
    w = RateWindow(window=2)
    first = w.add(10.0, {A0: Offsets(100, 150, 50)})
    assert rates_of(first) == {A0: (None, None, None)}
    assert w.seconds == 0
    # 2 s later: 40 consumed, 60 produced, lag up by 20
    assert rates_of(w.add(12.0, {A0: Offsets(140, 210, 70)})) == {A0: (10.0, 20.0, 30.0)}
    # against the oldest reading still in the window (t=10): 4 s
    assert rates_of(w.add(14.0, {A0: Offsets(200, 230, 30)})) == {A0: (-5.0, 25.0, 20.0)}
    assert w.seconds == 4.0
    # the t=10 reading has left the window: rates from t=12
    assert rates_of(w.add(16.0, {A0: Offsets(240, 250, 10)})) == {A0: (-15.0, 25.0, 10.0)}


def test_an_offset_that_went_back_has_no_rate_and_a_new_partition_waits_a_reading() -> None:
    w = RateWindow(window=3)
    w.add(0.0, {A0: Offsets(500, 600, 100)})
    rows = w.add(1.0, {A0: Offsets(0, 600, 600), A1: Offsets(None, 10, None)})  # offsets reset to 0
    assert rates_of(rows) == {A0: (500.0, None, 0.0), A1: (None, None, None)}
    rows = w.add(2.0, {A0: Offsets(50, 620, 570), A1: Offsets(None, 30, None)})
    # A0 still against t=0 (committed 500 -> 50: no rate); A1 from its first reading at t=1
    assert rates_of(rows) == {A0: (235.0, None, 10.0), A1: (None, None, 20.0)}


def test_readings_must_move_forward_and_the_window_be_positive() -> None:
    w = RateWindow()
    w.add(5.0, {})
    with pytest.raises(ValueError):
        w.add(5.0, {})
    with pytest.raises(ValueError):
        RateWindow(window=0)


def test_totals_sum_the_partitions_that_have_figures() -> None:
    rows = [
        PartitionRates("a", 0, 10, 20, 10, 1.5, 3.0, None),
        PartitionRates("a", 1, None, 5, None, None, None, 2.0),
        PartitionRates("b", 0, 7, 9, 2, -0.5, 1.0, 4.0),
    ]
    t = totals(rows)
    assert (t.partitions, t.lag, t.lag_per_s, t.consumed_per_s, t.produced_per_s) == (3, 12, 1.0, 4.0, 6.0)
    empty = totals([])
    assert (empty.lag, empty.lag_per_s, empty.consumed_per_s) == (0, None, None)


def test_top_by_largest_first_unknown_last() -> None:
    rows = [
        PartitionRates("t", p, None, None, lag, None, None, None)
        for p, lag in enumerate([5, None, 900, 5, 40, 0])
    ]
    order = [(r.partition, r.lag) for r in top_by(rows, None, lambda r: r.lag)]
    assert order == [(2, 900), (4, 40), (0, 5), (3, 5), (5, 0), (1, None)]
    assert [r.partition for r in top_by(rows, 3, lambda r: r.lag)] == [2, 4, 0]
    many = [PartitionRates("w", p, 0, p, p, None, None, None) for p in range(5000)]
    assert [r.lag for r in top_by(many, 3, lambda r: r.lag)] == [4999, 4998, 4997]


def test_rates_and_trends_read_as_words() -> None:
    assert [format_rate(v) for v in (None, 0, 2.54, 12.6, 1234.4, -3.25)] == [
        "-",
        "0",
        "2.5",
        "13",
        "1,234",
        "-3.2",
    ]
    assert trend_text(None) == "-"
    assert trend_text(0.01) == "steady"
    assert trend_text(12.3) == "rising 12/s"
    assert trend_text(-3.5) == "falling 3.5/s"


# -- rebalances --------------------------------------------------------------------------------------


def test_classic_rebalances_by_state_and_by_a_changed_assignment() -> None:
    one = frozenset({("m1", frozenset({A0, A1}))})
    two = frozenset({("m1", frozenset({A0})), ("m2", frozenset({A1}))})
    c = RebalanceCounter()
    assert c.observe("Stable", None, one) == 0  # the baseline
    assert c.observe("Stable", None, one) == 0
    assert c.observe("PreparingRebalance", None, frozenset()) == 1
    assert c.observe("CompletingRebalance", None, frozenset()) == 1  # the same rebalance
    assert c.observe("Stable", None, two) == 1  # its end, not another one
    assert c.observe("Stable", None, one) == 2  # began and ended between two refreshes
    assert c.observe("Empty", None, frozenset()) == 3  # the members left
    assert c.observe("Empty", None, frozenset()) == 3


def test_a_watch_that_starts_mid_rebalance_does_not_count_it() -> None:
    c = RebalanceCounter()
    assert c.observe("PreparingRebalance", None, frozenset()) == 0
    assert c.observe("Stable", None, frozenset({("m", frozenset({A0}))})) == 0


def test_kip848_rebalances_by_epoch() -> None:
    c = RebalanceCounter()
    assert c.observe("Stable", 4, frozenset()) == 0
    assert c.observe("Reconciling", 4, frozenset()) == 0  # the same epoch
    assert c.observe("Stable", 6, frozenset()) == 1
    assert c.observe("Stable", 7, frozenset()) == 2


# -- rendering -------------------------------------------------------------------------------------


def frame(**kw: Any) -> Frame:
    base: dict[str, Any] = {
        "group_id": "billing",
        "at": datetime(2026, 12, 2, 11, 30, 5, tzinfo=UTC),
        "refresh": 3,
        "interval": 2.0,
        "window_s": 4.0,
        "state": "Stable",
        "members": 2,
        "rebalances": 1,
    }
    rows = kw.pop(
        "rows",
        [
            PartitionRates("orders", 1, 1_000, 3_500, 2_500, 12.0, 100.0, 112.0),
            PartitionRates("orders", 0, 50, 60, 10, -2.5, 20.0, 17.5),
        ],
    )
    t = kw.pop("totals", totals(rows))
    return Frame(**{**base, "rows": tuple(rows), "totals": t, **kw})


def test_plain_block_has_the_totals_the_rows_and_no_escape_codes() -> None:
    text = frame_text(frame())
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == "billing: Stable, 2 members; rebalances seen 1  [11:30:05 UTC, every 2 s]"
    assert lines[1] == ("total lag 2,510 (rising 9.5/s); consumed 120/s, produced 130/s over the last 4 s")
    assert lines[2].split() == [
        "topic",
        "partition",
        "committed",
        "end",
        "lag",
        "lag",
        "trend",
        "consumed/s",
        "produced/s",
    ]
    assert lines[4].split() == ["orders", "1", "1000", "3500", "2500", "rising", "12/s", "100", "112"]
    assert lines[5].split() == ["orders", "0", "50", "60", "10", "falling", "2.5/s", "20", "18"]


def test_plain_block_of_a_first_refresh_a_wide_group_and_a_share_group() -> None:
    first = frame(window_s=0.0, rows=[PartitionRates("t", 0, 1, 2, 1, None, None, None)])
    assert "rates from the next refresh" in frame_text(first)
    assert "lag trend" in frame_text(first) and "-" in frame_text(first).splitlines()[-1]
    rows = [PartitionRates("t", 0, 1, 2, 1, None, None, None)]
    wide = frame(rows=rows, totals=totals(rows * 3000))
    assert "top 1 of 3,000 partitions by lag" in frame_text(wide)
    share = frame_text(frame(share=True, epoch=9))
    assert ", epoch 9;" in share.splitlines()[0]
    assert share.splitlines()[2].split()[:3] == ["topic", "partition", "start"]
    none = frame_text(frame(rows=[], members=0, state="Empty"))
    assert none.splitlines()[1] == "no committed offsets, so no lag to show"


def test_a_failed_refresh_says_why() -> None:
    text = frame_text(frame(error="broker 1 unreachable", totals=None, rows=[]))
    assert text.splitlines() == [
        "billing: rebalances seen 1  [11:30:05 UTC, every 2 s]",
        "refresh failed: broker 1 unreachable",
    ]


def test_json_per_refresh() -> None:
    data = json.loads(json.dumps(frame_json(frame())))
    assert data["group_id"] == "billing" and data["state"] == "Stable" and data["members"] == 2
    assert data["time"] == "2026-12-02T11:30:05+00:00"
    assert data["rebalances"] == 1 and data["error"] is None and data["partition_count"] == 2
    assert data["total"] == {"lag": 2510, "lag_per_s": 9.5, "consumed_per_s": 120.0, "produced_per_s": 129.5}
    assert data["partitions"][0] == {
        "topic": "orders",
        "partition": 1,
        "committed": 1000,
        "end": 3500,
        "lag": 2500,
        "lag_per_s": 12.0,
        "consumed_per_s": 100.0,
        "produced_per_s": 112.0,
    }


# -- the loop, through main() with an admin double ---------------------------------------------------


class FakeAdmin:
    """Answers each refresh from a script: ``(state, members, {tp: (committed, end)})`` or an
    exception to raise."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.reads = 0
        self.closed = False
        self.calls: list[str] = []

    def _now(self) -> Any:
        step = self.script[min(self.reads, len(self.script) - 1)]
        if isinstance(step, BaseException):
            self.reads += 1  # this refresh failed: the next one reads the next step
            raise step
        return step

    def describe_groups(self, ids: list[str], timeout_ms: float | None = None) -> dict[str, Any]:
        self.calls.append("describe_groups")
        step = self._now()
        if step is None:
            return {g: Result(error=error_for(ErrorCode.GROUP_ID_NOT_FOUND, g)) for g in ids}
        state, members, _ = step
        described = GroupDescription(
            ids[0], state, "consumer", "range", [MemberDescription(f"m{i}", "c", "h") for i in range(members)]
        )
        return {ids[0]: Result(described)}

    def describe_share_groups(self, ids: list[str], timeout_ms: float | None = None) -> dict[str, Any]:
        return {g: Result(error=error_for(ErrorCode.GROUP_ID_NOT_FOUND, g)) for g in ids}

    def consumer_group_lag(self, group_id: str, timeout_ms: float | None = None) -> GroupLag:
        self.calls.append("consumer_group_lag")
        step = self._now()
        self.reads += 1
        offsets = step[2] if step is not None else {}
        return GroupLag(
            group_id,
            {tp: PartitionLag(tp.topic, tp.partition, c, e, e - c) for tp, (c, e) in offsets.items()},
        )

    def close(self) -> None:
        self.closed = True


def run_watch(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin, *extra: str) -> int:
    monkeypatch.setattr(watch, "open_admin", lambda args: admin)
    return main(["groups", "lag", "billing", "--watch", "--interval", "1", *extra])


def test_watch_refreshes_until_ctrl_c_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    script = [
        ("Stable", 1, {A0: (0, 100), A1: (0, 10)}),
        ("Stable", 1, {A0: (30, 150), A1: (5, 10)}),
        ("Stable", 2, {A0: (80, 180), A1: (10, 10)}),
    ]
    admin = FakeAdmin(script)
    code = run_watch(monkeypatch, admin, "--json", "--top", "1")
    captured = capsys.readouterr()
    assert code == 0
    assert admin.closed
    frames = [json.loads(line) for line in captured.out.splitlines()]
    assert [f["refresh"] for f in frames] == [1, 2, 3]
    assert [f["total"]["lag"] for f in frames] == [110, 125, 100]
    assert frames[0]["total"]["consumed_per_s"] is None
    assert frames[1]["total"]["consumed_per_s"] == 35.0 and frames[1]["total"]["produced_per_s"] == 50.0
    assert frames[2]["total"]["lag_per_s"] == -5.0  # 110 -> 100 over 2 s
    assert [len(f["partitions"]) for f in frames] == [1, 1, 1]  # --top 1, the most lag
    assert frames[2]["partitions"][0]["partition"] == 0 and frames[2]["partition_count"] == 2
    assert [f["members"] for f in frames] == [1, 1, 2]
    assert "stopped after 3 refreshes" in captured.err


def test_piped_watch_prints_one_plain_block_per_refresh(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    admin = FakeAdmin([("Stable", 1, {A0: (0, 100)}), ("Stable", 1, {A0: (50, 100)})])
    code = run_watch(monkeypatch, admin)
    out = capsys.readouterr().out
    assert code == 0
    assert "\x1b" not in out
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 3
    assert all(b.startswith("billing: Stable, 1 member;") for b in blocks)
    assert "total lag 50 (falling 50/s); consumed 50/s, produced 0/s over the last 1 s" in blocks[1]


def test_a_group_that_does_not_exist_is_exit_4(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    admin = FakeAdmin([None])
    code = run_watch(monkeypatch, admin)
    assert code == 4
    assert capsys.readouterr().err.strip() == "kafka-core groups lag: error: group 'billing' does not exist"
    assert admin.closed


def test_a_first_refresh_that_fails_is_the_commands_error(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_watch(monkeypatch, FakeAdmin([KafkaConnectionError("broker 1 went away")]))
    assert code == 3
    assert "broker 1 went away" in capsys.readouterr().err


def test_a_later_refresh_that_fails_is_shown_and_the_watch_goes_on(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    clock[0] = 4
    script = [
        ("Stable", 1, {A0: (0, 100)}),
        KafkaConnectionError("coordinator moved"),
        ("Stable", 1, {A0: (20, 100)}),
        ("Stable", 1, {A0: (40, 100)}),
    ]
    code = run_watch(monkeypatch, FakeAdmin(script), "--json")
    frames = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [f["error"] for f in frames] == [None, "coordinator moved", None, None]
    assert [f.get("total", {}).get("lag") for f in frames] == [100, None, 80, 60]
    assert frames[3]["total"]["consumed_per_s"] == 40 / 3  # against the first reading, 3 s before


def test_a_wide_group_is_one_reading_per_refresh_and_shows_the_top(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    wide = {TopicPartition("w", p): (0, p) for p in range(3000)}
    grown = {tp: (0, end + (50 if tp.partition == 7 else 0)) for tp, (_, end) in wide.items()}
    admin = FakeAdmin([("Stable", 3, wide), ("Stable", 3, grown)])
    code = run_watch(monkeypatch, admin, "--json", "--top", "5")
    frames = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert admin.calls == ["describe_groups", "consumer_group_lag"] * 3  # the same two calls each refresh
    assert [f["partition_count"] for f in frames] == [3000] * 3
    assert [p["partition"] for p in frames[0]["partitions"]] == [2999, 2998, 2997, 2996, 2995]
    assert frames[1]["total"]["produced_per_s"] == 50.0
    assert frames[1]["total"]["lag"] == sum(range(3000)) + 50


def test_interval_and_top_need_watch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", "lag", "g", "--top", "5"]) == 2
    assert "--interval and --top go with --watch" in capsys.readouterr().err
    assert main(["groups", "lag", "g", "--watch", "--interval", "0"]) == 2
    assert main(["groups", "lag", "g", "--watch", "--top", "0"]) == 2
