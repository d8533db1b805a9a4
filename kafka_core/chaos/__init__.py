"""Chaos harness: fault scenarios against a real broker, with a verification artifact each."""
