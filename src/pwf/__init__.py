"""pwf: an event-sourced host state for agent workflows."""

__version__ = "0.1.0"
"""The package version; the build reads it from here (``pwf --version`` prints it)."""
