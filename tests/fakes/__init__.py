"""Shared test doubles: in-memory stand-ins for the client and brokers that unit tests drive.

Kept out of files named ``test_*`` so pytest never collects them, and importable from every test
directory (``from fakes.<module> import ...``; tests/ is on sys.path through its conftest)."""
