"""Record and batch futures: results, errors, callbacks following forwarded records, awaiting
from another thread, and the one future of a send_batch call."""

from __future__ import annotations

import asyncio
import threading

import pytest
from fakes.accumulator import make_accumulator

from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.producer.futures import BatchResult, RecordFuture, RecordMetadata, SendBatchFuture


def test_callbacks_follow_forwarding_and_run_once() -> None:
    acc = make_accumulator()
    f = acc.append("new", b"a", partition=0)
    got: list[object] = []
    f.add_callback(got.append)
    f.add_errback(got.append)
    for result, targets in acc.set_partitions("new", 1):
        result.forward(targets)
    target, index = f[0].resolve(f[1])
    target.set_result(5)
    assert got == [RecordMetadata("new", 0, 5 + index, target.base_timestamp)]


def test_errors_reach_result_exception_and_errback() -> None:
    r = BatchResult("t", 0, 0)
    f = RecordFuture((r, 0))
    errs: list[BaseException] = []
    f.add_errback(errs.append)
    with pytest.raises(KafkaTimeoutError):
        f.result(0.01)
    boom = KafkaConfigError("boom")
    r.set_error(boom)
    assert f.exception() is boom and errs == [boom]
    with pytest.raises(KafkaConfigError):
        f.result()


def test_record_future_is_awaitable_across_threads() -> None:
    r = BatchResult("t", 2, 7)

    async def main() -> RecordMetadata:
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, lambda: threading.Thread(target=r.set_result, args=(50,)).start())
        return await RecordFuture((r, 1))

    assert asyncio.run(main()) == RecordMetadata("t", 2, 51, 7)


def test_send_batch_future_combines_parts() -> None:
    r1, r2 = BatchResult("t", 0, 1), BatchResult("t", 1, 1)
    fut = SendBatchFuture([(r1, range(0, 2)), (r2, [2])], 3)
    assert not fut.done()
    r1.set_result(10)
    r2.set_result(20)
    result = fut.result(1)
    assert [m.offset for m in result] == [10, 11, 20]
    assert result.partitions == {0: 2, 1: 1}
    r3 = BatchResult("t", 0, 1)
    r3.set_error(KafkaConfigError("x"))
    with pytest.raises(KafkaConfigError):
        SendBatchFuture([(r1, range(2)), (r3, range(2, 3))], 3).result(1)
