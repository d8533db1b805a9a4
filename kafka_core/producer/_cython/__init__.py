"""The producer's C extension, built from ``_codec/accel.pyx`` (types in ``accel.pyi``); its
pure-Python twin is ``kafka_core.producer._python``, the choice made in ``_speedups``."""
