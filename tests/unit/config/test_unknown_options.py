"""A mistyped or foreign option is refused naming the class called, the option and the right name.

Every public class, blocking and asyncio, and the Java-style paths (from_config, Spark's
``kafka.*`` options). No broker is needed: the check comes before anything connects.
"""

from __future__ import annotations

from typing import Any

import pytest

import kafka_core
import kafka_core.aio
import kafka_core.sync_client
from kafka_core.config import java_keyword
from kafka_core.errors import KafkaConfigError, KafkaUnknownOptionError
from kafka_core.option_names import FOREIGN_KEYWORDS, NO_EQUIVALENT, accepted_keywords
from kafka_core.spark.options import parse_source

NOWHERE = "127.0.0.1:1"
# (class, the arguments it needs besides the bad one)
CLASSES: list[tuple[Any, dict[str, Any]]] = [
    (kafka_core.KafkaProducer, {}),
    (kafka_core.aio.KafkaProducer, {}),
    (kafka_core.KafkaConsumer, {"topics": ["t"], "group_id": "g"}),
    (kafka_core.aio.KafkaConsumer, {"topics": ["t"], "group_id": "g"}),
    (kafka_core.KafkaShareConsumer, {"topics": ["t"], "group_id": "g"}),
    (kafka_core.aio.KafkaShareConsumer, {"topics": ["t"], "group_id": "g"}),
    (kafka_core.KafkaAdmin, {}),
    (kafka_core.aio.KafkaAdmin, {}),
    (kafka_core.KafkaStreamTransport, {}),
    (kafka_core.aio.KafkaStreamTransport, {}),
    (kafka_core.sync_client.KafkaClient, {}),
    (kafka_core.aio.KafkaClient, {}),
]
IDS = [f"{c.__module__.split('.')[1]}.{c.__name__}" for c, _ in CLASSES]


def refused(cls: Any, needed: dict[str, Any], **bad: Any) -> KafkaUnknownOptionError:
    with pytest.raises(KafkaUnknownOptionError) as err:
        cls(NOWHERE, **needed, **bad)
    return err.value


@pytest.mark.parametrize(("cls", "needed"), CLASSES, ids=IDS)
def test_a_typo_names_the_class_the_option_and_the_closest_name(cls: Any, needed: dict[str, Any]) -> None:
    error = refused(cls, needed, request_timeoutms=5)
    # Still what Python raises for an unexpected keyword, and a config error of ours.
    assert isinstance(error, TypeError) and isinstance(error, KafkaConfigError)
    text = str(error)
    assert text.startswith(f"{cls.__name__}() got unknown option 'request_timeoutms'")
    assert "did you mean 'request_timeout_ms'?" in text
    assert "__init__" not in text
    assert cls.__name__ == "KafkaClient" or "KafkaClient" not in text  # not the class underneath


@pytest.mark.parametrize(("cls", "needed"), CLASSES, ids=IDS)
def test_other_clients_names_are_mapped(cls: Any, needed: dict[str, Any]) -> None:
    # kafka-python's and aiokafka's SASL names, and a Java name with a dot, on every class.
    text = str(refused(cls, needed, sasl_plain_username="u"))
    assert "kafka_core calls it 'sasl_username'" in text
    text = str(refused(cls, needed, **{"client.id": "x"}))
    assert "kafka_core calls it 'client_id'" in text
    assert f"{cls.__name__}.from_config" in text


@pytest.mark.parametrize(
    ("cls", "bad", "expected"),
    [
        (kafka_core.KafkaProducer, {"enable_idempotence": True}, "kafka_core calls it 'idempotent'"),
        (kafka_core.KafkaProducer, {"lingerms": 5}, "did you mean 'linger_ms'?"),
        (kafka_core.KafkaProducer, {"linger.ms": 5}, "kafka_core calls it 'linger_ms' (Java-style names"),
        (kafka_core.KafkaProducer, {"compression_type": "gzip"}, "kafka_core calls it 'compression'"),
        (
            kafka_core.KafkaProducer,
            {"max_in_flight_requests_per_connection": 1},
            "kafka_core calls it 'max_in_flight'",
        ),
        (kafka_core.aio.KafkaProducer, {"retries": 3}, "delivery_timeout_ms"),
        (kafka_core.KafkaProducer, {"api_version": (2, 8)}, "kafka_core has no such option"),
        (
            kafka_core.KafkaProducer,
            {"group.id": "g"},
            "'group_id', a consumer option KafkaProducer does not take",
        ),
        (kafka_core.KafkaConsumer, {"linger_ms": 5}, "a producer option KafkaConsumer does not take"),
        (kafka_core.KafkaConsumer, {"consumer_timeout_ms": 100}, "poll(timeout_ms=...)"),
        (kafka_core.aio.KafkaConsumer, {"groupid": "g"}, "did you mean 'group_id'?"),
        (kafka_core.KafkaConsumer, {"partition_assignment_strategy": []}, "kafka_core calls it 'assignors'"),
        (kafka_core.KafkaStreamTransport, {"acks": 1}, "kafka_core calls it 'producer_acks'"),
        (kafka_core.KafkaStreamTransport, {"producer_lingerms": 1}, "did you mean 'producer_linger_ms'?"),
        (kafka_core.aio.KafkaStreamTransport, {"consumer_groupid": "g"}, "did you mean 'consumer_group_id'?"),
    ],
)
def test_the_advice_for_each_kind_of_name(cls: Any, bad: dict[str, Any], expected: str) -> None:
    needed = dict(CLASSES).get(cls, {})
    if "groupid" in bad:
        needed = {"topics": ["t"]}
    assert expected in str(refused(cls, needed, **bad))


def test_every_unknown_option_is_named_at_once() -> None:
    text = str(refused(kafka_core.KafkaProducer, {}, lingerms=5, enable_idempotence=True))
    assert "unknown options 'lingerms'" in text and "'enable_idempotence'" in text


def test_the_check_comes_before_the_other_checks() -> None:
    # A share consumer's mistyped group id is the typo, not "needs a group_id".
    error = refused(kafka_core.KafkaShareConsumer, {"topics": ["t"]}, groupid="g")
    assert "did you mean 'group_id'?" in str(error)


def test_values_never_appear_in_the_message() -> None:
    text = str(refused(kafka_core.KafkaProducer, {}, sasl_plain_password="hunter2-secret"))
    assert "sasl_plain_password" in text and "hunter2" not in text


def test_the_table_points_at_names_that_exist() -> None:
    every = accepted_keywords(
        kafka_core.aio.KafkaProducer.__init__,
        kafka_core.aio.KafkaConsumer.__init__,
        kafka_core.aio.KafkaClient.__init__,
    )
    for foreign, ours in FOREIGN_KEYWORDS.items():
        assert ours in every, (foreign, ours)
        assert foreign not in every and foreign not in NO_EQUIVALENT
    for name in NO_EQUIVALENT:
        assert name not in every
    assert java_keyword("enable.idempotence") == ("idempotent", "producer")
    assert java_keyword("Bootstrap.Servers") == ("bootstrap_servers", "client")
    assert java_keyword("no.such.name") is None


def test_from_config_says_which_role_a_name_belongs_to_and_the_closest_name() -> None:
    with pytest.raises(KafkaConfigError) as err:
        kafka_core.KafkaConsumer.from_config({"bootstrap.servers": NOWHERE, "linger.ms": 5})
    assert "linger.ms is a producer option, not a consumer one" in str(err.value)
    with pytest.raises(KafkaConfigError) as err:
        kafka_core.KafkaProducer.from_config({"bootstrap.servers": NOWHERE, "lingerms": 5})
    assert "lingerms: did you mean linger.ms" in str(err.value)


def test_spark_kafka_options_get_the_same_hints() -> None:
    base = {"kafka.bootstrap.servers": NOWHERE, "subscribe": "t"}
    with pytest.raises(KafkaConfigError) as err:
        parse_source({**base, "kafka.fetch.min.byte": "1"}, streaming=False)
    assert "kafka.fetch.min.byte: did you mean kafka.fetch.min.bytes or" in str(err.value)
    with pytest.raises(KafkaConfigError) as err:
        parse_source({**base, "kafka.linger.ms": "5"}, streaming=False)
    assert "kafka.linger.ms is a producer option, not a consumer one" in str(err.value)
