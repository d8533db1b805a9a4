"""The consumer's fetch pipeline: ``fetcher.py`` runs the Fetch rounds per broker (requests built
by ``requests.py``, answers parsed lazily by ``results.py`` into ``buffer.py``), and
``validation.py`` checks positions after a leader change (KIP-320) before they are fetched from.
"""
