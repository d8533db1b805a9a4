"""The error-code table and how response errors surface."""

from __future__ import annotations

import pytest

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol import raise_for_response, response_errors
from kafka_core.protocol.errors import ERROR_CODES, ERRORS, error_for, raise_for_code
from kafka_core.protocol.messages import FetchResponse, JoinGroupResponse, ProduceResponse


def test_table_is_complete_and_consistent() -> None:
    assert sorted(ERRORS) == list(range(-1, 134))
    assert len(ERROR_CODES) == len(ERRORS)  # names are unique
    for code, info in ERRORS.items():
        assert info.code == code
        assert info.name.isupper()
        assert info.description or code == 0


@pytest.mark.parametrize(
    ("code", "name", "retriable"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (7, "REQUEST_TIMED_OUT", True),
        (15, "COORDINATOR_NOT_AVAILABLE", True),
        (16, "NOT_COORDINATOR", True),
        (22, "ILLEGAL_GENERATION", False),
        (25, "UNKNOWN_MEMBER_ID", False),
        (27, "REBALANCE_IN_PROGRESS", False),
        (35, "UNSUPPORTED_VERSION", False),
        (47, "INVALID_PRODUCER_EPOCH", False),
        (51, "CONCURRENT_TRANSACTIONS", True),
        (74, "FENCED_LEADER_EPOCH", True),
        (79, "MEMBER_ID_REQUIRED", False),
        (90, "PRODUCER_FENCED", False),
        (100, "UNKNOWN_TOPIC_ID", True),
        (129, "REBOOTSTRAP_REQUIRED", False),
        (133, "SHARE_SESSION_LIMIT_REACHED", True),
    ],
)
def test_known_codes(code: int, name: str, retriable: bool) -> None:
    err = error_for(code)
    assert isinstance(err, KafkaProtocolError)
    assert (err.code, err.name, err.retriable) == (code, name, retriable)
    assert err.message == ERRORS[code].description
    assert ERROR_CODES[name] == code


def test_error_for_keeps_the_broker_message_and_unknown_codes() -> None:
    assert error_for(6, "partition moved").message == "partition moved"
    err = error_for(9999)
    assert (err.code, err.retriable) == (9999, False)
    assert "9999" in err.name


def test_raise_for_code() -> None:
    raise_for_code(0)
    with pytest.raises(KafkaProtocolError) as info:
        raise_for_code(16, "go elsewhere")
    assert info.value.name == "NOT_COORDINATOR"
    assert info.value.message == "go elsewhere"


def test_every_error_in_a_response_surfaces() -> None:
    body = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="a",
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(index=0),
                    ProduceResponse.PartitionProduceResponse(index=1, error_code=6, error_message="moved"),
                ],
            ),
            ProduceResponse.TopicProduceResponse(
                name="b",
                partition_responses=[ProduceResponse.PartitionProduceResponse(index=0, error_code=19)],
            ),
        ]
    )
    errors = response_errors(body)
    assert [(path, e.code, e.message) for path, e in errors] == [
        ("responses[0].partition_responses[1].error_code", 6, "moved"),
        ("responses[1].partition_responses[0].error_code", 19, ERRORS[19].description),
    ]
    with pytest.raises(KafkaProtocolError) as info:
        raise_for_response(body)
    assert info.value.code == 6


def test_top_level_error_comes_first_and_clean_responses_pass() -> None:
    body = FetchResponse(
        error_code=71,
        responses=[
            FetchResponse.FetchableTopicResponse(partitions=[FetchResponse.PartitionData(error_code=1)])
        ],
    )
    assert [e.code for _, e in response_errors(body)] == [71, 1]
    raise_for_response(JoinGroupResponse())
    assert response_errors(FetchResponse()) == []


def test_error_code_enum_is_generated_from_the_table() -> None:
    """tools/gen_error_codes.py --check: the committed enum matches the table, name for name."""
    import subprocess
    import sys
    from pathlib import Path

    from kafka_core.protocol.errors import ERRORS, ErrorCode

    tool = Path(__file__).resolve().parents[3] / "tools" / "gen_error_codes.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {e.value: e.name for e in ErrorCode} == {c: i.name for c, i in ERRORS.items()}


def test_error_sets_agree_with_the_table() -> None:
    """Each set is defined once; its members are retriable where Kafka says so."""
    from kafka_core.protocol import errors as e

    assert e.STALE_METADATA_CODES <= e.RETRIABLE_CODES
    assert e.RETRIABLE_FETCH_CODES <= e.RETRIABLE_CODES
    assert e.COORDINATOR_CODES <= e.RETRIABLE_CODES
    assert e.COORDINATOR_MOVED_CODES < e.COORDINATOR_CODES
    assert e.ErrorCode.KAFKA_STORAGE_ERROR in e.STALE_METADATA_CODES
    assert not (e.REJOIN_CODES | e.PRODUCER_ID_CODES) & e.RETRIABLE_CODES
    err = e.error_for(16)
    assert err.code is e.ErrorCode.NOT_COORDINATOR and err.code == 16
    assert e.error_for(9999).code == 9999
