"""The bottom layer: the plain data every stage passes along (`types`: requests, completions, rows),
secrets scrubbing (`secrets`), the text and terminal-table helpers every layer prints with (`term`),
the config error type (`errors`) and the version.

Imports nothing of ours. Layers above it, lowest first: providers and cache, suites, runner, report,
cli; each imports only from the layers below it (tests/test_layers.py checks the whole graph).
"""

__version__ = "0.1.0"
"""The one place the version lives: pyproject reads it, manifests record it, `evalsweep --version` prints it."""
