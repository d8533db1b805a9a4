"""The package's version, in a module of its own so that low layers (the connection's
ApiVersions request names it) read it without importing the package facade."""

__version__ = "0.1.0"
