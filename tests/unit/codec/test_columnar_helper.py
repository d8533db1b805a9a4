"""The columnar decoder's helper thread (_codec/overlap.h) scans a large uncompressed batch while
the decoding thread checks its CRC. Whatever thread does the scan, the columns must be exactly
the serial ones, a bad CRC must still fail first, and concurrent decodes, fork() and the switch
must all behave. The tests make a decode wait for the helper to take its job (it would otherwise
take the job back when the helper is slow) and hand over batches from 16 KiB, so the helper's
scan is what they check, on batches small enough for hypothesis."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("the helper thread is the Cython decoder's", allow_module_level=True)

pa = need_module("pyarrow")

from crc32c import crc32c  # noqa: E402
from test_columnar_fast_path import check_same, raw_batch, raw_record, record_rows  # noqa: E402

from kafka_core.codec._cython import columnar as ccol  # noqa: E402
from kafka_core.errors import KafkaCodecError  # noqa: E402

BIG = 16 * 1024  # records regions from this size go to the helper (256 KiB outside the tests)


@pytest.fixture(autouse=True)
def helper_takes_every_job() -> Iterator[None]:
    previous = ccol.set_decode_helper(True)
    tuning = ccol._decode_helper_testing(True, BIG)
    try:
        yield
    finally:
        ccol._decode_helper_testing(*tuning)
        ccol.set_decode_helper(previous)


def big_batch(n: int = 300, value_size: int = 100, base_offset: int = 0, headers_every: int = 0) -> bytes:
    recs = []
    for i in range(n):
        headers = [(b"h", bytes([i % 256]) * 3)] if headers_every and i % headers_every == 0 else []
        key = None if i % 17 == 0 else b"key-%06d" % i
        value = None if i % 29 == 0 else bytes([i % 251]) * value_size
        recs.append(raw_record(i, i % 7, key, value, headers))
    buf = raw_batch(recs, base_offset=base_offset)
    assert len(buf) - 61 >= BIG
    return buf


def serial(buf: bytes) -> pa.RecordBatch:
    previous = ccol.set_decode_helper(False)
    try:
        return ccol.decode_record_batches_columns(buf).to_arrow()
    finally:
        ccol.set_decode_helper(previous)


def test_the_helper_scans_and_the_columns_are_the_serial_ones() -> None:
    buf = big_batch(headers_every=37) + big_batch(base_offset=300, value_size=700)
    jobs = ccol._decode_helper_jobs()
    kind, table = check_same(buf)
    assert kind == "ok" and table.num_rows == 600
    assert ccol._decode_helper_jobs() >= jobs + 2  # one scan per batch (check_same decodes once)
    assert ccol.decode_record_batches_columns(buf).to_arrow().equals(serial(buf))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # values of 300 B or more, so that most batches reach the helper (16 KiB here)
    rows=record_rows(
        st.none() | st.builds(lambda n, b: bytes([b]) * n, st.integers(300, 2000), st.integers(0, 255)),
        40,
        80,
    ),
    cut=st.none() | st.integers(0, 20_000),
    truncate=st.booleans(),
)
def test_any_large_batch_matches(rows: list[tuple], cut: int | None, truncate: bool) -> None:
    buf = raw_batch([raw_record(*row) for row in rows], last_delta=0)
    jobs = ccol._decode_helper_jobs()
    large = len(buf) - 61 >= BIG
    if cut is not None and cut < len(buf) - 61:
        # corrupt one byte of the records region (CRC fixed up, so the structure is what fails)
        pos = 61 + cut
        buf = buf[:pos] + bytes([buf[pos] ^ 0x41]) + buf[pos + 1 :]
        buf = buf[:17] + struct.pack(">I", crc32c(buf[21:])) + buf[21:]
    if truncate:
        buf = buf + buf[: len(buf) // 2]  # a trailing partial batch, as a Fetch ends
    check_same(buf)
    assert ccol._decode_helper_jobs() == jobs + large


def test_a_bad_crc_fails_first_and_the_helper_stays_usable() -> None:
    buf = big_batch()
    flipped = buf[:5000] + bytes([buf[5000] ^ 1]) + buf[5001:]
    with pytest.raises(KafkaCodecError, match="CRC mismatch"):
        ccol.decode_record_batches_columns(flipped)
    # a record count that cannot fit, in a batch whose CRC is wrong: the CRC is reported
    forged = flipped[:57] + struct.pack(">i", 10**6) + flipped[61:]
    with pytest.raises(KafkaCodecError, match="CRC mismatch"):
        ccol.decode_record_batches_columns(forged)
    jobs = ccol._decode_helper_jobs()
    assert ccol.decode_record_batches_columns(buf).to_arrow().equals(serial(buf))
    assert ccol._decode_helper_jobs() == jobs + 1


def test_concurrent_decodes_share_one_helper() -> None:
    ccol._decode_helper_testing(False, BIG)  # a decode that finds the helper busy scans itself
    bufs = [big_batch(base_offset=k * 1000, value_size=80 + 40 * k) for k in range(4)]
    expected = [serial(b) for b in bufs]
    failures: list[str] = []

    def work(k: int) -> None:
        wrong = sum(
            not ccol.decode_record_batches_columns(bufs[k]).to_arrow().equals(expected[k]) for _ in range(40)
        )
        if wrong:
            failures.append(f"thread {k}: {wrong} of 40 decodes differ")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_a_forked_child_gets_a_helper_of_its_own() -> None:
    buf = big_batch()
    expected = serial(buf)
    assert ccol.decode_record_batches_columns(buf).to_arrow().equals(expected)  # helper running
    pid = os.fork()
    if pid == 0:  # the child: the parent's helper thread did not come along
        code = 1
        try:
            jobs = ccol._decode_helper_jobs()
            ok = ccol.decode_record_batches_columns(buf).to_arrow().equals(expected)
            code = 0 if ok and ccol._decode_helper_jobs() == jobs + 1 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_switch_and_its_environment_variable() -> None:
    assert ccol.set_decode_helper(False) is True
    jobs = ccol._decode_helper_jobs()
    ccol._decode_helper_testing(False, BIG)
    assert len(ccol.decode_record_batches_columns(big_batch())) == 300
    assert ccol._decode_helper_jobs() == jobs  # off: the decoding thread scanned
    assert ccol.set_decode_helper(True) is False
    code = "from kafka_core.codec import set_decode_helper; print(set_decode_helper(False))"
    for value, expect in (("0", "False"), ("1", "True"), ("", "False")):
        env = {**os.environ, "KAFKA_CORE_DECODE_HELPER": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expect, (value, out.stderr)
