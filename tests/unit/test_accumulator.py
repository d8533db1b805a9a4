"""Accumulator, batch futures and send_batch planning: the producer's pure logic, no broker."""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker
from hypothesis import given
from hypothesis import strategies as st

from kafka_core.errors import KafkaCodecError, KafkaConfigError, KafkaTimeoutError
from kafka_core.producer.accumulator import BATCH_OVERHEAD, RECORD_OVERHEAD, Accumulator
from kafka_core.producer.batching import plan_chunks
from kafka_core.producer.futures import BatchResult, RecordFuture, RecordMetadata, SendBatchFuture
from kafka_core.producer.partitioner import DefaultPartitioner, murmur2_partition


class Wakeups:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make(
    batch_size: int = 1000, buffer_memory: int = 1 << 20, linger_ms: float = 5, **kw: object
) -> Accumulator:
    acc = Accumulator(
        batch_size=batch_size,
        buffer_memory=buffer_memory,
        max_block_ms=kw.pop("max_block_ms", 1000),  # type: ignore[arg-type]
        linger_ms=linger_ms,
        delivery_timeout_ms=120_000,
        partitioner=DefaultPartitioner(random.Random(kw.pop("partitioner_seed", 5))),  # type: ignore[arg-type]
        wakeup=kw.pop("wakeup", Wakeups()),  # type: ignore[arg-type]
    )
    return acc


def sealed(acc: Accumulator, topic: str = "t") -> list:
    return [b for q in acc.topics[topic].queues for b in q.sealed]  # type: ignore[union-attr]


def test_records_share_a_batch_and_index_in_order() -> None:
    acc = make()
    acc.set_partitions("t", 3)
    futs = [acc.append("t", b"v%d" % i, partition=1) for i in range(5)]
    batch = acc.topics["t"].queues[1].open  # type: ignore[index]
    assert batch is not None and batch.count == 5 and batch.values == [b"v%d" % i for i in range(5)]
    assert [f[1] for f in futs] == [0, 1, 2, 3, 4]
    assert all(f[0] is batch.result for f in futs)
    batch.result.set_result(100)
    assert futs[3].result(1) == RecordMetadata("t", 1, 103, batch.result.base_timestamp)


def test_batch_seals_when_full_and_wakes_loop_once_per_batch() -> None:
    wake = Wakeups()
    acc = make(batch_size=BATCH_OVERHEAD + 3 * (RECORD_OVERHEAD + 10), wakeup=wake)
    acc.set_partitions("t", 1)
    for _ in range(7):
        acc.append("t", b"x" * 10)
    assert [b.count for b in sealed(acc)] == [3, 3]
    assert acc.topics["t"].queues[0].open.count == 1  # type: ignore[index,union-attr]
    assert wake.count == 1  # the flag stays up until the loop drains (seal_ready clears it)
    acc.seal_ready(0.0)
    acc.append("t", b"x" * 10)
    acc.append("t", b"x" * 10)
    acc.append("t", b"x" * 10)
    assert wake.count == 2


def test_oversized_record_gets_a_batch_of_its_own() -> None:
    acc = make(batch_size=200)
    acc.set_partitions("t", 1)
    acc.append("t", b"a")
    acc.append("t", b"b" * 5000)
    acc.append("t", b"c")
    counts = [b.count for b in sealed(acc)]
    assert counts == [1, 1]
    assert sealed(acc)[1].values == [b"b" * 5000]


def test_linger_and_flush_sealing() -> None:
    acc = make(linger_ms=100)
    acc.set_partitions("t", 2)
    acc.append("t", b"x", partition=0)
    created = acc.topics["t"].queues[0].open.created  # type: ignore[index,union-attr]
    assert acc.seal_ready(created + 0.05) == pytest.approx(created + 0.1)
    assert sealed(acc) == []
    assert acc.seal_ready(created + 0.1) is None
    assert [b.count for b in sealed(acc)] == [1]
    acc.append("t", b"y", partition=1)
    acc.flushing += 1
    acc.seal_ready(created)
    assert [b.count for b in sealed(acc)] == [1, 1]


def test_keys_go_by_murmur2_and_null_keys_stick() -> None:
    acc = make(batch_size=1 << 20)
    acc.set_partitions("t", 5)
    for i in range(50):
        key = b"key-%d" % i
        fut = acc.append("t", b"v", key=key)
        assert fut[0].partition == murmur2_partition(key, 5)
    parts = {acc.append("t", b"v")[0].partition for _ in range(50)}
    assert len(parts) == 1


def test_sticky_moves_when_its_batch_fills() -> None:
    acc = make(batch_size=BATCH_OVERHEAD + 2 * (RECORD_OVERHEAD + 1))
    acc.set_partitions("t", 4)
    parts = [acc.append("t", b"x")[0].partition for _ in range(8)]
    assert len(set(parts)) > 1
    assert parts[0] == parts[1]


def test_headers_and_timestamps_are_filled_lazily() -> None:
    acc = make()
    acc.set_partitions("t", 1)
    acc.append("t", b"a")
    f = acc.append("t", b"b", headers=[("h", b"1")], timestamp_ms=42)
    acc.append("t", b"c")
    b = acc.topics["t"].queues[0].open  # type: ignore[index]
    assert b.headers == [(), [("h", b"1")], ()]  # type: ignore[union-attr]
    assert b.timestamps == [None, 42, None]  # type: ignore[union-attr]
    b.result.set_result(0)  # type: ignore[union-attr]
    assert f.result(1).timestamp == 42
    assert RecordFuture((b.result, 0)).result(1).timestamp == b.result.base_timestamp  # type: ignore[union-attr]


def test_bad_input_is_a_typed_error() -> None:
    acc = make()
    acc.set_partitions("t", 2)
    with pytest.raises(KafkaCodecError):
        acc.append("t", "text is not bytes")
    with pytest.raises(KafkaCodecError):
        acc.append("t", b"v", key=123)
    with pytest.raises(KafkaConfigError):
        acc.append("t", b"v", partition=2)
    acc.append("t", memoryview(b"ok"), key=bytearray(b"k"))


def test_memory_full_blocks_then_times_out() -> None:
    acc = make(buffer_memory=100, max_block_ms=50)
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    with pytest.raises(KafkaTimeoutError):
        acc.append("t", b"y" * 60)


def test_memory_released_unblocks_a_waiting_sender() -> None:
    acc = make(buffer_memory=150, max_block_ms=30_000, batch_size=50)
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    acc.append("t", b"x" * 10)  # seals the first batch
    first = sealed(acc)[0]
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(acc.append("t", b"z" * 60)))
    t.start()
    t.join(0.2)
    assert not done
    acc.release(first)
    t.join(10)
    assert len(done) == 1


def test_async_face_gets_buffer_full_instead_of_blocking() -> None:
    from kafka_core.producer.accumulator import BufferFull

    acc = make(buffer_memory=100)
    acc.block = False
    acc.set_partitions("t", 1)
    acc.append("t", b"x" * 60)
    with pytest.raises(BufferFull):
        acc.append("t", b"y" * 60)


def test_parked_records_forward_to_real_batches() -> None:
    acc = make()
    f1 = acc.append("new", b"a", key=b"k")
    f2 = acc.append("new", b"b", partition=1)
    f3 = acc.append("new", b"c", partition=9)
    assert not f1.done()
    forwards = acc.set_partitions("new", 3)
    for result, targets in forwards:
        result.forward(targets)
    assert f3.done() and isinstance(f3.exception(0), KafkaConfigError)
    target, index = f2[0].resolve(f2[1])
    assert target.partition == 1
    target.set_result(10)
    assert f2.result(1).offset == 10 + index
    assert f1[0].resolve(f1[1])[0].partition == murmur2_partition(b"k", 3)


def test_callbacks_follow_forwarding_and_run_once() -> None:
    acc = make()
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


def test_abandon_all_counts_records() -> None:
    acc = make()
    acc.set_partitions("t", 2)
    for i in range(5):
        acc.append("t", b"x", partition=i % 2)
    acc.append("parked", b"y")
    taken = acc.abandon_all()
    assert sum(n for _, n in taken) == 6
    assert acc.closed


def test_plan_chunks_cuts_arrow_columns_by_size() -> None:
    pa = pytest.importorskip("pyarrow")
    acc = make(batch_size=1 << 20)
    acc.set_partitions("t", 3)
    values = pa.array([b"v" * 100] * 25_000, pa.binary())
    chunks = plan_chunks(acc.topics["t"], acc.partitioner, values, None, None, None, None, 1 << 20)
    assert len({c.partition for c in chunks}) == 1
    assert sum(c.count for c in chunks) == 25_000
    assert all(c.size <= 1 << 20 for c in chunks)
    assert [c.rows[0] for c in chunks] == sorted(c.rows[0] for c in chunks)
    assert chunks[0].values.equals(values.slice(0, chunks[0].count))


def test_plan_chunks_groups_keys_by_partition() -> None:
    acc = make()
    acc.set_partitions("t", 4)
    keys = [b"k%d" % i for i in range(100)]
    values = [b"v%d" % i for i in range(100)]
    chunks = plan_chunks(acc.topics["t"], acc.partitioner, values, keys, None, None, None, 1 << 20)
    seen = {}
    for c in chunks:
        for row, k, v in zip(c.rows, c.keys, c.values, strict=True):
            assert k == keys[row] and v == values[row]
            assert c.partition == murmur2_partition(k, 4)
            seen[row] = c.partition
    assert sorted(seen) == list(range(100))


@given(
    st.lists(st.none() | st.sampled_from([b"a", b"b", b"c", b"dd", b"eee"]), min_size=1, max_size=300),
    st.integers(1, 6),
    st.integers(200, 3000),
)
def test_plan_chunks_arrow_keys_keep_per_key_order(keys: list, num: int, batch_size: int) -> None:
    """pyarrow keys: every row once, in its murmur2 partition (null keys sticky), in input order
    within each partition, and the columns taken along with their rows."""
    pa = pytest.importorskip("pyarrow")
    acc = make()
    acc.set_partitions("t", num)
    values = pa.array([b"v%d" % i for i in range(len(keys))])
    headers = [[("i", b"%d" % i)] for i in range(len(keys))]
    chunks = plan_chunks(
        acc.topics["t"], acc.partitioner, values, pa.array(keys, pa.binary()), None, headers, None, batch_size
    )
    placed: dict[int, list[int]] = {}
    for c in chunks:
        rows = list(c.rows) if not hasattr(c.rows, "to_pylist") else c.rows.to_pylist()
        got_values = c.values.to_pylist()
        for j, row in enumerate(rows):
            assert got_values[j] == values[row].as_py() and c.headers[j] == headers[row]
            if keys[row] is not None:
                assert c.partition == murmur2_partition(keys[row], num)
            placed.setdefault(c.partition, []).append(row)
    assert sorted(r for rows in placed.values() for r in rows) == list(range(len(keys)))
    assert all(rows == sorted(rows) for rows in placed.values())
    null_parts = {p for p, rows in placed.items() for r in rows if keys[r] is None}
    assert len(null_parts) <= 1


def test_plan_chunks_rejects_mismatched_columns() -> None:
    acc = make()
    acc.set_partitions("t", 1)
    with pytest.raises(KafkaCodecError):
        plan_chunks(acc.topics["t"], acc.partitioner, [b"a", b"b"], [b"k"], None, None, None, 1000)
    with pytest.raises(KafkaConfigError):
        plan_chunks(acc.topics["t"], acc.partitioner, [b"a"], None, 3, None, None, 1000)


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


# -- the sender against a scripted in-memory broker (faults on demand) ------------------------------


def _run_producer(broker: ProduceBroker, n: int, **options: Any) -> tuple[list[Any], list[Any]]:
    from kafka_core.producer import AsyncKafkaProducer

    async def main() -> tuple[list[Any], list[Any]]:
        p = AsyncKafkaProducer(
            client=broker,
            linger_ms=0,
            batch_size=400,
            retry_backoff_ms=1,
            delivery_timeout_ms=20_000,
            request_timeout_ms=10_000,
            **options,
        )
        await p.start()
        futures = []
        for i in range(n):
            futures.append(await p.send("t", b"r%05d" % i, key=b"k%d" % (i % 7)))
            if i % 50 == 0:
                await asyncio.sleep(0.002)
        await p.flush(30)
        outcomes = []
        for f in futures:
            try:
                outcomes.append(await f)
            except Exception as exc:
                outcomes.append(exc)
        await p.close()
        return futures, outcomes

    return asyncio.run(main())


def _assert_exactly_once_in_order(broker: ProduceBroker, n: int, outcomes: list[Any]) -> None:
    expected: dict[int, list[bytes]] = {p: [] for p in range(broker.partitions)}
    for i in range(n):
        expected[murmur2_partition(b"k%d" % (i % 7), broker.partitions)].append(b"r%05d" % i)
    assert broker.logs == expected  # nothing lost, nothing twice, per-partition order kept
    for i, meta in enumerate(outcomes):
        assert isinstance(meta, RecordMetadata), meta
        assert broker.logs[meta.partition][meta.offset] == b"r%05d" % i


def test_sender_clean_run_pipelines_and_numbers_sequences() -> None:
    broker = ProduceBroker(3)
    _futures, outcomes = _run_producer(broker, 600)
    _assert_exactly_once_in_order(broker, 600, outcomes)
    assert broker.init_calls == [(-1, -1)]


@pytest.mark.parametrize("seed", range(8))
def test_idempotent_retries_never_duplicate_or_reorder(seed: int) -> None:
    rng = random.Random(seed)
    plan: dict[tuple[int, str], str] = {}
    for n in range(400):
        roll = rng.random()
        if roll < 0.06:
            plan[(n, "before")] = "disconnect"
        elif roll < 0.12:
            plan[(n, "after")] = "lose-response"  # written, but the producer cannot know
        elif roll < 0.18:
            plan[(n, "partition")] = rng.choice(
                ["6", "7", "19"]
            )  # NOT_LEADER, TIMED_OUT, NOT_ENOUGH_REPLICAS
    broker = ProduceBroker(3, faults=lambda n, kind, p: plan.get((n, kind)))
    _futures, outcomes = _run_producer(broker, 1500, max_in_flight=5)
    _assert_exactly_once_in_order(broker, 1500, outcomes)


def test_unknown_producer_id_bumps_epoch_and_continues() -> None:
    broker = ProduceBroker(3)
    original = broker.append

    def forgetful(p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        if len(broker.requests) == 30 and broker.state:
            broker.forget_producers()  # e.g. the broker expired our producer state
        return original(p, data, pid, epoch, seq, count)

    broker.append = forgetful  # type: ignore[method-assign]
    _futures, outcomes = _run_producer(broker, 800)
    _assert_exactly_once_in_order(broker, 800, outcomes)
    assert len(broker.init_calls) >= 2 and broker.init_calls[1][0] >= 0  # a KIP-360 bump, same id


def test_non_retriable_error_fails_that_batch_only() -> None:
    failed_once: list[int] = []

    def faults(n: int, kind: str, p: int) -> str | None:
        if kind == "partition" and n == 12 and not failed_once:
            failed_once.append(p)
            return "87"  # INVALID_RECORD: not retriable
        return None

    broker = ProduceBroker(3, faults=faults)
    _futures, outcomes = _run_producer(broker, 600)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert errors and all(getattr(e, "code", None) == 87 for e in errors)
    delivered = [i for i, o in enumerate(outcomes) if isinstance(o, RecordMetadata)]
    assert len(delivered) + len(errors) == 600
    for p, log in broker.logs.items():  # the rest arrived once each, in order
        sent = [b"r%05d" % i for i in delivered if murmur2_partition(b"k%d" % (i % 7), 3) == p]
        assert log == sent


def test_non_idempotent_keeps_order_through_retries() -> None:
    rng = random.Random(9)
    plan = {(n, "partition"): "6" for n in range(300) if rng.random() < 0.15}
    plan.update({(n, "before"): "disconnect" for n in range(300) if rng.random() < 0.05})
    broker = ProduceBroker(3, faults=lambda n, kind, p: plan.get((n, kind)))
    _futures, outcomes = _run_producer(broker, 700, acks=1)
    _assert_exactly_once_in_order(broker, 700, outcomes)


def test_accelerated_and_python_send_paths_build_the_same_batches() -> None:
    from kafka_core.producer.futures import _accel

    if _accel is None:
        pytest.skip("the producer extension is not built (pure-Python path only)")
    results = []
    for use_accel in (True, False):
        acc = make(batch_size=BATCH_OVERHEAD + 5 * (RECORD_OVERHEAD + 3), partitioner_seed=11)
        acc.set_partitions("t", 3)
        send = acc.append if use_accel else Accumulator.append.__get__(acc)
        assert isinstance(send, _accel.FastAppend) is use_accel
        futures = []
        for i in range(40):
            key = b"k%d" % i if i % 9 == 0 else None
            headers = [("h", b"1")] if i % 13 == 0 else None
            futures.append(send("t", b"%03d" % i, key=key, headers=headers))
        futures.append(send("t", bytearray(b"ba")))
        batches = [
            (q.partition, b.values, b.keys, b.headers, b.count, b.size)
            for q in acc.topics["t"].queues  # type: ignore[union-attr]
            for b in [*q.sealed, *([q.open] if q.open else [])]
        ]
        results.append((batches, [(f[0].partition, f[1]) for f in futures], acc.mem.used))
    assert results[0] == results[1]


@pytest.mark.parametrize("acks", [1, "all"])
def test_message_too_large_splits_the_batch(acks: object) -> None:
    broker = ProduceBroker(3, max_records=2)
    _futures, outcomes = _run_producer(broker, 300, acks=acks)
    _assert_exactly_once_in_order(broker, 300, outcomes)


@pytest.mark.parametrize("acks", [1, "all"])
def test_oversized_record_fails_alone(acks: object) -> None:
    from kafka_core.producer import AsyncKafkaProducer

    broker = ProduceBroker(1, max_bytes=2000)

    async def main() -> list[Any]:
        async with AsyncKafkaProducer(
            client=broker, linger_ms=0, batch_size=1500, retry_backoff_ms=1, acks=acks
        ) as p:
            futures = [await p.send("t", b"small-%03d" % i) for i in range(40)]
            futures.insert(20, await p.send("t", b"B" * 5000))
            futures += [await p.send("t", b"small-%03d" % i) for i in range(40, 80)]
            await p.flush(30)
            out = []
            for f in futures:
                try:
                    out.append(await f)
                except Exception as exc:
                    out.append(exc)
            return out

    outcomes = asyncio.run(main())
    big = outcomes.pop(20)
    assert getattr(big, "code", None) == 10
    assert all(isinstance(o, RecordMetadata) for o in outcomes)
    assert broker.logs[0] == [b"small-%03d" % i for i in range(80)]


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string", "large_string"])
def test_arrow_sizes_read_off_offsets_match_pyarrow(kind: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pc = pytest.importorskip("pyarrow.compute")
    from kafka_core.producer.batching import _arrow_bytes

    typ = getattr(pa, kind)()
    raw = [None if i % 5 == 0 else "x" * (i % 17) for i in range(200)]
    vals = [v if v is None or "string" in kind else v.encode() for v in raw]
    sliced = pa.array(vals, typ).slice(13, 150)
    for start, stop in ((0, 150), (7, 99), (40, 41), (5, 5)):
        expected = pc.sum(pc.binary_length(sliced.slice(start, stop - start))).as_py() or 0
        assert _arrow_bytes(sliced, start, stop) == expected
