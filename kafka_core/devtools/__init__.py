"""Development tools, apart from the client's layers: nothing in the client imports them.

- :mod:`kafka_core.devtools.brokers`: Tansu, Apache Kafka from its Maven jars, the SeaweedFS
  gateway and Spark's own Kafka connector, for demos, tests and benchmarks
  (``python -m kafka_core.devbroker`` is its documented command).

They ship in the wheel so users can start a broker or run the demo; they write only to the user
cache (``~/.cache/kafka_core``) and temporary directories, never beside the package.
"""
