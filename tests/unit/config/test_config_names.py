"""docs/migrating.md's table of Java-style and librdkafka names is ``kafka_core.config``'s own,
and every name the guide's client tables cite is one the code takes (issue 39: the guide mapped
``message.timeout.ms`` and ``partitioner``, which ``from_config`` refused)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafka_core.config import names_markdown, translate
from kafka_core.errors import KafkaConfigError

DOC = Path(__file__).resolve().parents[3] / "docs" / "migrating.md"
BLOCK = re.compile(r"<!-- names: python -m kafka_core\.config -->\n(.*?)<!-- /names -->", re.S)
ROLE = {"every role": "client", "producer": "producer", "consumer": "consumer"}
# A value each name takes, where "1" is not one.
SAMPLES = {
    "compression.type": "lz4",
    "partitioner": "murmur2_random",
    "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner",
    "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
    "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
    "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor,range",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
}


def _rows() -> list[tuple[str, str, str, str]]:
    match = BLOCK.search(DOC.read_text())
    assert match, "docs/migrating.md lost its generated table of names"
    rows = []
    for line in match.group(1).splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[1], cells[2].strip("`"), cells[3]))
    return rows


def test_the_guide_shows_the_codes_table() -> None:
    match = BLOCK.search(DOC.read_text())
    assert match and match.group(1) == names_markdown(), (
        "docs/migrating.md's table of names differs from kafka_core.config's: paste the output of"
        " `python -m kafka_core.config` between its markers"
    )


def test_each_mapped_name_gives_the_keyword_the_table_says() -> None:
    mapped = [row for row in _rows() if row[2] not in ("accepted, no effect", "refused")]
    assert len(mapped) > 60
    for name, role, keyword, _ in mapped:
        out = translate({name: SAMPLES.get(name, "1")}, ROLE[role])
        if keyword == "sasl_*":
            assert out == {"sasl_username": "u", "sasl_password": "p"}
        else:
            assert list(out) == [keyword], name


def test_no_effect_names_are_accepted_and_refused_names_say_why() -> None:
    rows = _rows()
    no_effect = [row for row in rows if row[2] == "accepted, no effect"]
    refused = [row for row in rows if row[2] == "refused"]
    assert no_effect and refused
    for name, _, _, reason in no_effect:
        assert reason, name
        assert translate({name: "1"}, "producer") == {}
    for name, _, _, reason in refused:
        with pytest.raises(KafkaConfigError) as err:
            translate({name: "1"}, "producer")
        assert f"{name} has no equivalent in kafka_core: {reason}" in str(err.value)


def _client_table_names() -> set[str]:
    """The Java-style names in the first (confluent-kafka) column of the producer and consumer tables."""
    text = DOC.read_text()
    names: set[str] = set()
    for line in text.split("## Admin")[0].splitlines():
        if line.startswith("| ") and not line.startswith("| confluent-kafka") and not line.startswith("|---"):
            first = line.strip("|").split("|")[0]
            names |= {n for n in re.findall(r"`([a-z][a-z0-9.]*)`", first) if "." in n or n.isalpha()}
    return names


def test_every_name_the_client_tables_cite_is_taken_or_refused_with_a_reason() -> None:
    table = {row[0]: row for row in _rows()}
    cited = _client_table_names()
    assert {"message.timeout.ms", "partitioner", "partition.assignment.strategy", "retries"} <= cited
    missing = sorted(cited - set(table))
    assert not missing, f"docs/migrating.md's client tables cite names kafka_core does not know: {missing}"


def test_an_unknown_name_gets_a_few_close_names_not_the_whole_table() -> None:
    with pytest.raises(KafkaConfigError) as err:
        translate({"fetch.max.byte": 1}, "consumer")
    text = str(err.value)
    assert "did you mean fetch.max.bytes" in text
    assert text.count(".") < 40  # three names or so, not the sixty kafka_core knows
    assert "bootstrap.servers" not in text


def test_every_problem_in_a_config_is_named_at_once() -> None:
    with pytest.raises(KafkaConfigError) as err:
        translate({"linger.msec": 5, "retries": 3, "batch.num.messages": 1}, "producer")
    text = str(err.value)
    assert "'linger.msec'" in text and "did you mean linger.ms" in text
    assert "retries has no equivalent in kafka_core" in text and "delivery.timeout.ms" in text
    assert "batch.num.messages has no equivalent" in text


def test_librdkafka_and_java_names_map_to_their_equivalents() -> None:
    out = translate(
        {
            "message.timeout.ms": "30000",
            "queue.buffering.max.ms": "20",
            "queue.buffering.max.kbytes": "1024",
            "partitioner": "murmur2_random",
            "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
            "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        },
        "producer",
    )
    assert out["delivery_timeout_ms"] == 30000.0 and out["linger_ms"] == 20.0
    assert translate({"max.request.size": "2097152"}, "producer") == {"max_request_size": 2 << 20}
    assert translate({"message.max.bytes": "2097152"}, "producer") == {"max_request_size": 2 << 20}
    assert out["buffer_memory"] == 1 << 20 and out["partitioner"] == "murmur2"
    assert out["key_serializer"]("é") == "é".encode() and out["value_serializer"] is None
    consumer = translate(
        {
            "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor, cooperative-sticky",
        },
        "consumer",
    )
    assert consumer["key_deserializer"](memoryview("é".encode())) == "é"
    assert consumer["assignors"] == ("range", "cooperative-sticky")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("partitioner", "consistent_random", "CRC32 and FNV-1a placement"),
        ("partitioner.class", "com.example.MyPartitioner", "a Java class"),
        ("key.serializer", "io.confluent.kafka.serializers.KafkaAvroSerializer", "serializer function"),
        ("partition.assignment.strategy", "org.apache.kafka.clients.consumer.StickyAssignor", "eager"),
    ],
)
def test_a_value_without_a_twin_is_refused_with_the_reason(name: str, value: str, why: str) -> None:
    role = "consumer" if name == "partition.assignment.strategy" else "producer"
    with pytest.raises(KafkaConfigError) as err:
        translate({name: value}, role)
    assert f"bad value for {name}" in str(err.value) and why in str(err.value)
