"""The main job, a demo of the Spark data source: ``python -m kafka_core.devtools.pipeline``
(``job``: the run and its checks; ``data``: the synthetic order stream and its aggregates)."""
