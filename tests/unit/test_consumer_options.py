"""Consumer options: named choices parsed once into enums, and what a bad value says."""

from __future__ import annotations

import pytest
from fakes.consumer_client import FakeClient

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.policies import IsolationLevel, OffsetReset
from kafka_core.errors import KafkaConfigError

T = "t"


def make(**kw: object) -> KafkaConsumer:
    return KafkaConsumer(topics=[T], client=FakeClient({T: 1}), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "member"),
    [
        ("earliest", OffsetReset.EARLIEST),
        ("latest", OffsetReset.LATEST),
        (OffsetReset.NONE, OffsetReset.NONE),
    ],
)
def test_offset_reset_strings_and_members_parse_to_the_member(given: object, member: OffsetReset) -> None:
    c = make(auto_offset_reset=given)
    assert c.auto_offset_reset is member
    assert c.auto_offset_reset == member.value  # still equal to the string users wrote


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("auto_offset_reset", "smallest"),
        ("auto_offset_reset", "EARLIEST"),
        ("auto_offset_reset", None),
        ("isolation_level", "dirty"),
        ("isolation_level", 1),
    ],
)
def test_a_bad_choice_names_the_option_and_the_choices(option: str, value: object) -> None:
    with pytest.raises(KafkaConfigError, match=option) as info:
        make(**{option: value})
    assert repr(value) in str(info.value)


def test_isolation_level_member_is_accepted() -> None:
    make(isolation_level=IsolationLevel.READ_COMMITTED)
    make(isolation_level="read_committed")
