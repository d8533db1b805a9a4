"""Exactly-once consume-transform-produce: input topic -> upper-cased values -> output topic.

Each batch polled from the input is written to the output and its input offsets are committed
to the consumer group in ONE transaction (KIP-98 / KIP-447): either both happen or neither. A
consumer reading the output with ``isolation_level="read_committed"`` sees every input record's
result exactly once, whatever crashes and restarts happen in between:

- a crash in the middle of a transaction: the transaction is never committed, so its output
  stays invisible and its offsets uncommitted; the restarted instance (same transactional id)
  aborts it and reprocesses the batch from the committed offsets;
- a zombie (an old instance still running after its replacement started): the new instance's
  ``init_transactions`` fences it; its next transactional call raises KafkaProducerFencedError;
- an abortable error (a record that could not be written, ...): the transaction is aborted and
  the consumer rewinds to the committed offsets, so the batch is processed again.

    python examples/exactly_once.py --bootstrap 127.0.0.1:9092 --input in --output out \
        --group upper --transactional-id upper-0

Stops after ``--idle`` seconds without input (or on Ctrl-C). Records keep their key and go to the
same partition number of the output topic, so the output keeps the input's order per partition.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_core.errors import KafkaTimeoutError, KafkaTransactionError


def upper(value: bytes | None) -> bytes | None:
    return None if value is None else bytes(value).upper()


class Processor:
    """One instance of the loop: a read_committed group consumer and a transactional producer.

    The transactional id must be stable across restarts of the same instance (that is what fences
    its zombie) and distinct between instances running side by side.
    """

    def __init__(
        self,
        bootstrap: str,
        input_topic: str,
        output_topic: str,
        group_id: str,
        transactional_id: str,
        *,
        transform: Callable[[bytes | None], bytes | None] = upper,
        max_records: int = 100,
        consumer_options: dict[str, Any] | None = None,
        producer_options: dict[str, Any] | None = None,
    ) -> None:
        self.output_topic = output_topic
        self.transform = transform
        self.max_records = max_records
        self.processed = 0  # input records whose transaction committed
        self.aborted = 0  # transactions aborted after an abortable error
        # What this instance committed last, per partition: where to rewind after an abort.
        self._committed: dict[TopicPartition, int] = {}
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            topics=[input_topic],
            group_id=group_id,
            enable_auto_commit=False,  # offsets are committed by the transaction, nowhere else
            isolation_level="read_committed",  # an upstream transactional writer's aborts stay hidden
            auto_offset_reset="earliest",
            on_revoke=self._forget,
            on_lost=self._forget,
            **(consumer_options or {}),
        )
        self.producer = KafkaProducer(
            bootstrap, transactional_id=transactional_id, **(producer_options or {})
        )
        try:
            # Fences any older instance with this id and aborts the transaction it left open.
            self.producer.init_transactions()
        except BaseException:
            self.close()
            raise

    @property
    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The input offsets this instance's transactions committed (the next offset per partition)."""
        return dict(self._committed)

    def _forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop(tp, None)

    # -- the three parts of one step (separate so that a test can stop between them) ----------

    def poll(self, timeout_ms: float = 1_000) -> list[Any]:
        return self.consumer.poll(timeout_ms, max_records=self.max_records)

    def write(self, batch: list[Any]) -> dict[TopicPartition, int]:
        """Begin a transaction holding the batch's results and its input offsets."""
        offsets: dict[TopicPartition, int] = {}
        self.producer.begin_transaction()
        for m in batch:
            self.producer.send(self.output_topic, self.transform(m.value), key=m.key, partition=m.partition)
            offsets[TopicPartition(m.topic, m.partition)] = m.offset + 1  # the NEXT offset to read
        # group_metadata (generation, member id) lets the coordinator refuse a zombie (KIP-447).
        self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
        return offsets

    def commit(self, offsets: dict[TopicPartition, int], batch_size: int, attempts: int = 3) -> None:
        for attempt in range(attempts):
            try:
                self.producer.commit_transaction()
                break
            except KafkaTimeoutError:
                # The commit goes on in the background: calling it again waits for it.
                if attempt == attempts - 1:
                    raise
        self._committed.update(offsets)
        self.processed += batch_size

    def step(self, timeout_ms: float = 1_000) -> int:
        """Process one batch in one transaction; returns how many input records it held."""
        batch = self.poll(timeout_ms)
        if not batch:
            return 0
        try:
            offsets = self.write(batch)
            self.commit(offsets, len(batch))
        except KafkaTransactionError as exc:
            if not exc.abortable:
                raise  # fatal (fenced, not authorized...): this instance must stop
            self.producer.abort_transaction()
            self.aborted += 1
            self.rewind()
            return 0
        return len(batch)

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset: the aborted batch comes again."""
        assigned = sorted(self.consumer.assignment())
        unknown = [tp for tp in assigned if tp not in self._committed]
        from_group = self.consumer.committed(unknown) if unknown else {}
        for tp in assigned:
            offset = self._committed.get(tp, from_group.get(tp))
            if offset is None:
                self.consumer.seek_to_beginning([tp])
            else:
                self.consumer.seek(tp, offset)

    def run(self, idle_s: float = 10.0) -> int:
        """Process until no input came for ``idle_s`` seconds; returns the records processed."""
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            # Idle counts from the first assignment: joining the group is not a lack of input.
            if self.step(500) or not self.consumer.assignment():
                last = time.monotonic()
        return self.processed

    def close(self) -> None:
        # commit=False: the group's offsets move only inside transactions.
        self.consumer.close(commit=False)
        self.producer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--idle", type=float, default=10.0, help="stop after this many seconds without input")
    args = parser.parse_args(argv)
    proc = Processor(args.bootstrap, args.input, args.output, args.group, args.transactional_id)
    try:
        proc.run(args.idle)
    except KeyboardInterrupt:
        pass  # an open transaction is aborted by the next instance's init_transactions
    finally:
        proc.close()
    print(f"processed {proc.processed} records, {proc.aborted} transactions aborted and retried")
    return 0


if __name__ == "__main__":
    sys.exit(main())
