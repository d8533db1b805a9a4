"""Pure-Python twin of the Cython codec in ``_codec/``: same module names, same API (a module
``X`` here for each ``_codec/X.pyx``, and ``writer`` for the included ``writer.pxi``)."""
