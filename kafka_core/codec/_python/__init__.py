"""Pure-Python twin of the Cython codec in ``_codec/``: same module names, same API."""
