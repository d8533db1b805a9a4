"""The driver's half of the transactional sink: end every task's transaction when the write
commits or aborts.

Each task prepared its transaction (``{prefix}-{task partition}``) and returned it in its commit
message; the driver commits them all, or aborts them. A task that failed or was killed returned
nothing, and its transaction may still be open: left alone the broker aborts it only after
``transactionTimeoutMs`` (15 minutes by default), and until then read_committed readers of its
partitions stop at its first record. So on abort the driver also fences the transactional id of
every task partition, which aborts what any attempt left open at once. Before either, the
driver marks the write ended so that an attempt still starting then begins nothing
(``txn_mark``, which says why the order closes the race).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from kafka_core.errors import KafkaTimeoutError, KafkaTransactionError
from kafka_core.spark.options import SinkOptions

if TYPE_CHECKING:
    from kafka_core.producer import PreparedTransaction
    from kafka_core.spark.tasks import KafkaCommitMessage

log = logging.getLogger("kafka_core.spark")

__all__ = ["abort_all", "complete_prepared"]

# How many coordinator calls the driver has in flight at once, each over a client of its own: a
# broker that answers one bad EndTxn by dropping the connection (Tansu does, for a fenced epoch)
# must not take the other tasks' commits down with it.
_CONCURRENCY = 16
# The driver's abort waits no longer than this (Spark is failing the write already), nor its
# end mark before a commit.
_ABORT_TIMEOUT_S = 60.0

Job = Callable[[float, dict[str, Any]], Awaitable[Any]]  # (seconds left, client options)


def _run_all(options: SinkOptions, jobs: Sequence[Job], timeout: float) -> list[BaseException | None]:
    """Run ``jobs`` concurrently, all within ``timeout`` s (the broker's clock runs for all of
    them at once); each one's error, or None."""
    from kafka_core.config import client_keywords

    client_options, _ = client_keywords(options.producer)

    async def run() -> list[BaseException | None]:
        gate = asyncio.Semaphore(_CONCURRENCY)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        async def one(job: Job) -> None:
            async with gate:
                left = deadline - loop.time()
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"not done: the driver's {timeout:g} s ran out while the other transactions were being ended"
                    )
                await job(left, client_options)

        results = await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)
        return [r if isinstance(r, BaseException) else None for r in results]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called inside a loop: ours on a thread
        return pool.submit(asyncio.run, run()).result()


def _end(txn: PreparedTransaction, commit: bool) -> Job:
    from kafka_core.aio import complete_transaction

    return lambda left, kw: complete_transaction(txn, commit=commit, timeout=left, **kw)


def _prepared(tasks: list[KafkaCommitMessage]) -> list[tuple[KafkaCommitMessage, PreparedTransaction]]:
    return [(m, m.prepared) for m in tasks if m.prepared is not None]


def _txn_name(m: KafkaCommitMessage) -> str:
    assert m.prepared is not None
    p = m.prepared
    return f"task partition {m.task_partition} ({p.transactional_id!r}, producer id {p.producer_id}, epoch {p.producer_epoch})"


def _fence_job(options: SinkOptions, txn_id: str) -> Job:
    from kafka_core.aio import fence_transactional_id

    return lambda left, kw: fence_transactional_id(
        txn_id, transaction_timeout_ms=options.transaction_timeout_ms, timeout=left, **kw
    )


def _mark_ended(options: SinkOptions, where: str, timeout: float) -> None:
    """Create the write's end mark (one InitProducerId) before any task's id is ended. Never
    raises: without it the write still ends, only a late attempt could then leave its
    transaction open until transactionTimeoutMs (as without DescribeTransactions)."""
    if options.write_id is None:
        return
    error: BaseException | None
    try:
        (error,) = _run_all(options, [_fence_job(options, options.end_mark_id())], timeout)
    except Exception as exc:
        error = exc
    if error is not None:
        log.warning(
            "Kafka transactional write%s: could not mark it ended (%r: %s); a task attempt starting "
            "after it ends may leave a transaction open until transactionTimeoutMs",
            where,
            options.end_mark_id(),
            error,
        )


def complete_prepared(
    options: SinkOptions, tasks: list[KafkaCommitMessage], where: str, *, mark_ended: bool = False
) -> None:
    """Commit every task's prepared transaction; raise naming those that did and did not commit.

    With ``mark_ended`` (a batch write: a micro-batch shares its write id with the next ones)
    the write's end mark is created first, so that a retried or speculative attempt still
    starting begins nothing after the commit (``txn_mark``).

    Not atomic across tasks: when some commits fail the others stay committed, and a fenced or
    timed-out transaction's records were aborted, so the write must fail, never pass silently."""
    missing = sorted(m.task_partition for m in tasks if m.prepared is None)
    if missing:
        raise KafkaTransactionError(
            f"Kafka transactional write{where}: task partitions {missing} returned no prepared transaction"
        )
    log.info(  # what an operator needs to finish the job by hand should this driver die now
        "Kafka transactional write%s: committing %s",
        where,
        ", ".join(f"{_txn_name(m)}" for m in tasks if m.prepared is not None and m.prepared.producer_id >= 0)
        or "no transaction (nothing written)",
    )
    if mark_ended:
        _mark_ended(options, where, min(options.transaction_timeout_ms / 1000.0, _ABORT_TIMEOUT_S))
    prepared = _prepared(tasks)
    errors = _run_all(
        options, [_end(txn, True) for _, txn in prepared], options.transaction_timeout_ms / 1000.0
    )
    outcomes = [(m, error) for (m, _), error in zip(prepared, errors, strict=True)]
    failed = [(m, exc) for m, exc in outcomes if exc is not None]
    if not failed:
        return
    committed = sorted(m.task_partition for m, exc in outcomes if exc is None)
    details = "; ".join(
        f"{_txn_name(m)}: {exc}" for m, exc in sorted(failed, key=lambda f: f[0].task_partition)
    )
    first = failed[0][1]
    raise KafkaTransactionError(
        f"Kafka transactional write{where} failed: {len(failed)} of {len(outcomes)} task transactions did not "
        f"commit ({details}); committed task partitions: {committed or 'none'} (their records are "
        "visible to read_committed readers: the commit is not atomic across tasks)",
        code=getattr(first, "code", None),
    ) from first


def abort_all(
    options: SinkOptions, tasks: list[KafkaCommitMessage], task_partitions: int, where: str
) -> None:
    """Mark the write ended, then fence the transactional id of every task partition (those
    that prepared, failed, were killed or never ran), which aborts whatever any of their attempts
    left open. The mark first: an attempt still starting when the job failed (Spark does not wait
    for a task's Python writer) finds it after its own InitProducerId and begins nothing, and one
    whose InitProducerId came earlier is fenced here (``kafka_core.spark.txn_mark``). Never
    raises: Spark is failing the write already."""
    timeout = min(options.transaction_timeout_ms / 1000.0, _ABORT_TIMEOUT_S)
    prepared = {m.task_partition: m for m in tasks if m.prepared is not None}

    def end_and_fence(task_partition: int, txn_id: str) -> Job:
        """A prepared transaction is aborted by its own EndTxn first (a fence alone does not end
        it on every broker: librdkafka's mock cluster writes no marker), then the id is fenced."""

        async def job(left: float, kw: dict[str, Any]) -> None:
            m = prepared.get(task_partition)
            if m is not None and m.prepared is not None:
                start = asyncio.get_running_loop().time()
                try:
                    await _end(m.prepared, False)(left, kw)
                except Exception as exc:  # fenced already, or timed out: the fence below still runs
                    log.warning("Kafka transactional write%s: aborting %s: %s", where, _txn_name(m), exc)
                left -= asyncio.get_running_loop().time() - start
            await _fence_job(options, txn_id)(max(left, 0.001), kw)

        return job

    partitions = sorted(set(range(task_partitions)) | set(prepared))
    ids = [options.transactional_id(i) for i in partitions]
    try:  # best effort, a minute at most: the broker aborts them after transactionTimeoutMs anyway
        _mark_ended(options, where, timeout)  # again after a failed commit: one InitProducerId
        errors = _run_all(
            options, [end_and_fence(i, txn_id) for i, txn_id in zip(partitions, ids, strict=True)], timeout
        )
    except Exception as exc:
        log.warning(
            "Kafka transactional write%s aborted, but its transactions could not be ended (%s): the "
            "broker aborts them after transactionTimeoutMs",
            where,
            exc,
        )
        return
    for task_partition, txn_id, error in zip(partitions, ids, errors, strict=True):
        if error is not None:
            what = _txn_name(prepared[task_partition]) if task_partition in prepared else repr(txn_id)
            log.warning(
                "Kafka transactional write%s: fencing %s (task partition %d): %s; the broker aborts "
                "what it left open after transactionTimeoutMs",
                where,
                what,
                task_partition,
                error,
            )
    log.warning(
        "Kafka transactional write%s aborted: the transactional ids of %d of %d task partitions fenced "
        "(what they left open aborted, %d of them prepared)",
        where,
        sum(1 for error in errors if error is None),
        len(ids),
        len(prepared),
    )
