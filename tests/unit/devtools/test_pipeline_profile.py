"""The main job's profile summary (issue 41): Spark's task metrics per job group from an event
log, and the workers' cProfile files by whose code the time was in."""

from __future__ import annotations

import cProfile
import json
from pathlib import Path

from kafka_core.devtools.pipeline.profile import main, python_split, task_split


def _event_log(folder: Path) -> None:
    events = [
        {
            "Event": "SparkListenerJobStart",
            "Stage IDs": [3],
            "Properties": {"spark.jobGroup.id": "kafka:write"},
        },
        {"Event": "SparkListenerJobStart", "Stage IDs": [4], "Properties": {}},
        *(
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": 3,
                "Task Metrics": {
                    "Executor Run Time": 2000,
                    "Executor CPU Time": 1_500_000_000,
                    "JVM GC Time": 100,
                    "Shuffle Write Metrics": {"Shuffle Write Time": 0},
                },
            }
            for _ in range(2)
        ),
        {"Event": "SparkListenerTaskEnd", "Stage ID": 4, "Task Metrics": {"Executor Run Time": 10}},
    ]
    folder.mkdir()
    (folder / "local-1").write_text("\n".join(json.dumps(e) for e in events) + "\n")


def test_a_compressed_log_in_its_application_folder_is_read(tmp_path: Path) -> None:
    """Spark 4 writes event log v2: a folder per application, zstd frames, a last line that may
    still be partial while the job runs."""
    import cramjam

    _event_log(tmp_path / "plain")
    text = (tmp_path / "plain" / "local-1").read_bytes() + b'{"Event": "SparkListenerTa'
    app = tmp_path / "ev" / "eventlog_v2_local-1"
    app.mkdir(parents=True)
    (app / "events_1_local-1.zstd").write_bytes(bytes(cramjam.zstd.compress(text)))
    (app / "appstatus_local-1.inprogress").write_bytes(b"")
    assert task_split(tmp_path / "ev")["kafka:write"]["tasks"] == 2


def test_task_metrics_are_summed_per_job_group(tmp_path: Path) -> None:
    _event_log(tmp_path / "ev")
    split = task_split(tmp_path / "ev")
    assert split["kafka:write"] == {
        "tasks": 2,
        "run_s": 4.0,
        "jvm_cpu_s": 3.0,
        "gc_s": 0.2,
        "shuffle_write_s": 0.0,
    }
    assert split["(none)"]["tasks"] == 1


def _work() -> int:
    return sum(i * i for i in range(20_000))


def test_python_profiles_are_split_by_whose_code(tmp_path: Path, capsys: object) -> None:
    prof = cProfile.Profile()
    prof.runcall(_work)
    prof.dump_stats(str(tmp_path / "write-1-0.prof"))
    (tmp_path / "write-1-0.json").write_text(json.dumps({"wall_s": 1.5, "cpu_s": 1.0}))
    split = python_split(tmp_path, "write")
    assert split["tasks"] == 1 and split["wall_s"] == 1.5
    assert sum(split["own_time_by_code"].values()) > 0
    assert python_split(tmp_path, "read")["tasks"] == 0
    _event_log(tmp_path / "ev")
    assert main(["--event-log", str(tmp_path / "ev"), "--python", str(tmp_path)]) == 0
