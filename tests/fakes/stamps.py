"""Record timestamps for tests that write to a real broker.

A fixed date in the past (2023, say) is older than a broker's ``retention.ms`` (7 days by
default): the broker's retention check deletes such records, active segment included, at
whatever moment it runs (30 s after a start, then every 5 min), and a consumer that starts
after it finds the log starting past them. An hour ago, taken once per run, keeps the values
deterministic within the run and the records alive.
"""

from __future__ import annotations

import time

RECENT_MS = (int(time.time()) - 3_600) * 1_000
"""A whole second an hour before the run started, in ms since the epoch."""

DAY_MS = 86_400_000
