"""Exponential backoff with jitter, so that many clients reconnecting at once do not stampede a broker."""

from __future__ import annotations

import random


class Backoff:
    """Delays growing by ``multiplier`` from ``initial_ms`` up to ``max_ms``, each randomised by ±``jitter``.

    The jitter is applied to the delay of the current step, never accumulated, so the delay stays
    within ``[base * (1 - jitter), min(max, base * (1 + jitter))]``. ``reset()`` after a success.
    """

    __slots__ = ("_attempts", "_rng", "initial_ms", "jitter", "max_ms", "multiplier")

    def __init__(
        self,
        initial_ms: float = 100.0,
        max_ms: float = 1000.0,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms < 0 or max_ms < 0:
            raise ValueError("backoff delays must be non-negative")
        if multiplier < 1:
            raise ValueError("backoff multiplier must be >= 1")
        if not 0 <= jitter < 1:
            raise ValueError("backoff jitter must be in [0, 1)")
        self.initial_ms = float(initial_ms)
        self.max_ms = max(float(max_ms), self.initial_ms)
        self.multiplier = float(multiplier)
        self.jitter = float(jitter)
        self._rng = rng or random.Random()
        self._attempts = 0

    @property
    def attempts(self) -> int:
        """Failures seen since the last reset."""
        return self._attempts

    def base_ms(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (0-based)."""
        # Cap the exponent so huge attempt counts cannot overflow a float.
        exp = min(attempt, 64)
        return min(self.max_ms, self.initial_ms * self.multiplier**exp)

    def next_ms(self) -> float:
        """Delay to wait before the next attempt, advancing the attempt counter."""
        base = self.base_ms(self._attempts)
        self._attempts += 1
        if self.jitter == 0 or base == 0:
            return base
        low = base * (1.0 - self.jitter)
        high = min(self.max_ms, base * (1.0 + self.jitter))
        return self._rng.uniform(low, high)

    def next_s(self) -> float:
        """:meth:`next_ms` in seconds, for ``asyncio.sleep``."""
        return self.next_ms() / 1000.0

    def reset(self) -> None:
        self._attempts = 0
