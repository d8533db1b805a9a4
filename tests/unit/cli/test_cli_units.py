"""The command line's pieces without a broker: argument checks, record formatting, exit codes."""

from __future__ import annotations

import argparse
import json

import pytest

from kafka_core.cli import main
from kafka_core.cli.connect import bootstrap_servers, client_options, parse_pairs
from kafka_core.cli.consume import format_record
from kafka_core.cli.output import CliError, one_line, text_or_base64
from kafka_core.consumer.message import ConsumedMessage


def _args(**kw: object) -> argparse.Namespace:
    base = {"format": "text", "print_key": False, "print_headers": False, "key_separator": "\t"}
    return argparse.Namespace(**{**base, **kw})


MSG = ConsumedMessage("t", 2, 41, b"k", b"v\xff", [("h", b"1"), ("n", None)], 1700000000000)


def test_text_format_writes_the_bytes_as_they_are() -> None:
    assert format_record(MSG, _args()) == b"v\xff"
    assert (
        format_record(MSG, _args(print_key=True, print_headers=True, key_separator="|"))
        == b"h=1,n=null|k|v\xff"
    )
    assert format_record(ConsumedMessage("t", 0, 0, None, None), _args(print_key=True)) == b"null\tnull"


def test_json_format_keeps_text_and_marks_binary() -> None:
    data = json.loads(format_record(MSG, _args(format="json")))
    assert data == {
        "topic": "t",
        "partition": 2,
        "offset": 41,
        "timestamp": 1700000000000,
        "key": "k",
        "value": {"base64": "dv8="},
        "headers": [["h", "1"], ["n", None]],
    }
    assert text_or_base64(None) is None
    assert text_or_base64("ü".encode()) == "ü"


def test_pairs_and_client_options() -> None:
    assert parse_pairs(["a=1", "b=x=y", "c="], "--header") == [("a", "1"), ("b", "x=y"), ("c", "")]
    for bad in (["novalue"], ["=v"]):
        with pytest.raises(CliError) as info:
            parse_pairs(bad, "--header")
        assert info.value.code == 2
    args = argparse.Namespace(
        option=["request_timeout_ms=5000", "ssl_check_hostname=false", "client_id=me"], connect_timeout=3.0
    )
    opts = client_options(args)
    assert opts["request_timeout_ms"] == 5000
    assert opts["ssl_check_hostname"] is False
    assert opts["client_id"] == "me"
    assert opts["connect_timeout_ms"] == 3000
    assert opts["allow_auto_create_topics"] is False


def test_address_from_option_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:1")
    assert bootstrap_servers(argparse.Namespace(bootstrap_servers="opt:2")) == "opt:2"
    assert bootstrap_servers(argparse.Namespace(bootstrap_servers=None)) == "env:1"
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    assert bootstrap_servers(argparse.Namespace(bootstrap_servers=None)) == "localhost:9092"


def test_one_line_folds_multiline_messages() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    assert len(one_line("x" * 2000)) == 500


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["consume"],
        ["consume", "-t", "x", "--timeout", "0"],
        ["produce", "-t", "x", "--acks", "2"],
        ["topics", "create", "x", "--partitions", "many"],
        ["groups"],
        ["broker", "--port", "70000"],
        ["bench", "--records", "0"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("kafka-core")


def test_options_are_accepted_before_and_after_the_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both spellings reach the same unreachable address (port 1) and fail the same way.
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["-b", "127.0.0.1:1", "--connect-timeout", "1", "topics", "list"]) == 3
    first = capsys.readouterr().err
    assert main(["topics", "list", "-b", "127.0.0.1:1", "--connect-timeout", "1"]) == 3
    second = capsys.readouterr().err
    assert "127.0.0.1:1" in first and "127.0.0.1:1" in second


@pytest.mark.parametrize(
    ("argv", "child"),
    [
        (["-b", "h:1", "bench", "-n", "5"], ["-m", "kafka_core.devtools", "-b", "h:1", "bench", "-n", "5"]),
        (
            ["broker", "--port", "0", "--json"],
            ["-m", "kafka_core.devtools", "broker", "--port", "0", "--json"],
        ),
        (["pipeline", "--events", "9"], ["-m", "kafka_core.devtools.pipeline", "--events", "9"]),
    ],
)
def test_dev_commands_run_the_dev_tools_in_a_child(
    argv: list[str], child: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """broker, bench and pipeline run in ``python -m kafka_core.devtools...`` with the same
    arguments (the library never imports its dev tools), and end with the child's exit code."""
    import sys

    from kafka_core.cli import dev

    started: list[list[str]] = []

    class _Child:
        def __init__(self, command: list[str], env: object = None) -> None:
            started.append(command)

        def wait(self, timeout: float | None = None) -> int:
            return 7

    monkeypatch.setattr(dev.subprocess, "Popen", _Child)
    assert main(argv) == 7
    assert started == [[sys.executable, *child]]


def test_a_refused_handshake_is_not_called_an_unreachable_address() -> None:
    from kafka_core.cli.connect import unreachable
    from kafka_core.errors import KafkaAuthenticationError, KafkaConnectionError

    refused = unreachable("h:9093", KafkaAuthenticationError("TLS handshake with h:9093 failed: closed"))
    assert str(refused).startswith("the broker at h:9093 refused the connection: TLS handshake")
    assert "--bootstrap-servers" not in str(refused) and refused.code == 3
    silent = unreachable("h:9093", KafkaConnectionError("cannot connect to h:9093: refused"))
    assert "cannot reach a Kafka broker at h:9093 (set --bootstrap-servers" in str(silent)
    assert silent.code == 3
