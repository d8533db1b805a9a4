"""Tests of the benchmark harness itself (not of kafka_core): data, protocol, accounting, report.

pytest bench/test_harness.py              # about 20 s, starts its own Tansu for the smoke test
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from typing import Any

import pytest

from bench import report
from bench.common import (
    ERROR,
    NOT_IMPLEMENTED,
    OK,
    RESULT_PREFIX,
    NotImplementedYet,
    RunResult,
    child_main,
    e2e_table,
    make_keys,
    make_values,
    markdown_table,
    median_result,
    parse_child_output,
)
from bench.proc_tree import tree_usage


def test_values_are_deterministic_and_sized() -> None:
    for compressible in (False, True):
        a = make_values(500, 100, compressible=compressible)
        assert a == make_values(500, 100, compressible=compressible)
        assert {len(v) for v in a} == {100}
        assert a != make_values(500, 100, seed=8, compressible=compressible)
    assert {len(v) for v in make_values(10, 1000, compressible=True)} == {1000}


def test_compressible_values_compress_and_random_ones_do_not() -> None:
    text = b"".join(make_values(1000, 100, compressible=True))
    noise = b"".join(make_values(1000, 100))
    assert len(zlib.compress(text)) < 0.6 * len(text)
    assert len(zlib.compress(noise)) > 0.95 * len(noise)


def test_keys_distinct_and_sized() -> None:
    keys = make_keys(20_000)
    assert len(set(keys)) == 20_000
    assert {len(k) for k in keys} == {16}


def test_result_round_trip_and_derived_figures() -> None:
    r = RunResult("x", records=300_000, wall_s=2.0, cpu_s=3.0, extra={"note": "n"})
    back = RunResult.from_json(r.to_json())
    assert back == r
    assert back.rate == 150_000
    assert back.cpu_per_million == pytest.approx(10.0)
    assert RunResult("y", status=ERROR).rate == 0.0


def test_parse_child_output() -> None:
    good = RunResult("c", records=5, wall_s=1.0)
    out = "noise\n" + RESULT_PREFIX + good.to_json() + "\n"
    assert parse_child_output("c", out, "", 0) == good
    bad = parse_child_output("c", "nothing here", "line1\nTraceback\nValueError: boom", 1)
    assert bad.status == ERROR
    assert "ValueError: boom" in bad.detail
    assert "exit 1" in bad.detail


def _emitted(capsys: Any) -> RunResult:
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(RESULT_PREFIX)
    return RunResult.from_json(line[len(RESULT_PREFIX) :])


def test_child_main_statuses(capsys: Any) -> None:
    def missing() -> RunResult:
        raise NotImplementedYet("no producer")

    def broken() -> RunResult:
        raise AttributeError("a bug, not a missing feature")

    def fine() -> RunResult:
        return RunResult("fine", records=10, wall_s=1.0)

    runners = {"missing": missing, "broken": broken, "fine": fine}
    assert child_main("missing", runners) == 0
    assert _emitted(capsys).status == NOT_IMPLEMENTED
    child_main("broken", runners)
    got = _emitted(capsys)
    assert got.status == ERROR
    assert "AttributeError" in got.detail
    child_main("fine", runners)
    got = _emitted(capsys)
    assert got.status == OK
    assert got.rss_mb > 0
    assert child_main("nope", runners) == 2
    assert _emitted(capsys).status == ERROR


def test_missing_versus_broken_parts_of_ours(tmp_path: Any, monkeypatch: Any) -> None:
    import types

    from bench.common import our_export, our_module

    fake = types.ModuleType("kafka_core")
    fake.__all__ = ["Broken"]  # type: ignore[attr-defined]

    def lazy(name: str) -> Any:
        raise AttributeError(f"half-written module behind {name}")

    fake.__getattr__ = lazy  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "kafka_core", fake)
    with pytest.raises(NotImplementedYet):
        our_export("Absent")
    with pytest.raises(RuntimeError, match="failed to import: AttributeError: half-written"):
        our_export("Broken")
    monkeypatch.undo()

    with pytest.raises(NotImplementedYet):
        our_module("bench_no_such_package.spark")
    pkg = tmp_path / "bench_fake_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "spark.py").write_text("raise ImportError('needs something not installed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="needs something not installed"):
        our_module("bench_fake_pkg.spark")


def test_median_result() -> None:
    runs = [RunResult("c", records=100, wall_s=w) for w in (1.0, 4.0, 2.0)]
    chosen = median_result(runs)
    assert chosen.rate == 50.0
    assert chosen.extra["runs"] == [100, 25, 50]
    failed = [*runs, RunResult("c", status=ERROR, detail="boom")]
    assert median_result(failed).status == ERROR


def test_tables() -> None:
    table = markdown_table(["a", "b"], [["x|y", "z"]])
    assert "x\\|y" in table
    assert table.count("\n") == 2
    results = [
        RunResult("anchor", records=100, wall_s=1.0, cpu_s=0.5, rss_mb=10),
        RunResult("ours", records=100, wall_s=0.5, cpu_s=0.1, rss_mb=10),
        RunResult("later", status=NOT_IMPLEMENTED, detail="x"),
    ]
    text = e2e_table(results, "anchor")
    assert "| ours | 200 | 2.00x | 1000.00 | 10 |" in text
    assert "not yet implemented" in text


def _entry(op: str, impl: str, median: float, size: int = 100, **kw: Any) -> dict[str, Any]:
    implementation = kw.pop("implementation", "cython" if impl == "ours" else impl)
    return {
        "op": op,
        "impl": impl,
        "implementation": implementation,
        "value_size": size,
        "compression": kw.pop("compression", "none"),
        "records": 1000,
        "nbytes": kw.pop("nbytes", 126_000),
        "median": median,
        "min": median,
        "rounds": 5,
    }


def test_report_codec_ratios_and_targets() -> None:
    entries = [
        _entry("encode", "ours", 0.0001),  # 10 M/s
        _entry("encode", "aiokafka", 0.0004),  # 2.5 M/s -> 4x, target 2x met
        _entry("decode", "ours", 0.0002),
        _entry("decode", "aiokafka", 0.0002),  # 1x, target 1.5x not met
        _entry("encode", "ours", 0.01, implementation="python"),
        _entry("encode", "kafka-python", 0.005),
        {"name": "test_x", "median": 1.0},  # unlabelled (failed) benchmark: ignored
    ]
    data = {"environment": {}, "sections": {"codec": {"entries": entries, "failures": ["FAILED x"]}}}
    text = report.render(data)
    assert "| encode, value 100 B | 10.00 M/s · 0.100 s/M | 2.50 M/s · 0.400 s/M" in text
    assert "4.00x | ≥2x met |" in text
    assert "1.00x | ≥1.5x NOT met |" in text
    assert "pure-Python twin" in text
    assert "0.50x" in text  # twin vs kafka-python
    assert "FAILED x" in text


def test_report_codec_figures_are_medians_with_the_fastest_beside() -> None:
    ours = {**_entry("decode-columns", "ours", 0.0001), "min": 0.00008}
    peer = {**_entry("decode", "aiokafka", 0.0009), "min": 0.0009}
    text = report.render({"environment": {}, "sections": {"codec": {"entries": [ours, peer]}}})
    # 9x by medians: the target is not met, whatever the fastest rounds say (11.25x)
    assert "9.00x (fastest 11.25x) | ≥10x NOT met |" in text
    assert "| decode-columns, value 100 B | 10.00 M/s" in text


def test_run_codec_keeps_the_middle_process_and_the_fastest_round() -> None:
    from bench import run_all

    runs = [
        {"name": "b", "median": 3.0, "min": 2.0, "rounds": 1},
        {"name": "b", "median": 1.0, "min": 0.5, "rounds": 2},
        {"name": "b", "median": 2.0, "min": 1.5, "rounds": 3},
    ]
    kept = run_all.middle_run(runs)
    assert (kept["median"], kept["rounds"], kept["min"], kept["medians"]) == (2.0, 3, 0.5, [3.0, 1.0, 2.0])
    assert run_all.middle_run(runs[:2])["median"] == 1.0  # an even count: the lower middle


def test_report_without_our_codec_still_renders() -> None:
    data = {"environment": {}, "sections": {"codec": {"entries": [_entry("encode", "aiokafka", 0.0004)]}}}
    text = report.render(data)
    assert "| encode, value 100 B | - | 2.50 M/s" in text
    assert "≥2x (not measured)" in text


def test_report_e2e_sections() -> None:
    ok = RunResult("confluent-kafka", records=300_000, wall_s=1.0, cpu_s=0.3, rss_mb=90)
    ours = RunResult("kafka_core", records=300_000, wall_s=0.5, cpu_s=0.3, rss_mb=90)
    missing = RunResult("kafka_core-send_batch", status=NOT_IMPLEMENTED, detail="x")
    sections = {
        "producer": {"results": [ok.__dict__, ours.__dict__, missing.__dict__], "records": 300_000},
        "consumer": {"results": [], "failed": "BrokerStartError: no tansu"},
    }
    text = report.render({"environment": {}, "sections": sections})
    assert "| producer: kafka_core | confluent-kafka | 2.00x |" in text
    assert "| producer: kafka_core-send_batch | confluent-kafka | not yet implemented |" in text
    assert "**The section failed:** `BrokerStartError: no tansu`" in text
    assert "300,000 records of 100 B" in text


def test_notes_by_hand_follow_their_section_or_come_last() -> None:
    notes = (
        "# preface, not rendered\n\n## Producer (issue #5)\n\nread it so\n\n## Overhead\n\nmeasured by hand\n"
    )
    sections = {"producer": {"results": [RunResult("confluent-kafka", records=10, wall_s=1.0).__dict__]}}
    text = report.render({"environment": {}, "sections": sections}, notes)
    assert "preface" not in text
    assert text.index("## Producer (issue #5)") < text.index("read it so") < text.index("## Notes")
    assert text.index("## Notes") < text.index("## Overhead\n\nmeasured by hand")


def test_carried_over_sections_render_as_typed_with_their_provenance() -> None:
    table = {
        "headers": ["client", "records/s", "vs confluent", "CPU s per M records", "of ceiling"],
        "rows": [["x", "1 k", "2.24x", "0.66", "85%"]],
    }
    share = {
        "carried_over": "typed by hand",
        "command": "python bench/bench_share.py",
        "date": "2026-11-26",
        "table": table,
    }
    spark = {
        "brokers": {
            "kafka": {
                "carried_over": "typed by hand",
                "summary": [["spark write: a", "b on Apache Kafka", "4.55x", ""]],
                "table": {"headers": ["operation", "method"], "rows": [["write", "a"]]},
                "rounds": "medians of 3 rounds",
                "broker": "Apache Kafka 4.4.0 (one node)",
            }
        }
    }
    text = report.render({"environment": {}, "sections": {"share": share, "spark": spark}})
    assert "| x | 1 k | 2.24x | 0.66 | 85% |" in text
    assert "Command: `python bench/bench_share.py`." in text and "Carried over: typed by hand." in text
    assert "| spark write: a | b on Apache Kafka | 4.55x |  |" in text
    assert "### Apache Kafka 4.4.0: medians of 3 rounds" in text and "| write | a |" in text


def test_share_medians_saved_by_the_bench_render_with_ratios() -> None:
    share = {
        "date": "2026-11-28 08:00 UTC",
        "records": 1000,
        "medians": {
            "confluent-kafka": {"rate": 100_000.0, "cpu_s_per_million": 1.0},
            "kafka_core": {"rate": 150_000.0, "cpu_s_per_million": 0.5},
            "raw-sharefetch": {"rate": 300_000.0, "cpu_s_per_million": 0.1},
        },
    }
    text = report.render({"environment": {}, "sections": {"share": share}})
    assert "| kafka_core, poll + implicit accept | 150 k | 1.50x | 0.50 | 50% |" in text


def test_listener_cpu_without_a_local_broker_is_none() -> None:
    from bench.proc_tree import listener_cpu

    # The ceilings run with no broker at all (bootstrap None): their figures must not fail on it.
    assert listener_cpu(None) is None
    assert listener_cpu("127.0.0.1:1") is None


def test_tree_usage_counts_children() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            cpu, rss = tree_usage(os.getpid())
            if cpu >= time.process_time() + 0.4:
                break
            time.sleep(0.1)
        assert cpu >= time.process_time() + 0.4
        assert rss > 1
    finally:
        child.kill()
        child.wait()


# --------------------------------------------------------------------------- against a broker


@pytest.fixture(scope="module")
def bootstrap() -> Any:
    from bench.common import bench_broker

    with bench_broker() as address:
        yield address


def _ours_exists(name: str) -> bool:
    """Whether kafka_core declares ``name`` (asked in a child: an extension being rebuilt by
    someone else must not take this test process down)."""
    code = f"import kafka_core, sys; sys.exit(0 if {name!r} in dir(kafka_core) else 3)"
    return subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


@pytest.mark.broker
def test_producer_smoke(bootstrap: str) -> None:
    from bench.e2e_producer import run_producer_bench

    clients = ("confluent-kafka", "aiokafka", "kafka-python", "kafka_core")
    results = run_producer_bench(bootstrap, records=2000, repeat=1, clients=clients, log=lambda _m: None)
    by = {r.client: r for r in results}
    for peer in clients[:3]:
        assert by[peer].status == OK, by[peer].detail
        assert by[peer].records == 2000
        assert by[peer].cpu_s > 0
    # Our row follows what exists: "not yet implemented" exactly while the producer is missing.
    assert (by["kafka_core"].status == NOT_IMPLEMENTED) == (not _ours_exists("KafkaProducer"))


@pytest.mark.broker
def test_consumer_smoke(bootstrap: str) -> None:
    from bench.e2e_consumer import run_consumer_bench

    clients = ("confluent-kafka", "aiokafka", "kafka-python", "kafka_core-poll_columns")
    results = run_consumer_bench(bootstrap, records=2000, repeat=1, clients=clients, log=lambda _m: None)
    by = {r.client: r for r in results}
    for peer in clients[:3]:
        assert by[peer].status == OK, by[peer].detail
        assert by[peer].extra["total_records"] == 2000
        assert 0 < by[peer].records <= 2000
    assert (by["kafka_core-poll_columns"].status == NOT_IMPLEMENTED) == (not _ours_exists("KafkaConsumer"))


@pytest.mark.broker
def test_transactions_smoke(bootstrap: str) -> None:
    from bench.bench_transactions import run_transactions_bench

    results = run_transactions_bench(
        bootstrap, records=2000, per_transaction=500, repeat=1, log=lambda _m: None
    )
    assert {r.client for r in results} == {"confluent-kafka", "kafka_core"}
    for r in results:
        assert r.status == OK and r.records == 2000, (r.client, r.detail)


@pytest.mark.broker
def test_consumer_reports_missing_records(bootstrap: str) -> None:
    """A topic holding fewer records than asked for is an error row, not a hang or a figure."""
    from bench.common import create_topic, fill_topic, run_child, unique_topic

    topic = unique_topic("short", "test")
    create_topic(bootstrap, topic, 1)
    fill_topic(bootstrap, topic, make_values(10, 100))
    args = ["--bootstrap", bootstrap, "--topic", topic, "--records", "20", "--partitions", "1"]
    env_deadline = os.environ.get("BENCH_CONSUME_DEADLINE_S")
    os.environ["BENCH_CONSUME_DEADLINE_S"] = "3"
    try:
        result = run_child("bench.e2e_consumer", "confluent-kafka", args, timeout=60)
    finally:
        if env_deadline is None:
            os.environ.pop("BENCH_CONSUME_DEADLINE_S")
        else:
            os.environ["BENCH_CONSUME_DEADLINE_S"] = env_deadline
    assert result.status == ERROR
    assert "only 10 of 20" in result.detail


@pytest.mark.broker
def test_count_topic_sees_exactly_what_landed(bootstrap: str) -> None:
    """The read-back that turns a producer run with lost records into an error row."""
    from bench.common import count_topic, create_topic, fill_topic, unique_topic

    topic = unique_topic("count", "test")
    create_topic(bootstrap, topic, 2)
    fill_topic(bootstrap, topic, make_values(50, 100))
    assert count_topic(bootstrap, topic, 2, expected=50) == 50
    assert count_topic(bootstrap, topic, 2, expected=60, timeout=10) == 50


def test_spark_table_ratios_ceilings_and_targets() -> None:
    from bench.spark_report import spark_headline, spark_table

    def run(client: str, wall: float, **kw: Any) -> RunResult:
        return RunResult(client, records=1_000_000, wall_s=wall, cpu_s=wall, rss_mb=100, **kw)

    results = [
        run("foreachPartition-confluent", 10.0),  # 100 k/s
        run("kafka-connector-write", 1.25),  # 800 k/s
        run("kafka_core-write", 1.0),  # 1 M/s: 10x the peer, 1.25x the connector, 50% of the ceiling
        run("ceiling-arrow-writer", 0.5),
        run("mapPartitions-confluent", 4.0),  # 250 k/s
        run("kafka-connector-read", 0.5),  # 2 M/s
        run("kafka_core-read", 1.0),  # 0.5x the connector; no ceiling to fall back on
        RunResult("ceiling-arrow-reader", status=ERROR, detail="boom"),
    ]
    text = spark_table(results)
    assert (
        "| write | kafka_core-write | 1.00 M | 1.25x | 10.00x | 50% | ≥8x peer met; ≥1x connector met;"
        in text
    )
    assert "| write | ceiling-arrow-writer (ceiling) | 2.00 M | 2.50x | 20.00x | - |" in text
    assert "| read | kafka_core-read | 1.00 M | 0.50x | 4.00x | - | ≥1x connector NOT met;" in text
    assert "error: boom" in text
    head = spark_headline(results)
    assert head[0][:3] == [
        "spark write: kafka_core-write",
        "kafka-connector-write",
        "1.25x (10.00x foreachPartition-confluent; 50% of ceiling)",
    ]
    assert head[1][1:3] == ["kafka-connector-read", "0.50x (4.00x mapPartitions-confluent)"]
    assert "≥1x connector NOT met" in head[1][3]
    # Below the connector, the read's target falls back to 90% of the same-run ceiling.
    results[-1] = run("ceiling-arrow-reader", 0.95)
    assert "≥90% of ceiling (connector 0.50x) met" in spark_headline(results)[1][3]
    missing = [run("foreachPartition-confluent", 10.0), RunResult("kafka_core-read", status=NOT_IMPLEMENTED)]
    assert spark_headline(missing)[0][2] == "not yet implemented"


def test_report_spark_section_old_and_new() -> None:
    peer = RunResult("foreachPartition-confluent", records=2_000_000, wall_s=20.0, cpu_s=40.0, rss_mb=900)
    legacy = RunResult("kafka_core", status=NOT_IMPLEMENTED, detail="x")  # results.json of before
    ours = RunResult("kafka_core-read", records=2_000_000, wall_s=2.0, cpu_s=4.0, rss_mb=900)
    read_peer = RunResult("mapPartitions-confluent", records=2_000_000, wall_s=10.0, cpu_s=9.0)
    sections = {
        "spark": {"results": [r.__dict__ for r in (peer, legacy, read_peer, ours)], "records": 2_000_000}
    }
    text = report.render({"environment": {}, "sections": sections})
    assert "## Spark write and read" in text
    assert "| spark write: kafka_core | foreachPartition-confluent | not yet implemented |" in text
    assert "| spark read: kafka_core-read | mapPartitions-confluent | 5.00x |" in text
    assert "2,000,000 rows (key 16 B, value 100 B)" in text


def test_spark_table_first_job_beside_warm_figure() -> None:
    from bench.spark_report import spark_headline, spark_table

    peer = RunResult(
        "mapPartitions-confluent", records=1_000_000, wall_s=4.0, extra={"pass_rates": [200_000, 250_000]}
    )
    ours = RunResult(
        "kafka_core-read", records=1_000_000, wall_s=1.0, extra={"pass_rates": [400_000, 1_000_000]}
    )
    text = spark_table([peer, ours])
    assert "first job rows/s (vs peer)" in text
    assert "| read | kafka_core-read | 1.00 M | - | 4.00x | - |  | 400 k (2.00x) |" in text
    assert spark_headline([peer, ours])[0][2] == "4.00x (first job 2.00x)"


def test_a_run_keeps_the_sections_it_did_not_measure(tmp_path: Any, monkeypatch: Any) -> None:
    """``--only codec`` and a full run without Spark replace what they measured, nothing else:
    the Spark and share-group figures, measured apart, stay (they were dropped before)."""
    from bench import run_all

    raw, out = tmp_path / "results.json", tmp_path / "RESULTS.md"
    kept = {
        "spark": {"brokers": {"kafka": {"date": "then", "results": []}}},
        "share": {"date": "then", "medians": {}},
        "codec": {"date": "old", "entries": []},
        "main_job": {"date": "then", "seconds": {}},
    }
    raw.write_text(json.dumps({"sections": kept}))
    monkeypatch.setattr(run_all, "environment", lambda: {})
    monkeypatch.setattr(run_all, "run_codec", lambda mode: {"entries": [], "failures": []})
    monkeypatch.setattr(run_all, "run_e2e", lambda mode, sections: {})
    monkeypatch.setattr(run_all, "run_wide_section", lambda mode: {"date": "now", "by_partitions": {}})
    monkeypatch.setattr(run_all, "run_tracing_section", lambda mode: {"date": "now", "rows": []})
    for argv in (["--only", "codec"], ["--no-spark"]):
        assert run_all.main([*argv, "--raw", str(raw), "--output", str(out)]) == 0
        sections = json.loads(raw.read_text())["sections"]
        assert sections["spark"] == kept["spark"] and sections["share"] == kept["share"]
        assert sections["main_job"] == kept["main_job"]  # --no-spark leaves the main job out too
        assert sections["codec"]["date"] != "old"
        assert sections["codec"]["command"].startswith("python -m ")
        assert sections["codec"]["machine"]["nproc"]
        assert "## Share groups (issue 24)" in out.read_text()
    job = {"date": "now", "events": 10, "seconds": {}, "passed": True}
    monkeypatch.setattr(run_all, "run_main_job_section", lambda mode: job)
    assert run_all.main(["--only", "main_job", "--raw", str(raw), "--output", str(out)]) == 0
    assert json.loads(raw.read_text())["sections"]["main_job"] == job
    assert "## The main job beside Spark's connector (issue 41)" in out.read_text()


# --------------------------------------------------------------------------- the wide bench (issue 40)


def _wide_run(produce_s: float, read_s: float, idle_cpu: float) -> dict[str, Any]:
    phase = {"wall_s": produce_s, "cpu_s": 1.0, "broker_cpu_s": 0.5}
    reads = [{"wall_s": read_s, "cpu_s": 0.5, "broker_cpu_s": 0.2, "first_record_s": 0.1}] * 2
    idle = {"wall_s": 10.0, "cpu_s": idle_cpu, "broker_cpu_s": 0.1}
    return {"produce": phase, "reads": reads, "idle": idle, "rss_mb": 80.0}


def test_wide_medians_ratios_and_table() -> None:
    from bench.bench_wide import summarize
    from bench.bench_wide_report import WIDE_TITLE, wide_tables

    ours = summarize([_wide_run(1.0, 0.5, 0.1), _wide_run(2.0, 0.5, 0.3), _wide_run(4.0, 0.5, 0.2)], 100_000)
    assert ours["produce_rate"] == 50_000 and ours["produce_rates"] == [100_000, 50_000, 25_000]
    assert ours["consume_rate"] == 200_000 and ours["consume_cpu_per_m"] == pytest.approx(5.0)
    assert ours["idle_cpu_share"] == pytest.approx(0.02) and ours["idle_broker_cpu_share"] == pytest.approx(
        0.01
    )
    peer = summarize([_wide_run(4.0, 1.0, 0.05)], 100_000)
    failed = summarize([_wide_run(1.0, 1.0, 0.1), {"error": "consume: boom"}], 100_000)
    assert failed == {"error": "consume: boom"}
    section = {
        "records": 100_000,
        "idle_s": 10.0,
        "repeat": 3,
        "revision": "abc1234",
        "by_partitions": {
            "1000": {"kafka_core": ours, "confluent-kafka": peer},
            "10": {"kafka_core": failed, "confluent-kafka": peer},
        },
    }
    text = "\n".join(wide_tables(section))
    assert "| 10 | kafka_core: consume: boom |" in text
    assert (
        "| 1,000 | 50 k vs 25 k/s (2.00x) | 200 k vs 100 k/s (2.00x) | 10.00 (10.00) | 5.00 (5.00) | 2.0% (0.5%) |"
        in text
    )
    assert text.index("| 10 |") < text.index("| 1,000 |")
    assert "kafka_core abc1234" in text
    rendered = report.render({"environment": {}, "sections": {"wide": section}})
    assert f"## {WIDE_TITLE}" in rendered and "| 1,000 | 50 k vs 25 k/s (2.00x)" in rendered


def test_wide_groups_in_process_parts() -> None:
    """The assignors' and the metadata path's timings run and check what they time (small)."""
    from bench.bench_wide_groups import assignor_times, metadata_times
    from bench.bench_wide_report import groups_blocks

    assignors = assignor_times(300, rounds=1)
    assert set(assignors) == {"range", "roundrobin", "cooperative-sticky"}
    assert all(set(v) == {"fresh", "steady", "leave", "join"} for v in assignors.values())
    meta = metadata_times(400, rounds=1)
    assert [m["shape"] for m in meta] == ["1 topic of 400 partitions", "20 topics of 20 partitions"]
    assert all(m["total_ms"] > 0 and m["bytes"] > 400 * 10 for m in meta)
    groups = {
        "partitions": 30,
        "assignor_partitions": 300,
        "assignors": assignors,
        "metadata": meta,
        "members": {
            "classic": {"join_s": 1.5, "leave_s": 0.5, "rebalances": "3 + 2"},
            "consumer": {"error": "x"},
        },
        "regex_topics": 5,
        "regex": {"classic": {"all_fetched_s": 2.0}, "consumer": {"error": "y"}},
    }
    text = "\n".join(groups_blocks(groups))
    assert "| classic | 1.50 | 0.50 | 3 + 2 |  |" in text and "| consumer | - | - | - | x |" in text
    assert "| classic | 2.00 |  |" in text and "| cooperative-sticky |" in text


def test_wide_finds_the_broker_process() -> None:
    """The broker's CPU comes from the process listening on the bootstrap port (here: a listener
    of this test's own)."""
    import socket

    from bench.bench_wide import listening_pid, pid_cpu

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening_pid(f"127.0.0.1:{port}") == os.getpid()
    assert listening_pid("example.invalid:9092") is None
    assert (pid_cpu(os.getpid()) or 0) > 0


@pytest.mark.broker
def test_wide_smoke(bootstrap: str) -> None:
    """Both clients produce, read twice and idle on a small topic; every record is counted."""
    from bench.bench_wide import CLIENTS, run_wide_bench

    section = run_wide_bench(
        bootstrap, partitions=(6,), records=600, repeat=1, idle_s=0.5, log=lambda _m: None
    )
    by = section["by_partitions"]["6"]
    assert set(by) == set(CLIENTS)
    for client, figures in by.items():
        assert "error" not in figures, (client, figures.get("error"))
        assert figures["produce_rate"] > 0 and figures["consume_rate"] > 0
        assert len(figures["consume_rates"]) == 2 and figures["idle_cpu_share"] >= 0
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        assert section["broker_cpu_measured"]


@pytest.mark.broker
def test_wide_live_metadata_stall(bootstrap: str) -> None:
    """The live metadata probe asks for a topic and reports its request time and the loop's stall."""
    from bench.bench_wide_groups import live_metadata_stall
    from bench.common import create_topic, delete_topic, unique_topic

    topic = unique_topic("wide-meta", "test")
    create_topic(bootstrap, topic, 4)
    try:
        figures = live_metadata_stall(bootstrap, topic, rounds=2)
    finally:
        delete_topic(bootstrap, topic)
    assert set(figures) == {"request_ms", "stall_ms", "quiet_gap_ms"}
    assert figures["request_ms"] > 0 and figures["stall_ms"] > 0


def test_settle_broker_waits_for_a_quiet_process_and_says_how_long() -> None:
    import os
    import threading

    from bench.bench_wide import settle_broker

    assert settle_broker(None) == 0.0  # a broker not on this machine: nothing to wait for
    assert settle_broker(os.getpid(), window_s=0.2, timeout_s=5) is not None  # this one idles
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin)
    busy.start()
    try:  # a process that keeps spinning never settles (a low bar: CI machines are loaded)
        assert settle_broker(os.getpid(), share=0.01, window_s=0.5, timeout_s=1.0) is None
    finally:
        stop.set()
        busy.join()


@pytest.mark.broker
def test_tracing_off_smoke(bootstrap: str) -> None:
    """bench_tracing_off: every case in both modes, each in its own process; the 'never' process
    imports no tracing (its child raises if it did)."""
    from bench.bench_tracing_off import CASES, MODES, run_tracing_off

    figures = run_tracing_off(bootstrap, records=2000, size=50, rounds=1)  # above a poll (500)
    assert [row["case"] for row in figures["rows"]] == list(CASES)
    assert {(r["case"], r["mode"]) for r in figures["rates"]} == {(c, m) for c in CASES for m in MODES}
    assert all(len(r["rates"]) == 1 and r["rates"][0] > 0 for r in figures["rates"])
