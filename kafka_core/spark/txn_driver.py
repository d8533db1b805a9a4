"""The driver's half of the transactional sink: end every task's transaction when the write
commits or aborts.

Each task prepared its transaction (``{prefix}-{task partition}``) and returned it in its commit
message; the driver commits them all, or aborts them. A task that failed or was killed returned
nothing, and its transaction may still be open: left alone the broker aborts it only after
``transactionTimeoutMs`` (15 minutes by default), and until then read_committed readers of its
partitions stop at its first record. So on abort the driver also fences the transactional id of
every task that returned nothing, which aborts what it left open at once.
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
    from kafka_core.spark.source import KafkaCommitMessage

log = logging.getLogger("kafka_core.spark")

__all__ = ["abort_all", "complete_prepared"]

# How many coordinator calls the driver has in flight at once, each over a client of its own: a
# broker that answers one bad EndTxn by dropping the connection (Tansu does, for a fenced epoch)
# must not take the other tasks' commits down with it.
_CONCURRENCY = 16
# The driver's abort waits no longer than this (Spark is failing the write already).
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


def complete_prepared(options: SinkOptions, tasks: list[KafkaCommitMessage], where: str) -> None:
    """Commit every task's prepared transaction; raise naming those that did and did not commit.

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
    options: SinkOptions, tasks: list[KafkaCommitMessage], unfinished: list[int], where: str
) -> None:
    """Abort the prepared transactions of the tasks that finished, and fence the transactional
    ids of the task partitions in ``unfinished`` (failed, killed or never run), which aborts
    whatever their attempts left open. Never raises: Spark is failing the write already."""
    from kafka_core.aio import fence_transactional_id

    prepared = _prepared(tasks)

    def fence(task_partition: int) -> Job:
        txn_id = options.transactional_id(task_partition)
        return lambda left, kw: fence_transactional_id(
            txn_id, transaction_timeout_ms=options.transaction_timeout_ms, timeout=left, **kw
        )

    jobs = [_end(txn, False) for _, txn in prepared] + [fence(i) for i in unfinished]
    try:  # best effort, a minute at most: the broker aborts them after transactionTimeoutMs anyway
        errors = _run_all(options, jobs, min(options.transaction_timeout_ms / 1000.0, _ABORT_TIMEOUT_S))
    except Exception as exc:
        log.warning(
            "Kafka transactional write%s aborted, but its transactions could not be ended (%s): the "
            "broker aborts them after transactionTimeoutMs",
            where,
            exc,
        )
        return
    ended = [(m, error) for (m, _), error in zip(prepared, errors, strict=False)]
    fenced = errors[len(prepared) :]
    for m, error in ended:
        if error is not None:
            log.warning("Kafka transactional write%s: aborting %s: %s", where, _txn_name(m), error)
    for task_partition, error in zip(unfinished, fenced, strict=True):
        if error is not None:
            log.warning(
                "Kafka transactional write%s: fencing %r (task partition %d, which returned nothing): %s; "
                "the broker aborts what it left open after transactionTimeoutMs",
                where,
                options.transactional_id(task_partition),
                task_partition,
                error,
            )
    log.warning(
        "Kafka transactional write%s aborted: %d of %d prepared task transactions aborted; the "
        "transactional ids of %d of %d task partitions that returned nothing fenced (what they left open aborted)",
        where,
        sum(1 for _, error in ended if error is None),
        len(ended),
        sum(1 for error in fenced if error is None),
        len(fenced),
    )
