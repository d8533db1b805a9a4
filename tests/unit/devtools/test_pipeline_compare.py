"""The main job's --format/--compare options (issue 41): what they accept and refuse, the topics a
comparison writes, its table's ratios, and which Spark connector release it picks."""

from __future__ import annotations

import pytest

from kafka_core.devtools.brokers.spark_connector import (
    SPARK_CONNECTOR_VERSION,
    connector_version_for,
    maven_releases,
)
from kafka_core.devtools.pipeline.data import Aggregates, Fingerprint
from kafka_core.devtools.pipeline.job import (
    COMPARE_ROUNDS,
    PHASES,
    Leg,
    compare_rows,
    leg_topic,
    parse_args,
)


def test_default_is_kafka_core_alone() -> None:
    args = parse_args([])
    assert (args.formats, args.rounds, args.compare) == (["kafka_core"], 1, False)


def test_format_kafka_runs_the_connector_alone() -> None:
    assert parse_args(["--format", "kafka"]).formats == ["kafka"]


def test_compare_runs_both_formats_in_three_rounds_by_default() -> None:
    args = parse_args(["--compare"])
    assert (args.formats, args.rounds) == (["kafka_core", "kafka"], COMPARE_ROUNDS)
    assert parse_args(["--compare", "--rounds", "5"]).rounds == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--format", "parquet"], "invalid choice: 'parquet'"),
        (["--compare", "--format", "kafka"], "--compare runs both formats: leave out --format"),
        (["--rounds", "3"], "--rounds goes with --compare"),
        (["--compare", "--rounds", "0"], "--rounds: must be positive"),
    ],
)
def test_bad_combinations_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_each_leg_of_a_comparison_has_its_own_topic() -> None:
    assert leg_topic("orders-1", "kafka_core", 1, False) == "orders-1"
    topics = {leg_topic("orders-1", f, r, True) for f in ("kafka_core", "kafka") for r in (1, 2, 3)}
    assert len(topics) == 6 and "orders-1-kafka-core-r2" in topics
    assert len(leg_topic("t" * 249, "kafka_core", 1, True)) == 249


def _leg(fmt: str, round_no: int, seconds: float) -> Leg:
    fp = Fingerprint(1000, 1000, 0, 0, 0, 0)  # type: ignore[arg-type]
    agg = Aggregates({}, {}, [], 0, {}, 0, 0, 0)
    timings = {key: seconds for key, _ in PHASES}
    return Leg(fmt, round_no, timings, fp, fp, agg, 2)


def test_the_table_gives_the_ratio_of_the_medians() -> None:
    legs = [
        _leg("kafka_core", 1, 1.0),
        _leg("kafka", 1, 2.0),
        _leg("kafka", 2, 4.0),
        _leg("kafka_core", 2, 10.0),  # an outlier round: the median ignores it
        _leg("kafka_core", 3, 2.0),
        _leg("kafka", 3, 3.0),
    ]
    rows = {title: (ours, theirs, ratio) for title, ours, theirs, ratio in compare_rows(legs, 1000)}
    ours, theirs, ratio = rows["write"]
    assert ours == [1000.0, 100.0, 500.0] and theirs == [500.0, 250.0, 1000 / 3]
    assert ratio == pytest.approx(500.0 / (1000 / 3))
    # the whole job: the phases summed, five of them here
    assert rows["whole job"][2] == pytest.approx(ratio)


METADATA = """<metadata><versioning><release>4.2.0-preview5</release><versions>
<version>3.5.6</version><version>4.1.3</version><version>4.2.0</version>
<version>4.2.0-preview5</version><version>4.10.0-preview1</version></versions></versioning></metadata>"""


def test_releases_leave_previews_out_and_sort_by_number() -> None:
    assert maven_releases(METADATA) == ["3.5.6", "4.1.3", "4.2.0"]
    assert maven_releases("<metadata><version>4.10.0</version><version>4.9.1</version></metadata>") == [
        "4.9.1",
        "4.10.0",
    ]


def test_the_connector_is_the_running_pysparks_when_maven_has_it_else_the_newest() -> None:
    releases = maven_releases(METADATA)
    assert connector_version_for("4.1.3", releases) == ("4.1.3", "the running pyspark's own")
    version, why = connector_version_for("4.3.0", releases)
    assert version == "4.2.0" and "none for the running pyspark 4.3.0" in why
    assert connector_version_for("4.3.0", [])[0] == SPARK_CONNECTOR_VERSION


def test_the_embedded_broker_is_apache_kafka_when_the_connector_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert parse_args([]).broker == "tansu"
    assert parse_args(["--compare"]).broker == "kafka"
    assert parse_args(["--format", "kafka"]).broker == "kafka"
    assert parse_args(["--compare", "--broker", "tansu"]).broker == "tansu"


def test_broker_goes_without_bootstrap_servers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--broker", "kafka", "--bootstrap-servers", "127.0.0.1:9092"])
    assert "leave it out with --bootstrap-servers" in capsys.readouterr().err


def test_without_a_release_for_the_running_pyspark_the_newest_runs_on_it_or_the_job_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyspark

    from kafka_core.devtools.brokers import spark_connector
    from kafka_core.devtools.pipeline import job

    monkeypatch.delenv("KAFKA_CORE_PIPELINE_CONNECTOR", raising=False)
    monkeypatch.setattr(pyspark, "__version__", "9.9.0")
    monkeypatch.setattr(spark_connector, "connector_version_for", lambda running: ("4.2.0", "the newest"))
    monkeypatch.setattr(spark_connector, "connector_jars", lambda version: [f"kafka-{version}.jar"])
    assert parse_args(["--compare"]).connector_spark == "running"
    on_running = job.connector(["--compare"], "running")
    assert on_running.version == "4.2.0" and on_running.jars == ["kafka-4.2.0.jar"]
    assert "built for Spark 4.2.0, run on pyspark 9.9.0" in on_running.describe()

    moved: list[list[str]] = []

    def execve(python: object, argv: list[str], env: dict[str, str]) -> None:
        moved.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(spark_connector, "connector_python", lambda version: f"/venv-{version}/python")
    monkeypatch.setattr(job.os, "execve", execve)
    with pytest.raises(SystemExit):
        job.connector(["--compare", "--connector-spark", "matching"], "matching")
    assert moved == [
        [
            "/venv-4.2.0/python",
            "-m",
            "kafka_core.devtools.pipeline",
            "--compare",
            "--connector-spark",
            "matching",
        ]
    ]


def test_json_figures_keep_each_rounds_seconds_and_the_checks() -> None:
    from kafka_core.devtools.pipeline.job import Console, Run, figures

    args = parse_args(["--compare", "--rounds", "2", "--events", "1000", "--bootstrap-servers", "h:1"])
    run = Run(args, "h:1", "h:1", "orders", 4, "abc", Console(), timings={"spark": 3.0, "source": 2.0})
    run.legs = [
        _leg("kafka_core", 1, 1.0),
        _leg("kafka", 1, 2.0),
        _leg("kafka", 2, 4.0),
        _leg("kafka_core", 2, 3.0),
    ]
    run.checks = [("batch read == generated", True), ("stream == batch read", False)]
    out = figures(run, 1000)
    assert out["seconds"]["kafka_core"]["write"] == [1.0, 3.0] and out["seconds"]["kafka"]["stream"] == [
        2.0,
        4.0,
    ]
    assert out["ratios"]["write"] == pytest.approx(((1000 + 1000 / 3) / 2) / ((500 + 250) / 2))
    assert (out["events"], out["rounds"], out["partitions"], out["startup_s"]) == (
        1000,
        2,
        4,
        {"spark": 3.0, "source": 2.0},
    )
    assert out["passed"] is False and {"name": "stream == batch read", "ok": False} in out["checks"]
    import json

    json.dumps(out)  # what --json writes
