"""Pure-Python twin of the producer's C extension (``_codec/accel.pyx``): same module name, same
API; ``kafka_core.producer._speedups`` chooses between them."""
