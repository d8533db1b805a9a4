"""Development tools, apart from the client's layers: no module of the library imports them
(tests/unit/project/test_import_layers.py says so); they import the library like any user.

- :mod:`~kafka_core.devtools.brokers`: Tansu, Apache Kafka from its Maven jars, the SeaweedFS
  gateway and Spark's own Kafka connector, for demos, tests and benchmarks
  (``python -m kafka_core.devbroker`` is its documented command and import path).
- :mod:`~kafka_core.devtools.mockcluster`: librdkafka's mock cluster, through ctypes.
- :mod:`~kafka_core.devtools.chaos`: the chaos harness (``python -m kafka_core.devtools.chaos``).
- :mod:`~kafka_core.devtools.pipeline`: the main job, a Spark demo
  (``python -m kafka_core.devtools.pipeline``).
- :mod:`~kafka_core.devtools.bench` and :mod:`~kafka_core.devtools.commands`: what ``kafka-core
  bench`` and ``kafka-core broker`` run (``python -m kafka_core.devtools``).

They ship in the wheel so users can start a broker or run the demo; they write only to the user
cache (``~/.cache/kafka_core``) and temporary directories, never beside the package.
"""
