"""Benchmarks of kafka_core against its peers (aiokafka, kafka-python, confluent-kafka).

``python -m bench.run_all`` runs everything and writes ``bench/RESULTS.md``; see ``bench/README.md``.
"""
