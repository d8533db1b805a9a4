"""The one policy for a Cython extension that will not load (the codec's, the Avro ones')."""

from __future__ import annotations

import warnings

from kafka_core._env import env_flag

__all__ = ["fall_back"]


def fall_back(what: str, exc: ImportError, *, stacklevel: int) -> None:
    """A Cython ``what`` did not load: an ImportError under ``KAFKA_CORE_REQUIRE_EXTENSION=1``
    (CI, so a silent fallback cannot pass), else a warning that the twin is used."""
    if env_flag("KAFKA_CORE_REQUIRE_EXTENSION"):
        raise ImportError(f"kafka_core: the Cython {what} did not load ({exc})") from exc
    warnings.warn(
        f"kafka_core: Cython {what} unavailable ({exc}); using the slower pure-Python one",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )
