"""Chaos harness: fault scenarios against a real broker, with a verification artifact each
(``python -m kafka_core.devtools.chaos run``; RELIABILITY.md describes the capabilities).

Bottom to top: ``values`` (the records' bodies), ``capture`` (the wire, through ``proxy``),
``accounting`` (the books), ``workload`` (traffic), ``faulted`` (one run through faults), the
scenario sets (``scenarios`` for Tansu and its registry of every capability, ``mock_scenarios``,
``kafka_scenarios``), ``cli``. ``timing`` times requests through the proxies (issue 21).
"""
