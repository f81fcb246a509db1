"""evalsweep's runner: CLI, config, scheduler, lanes, results, scoring stage."""

__version__ = "0.1.0"
"""The one place the version lives: pyproject reads it, manifests record it, `evalsweep --version` prints it."""
