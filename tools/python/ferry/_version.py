"""The package's version: the one place it is written (ferry.__version__,
and pyproject.toml reads it from here)."""

__version__ = "0.1"
