"""Imports go one way: providers never import the runner's config; the demo never imports the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO


@pytest.mark.parametrize(
    "module, use, forbidden",
    [
        ("providers.sim", "providers.sim.sim_model('sim/x')", "runner.config"),
        ("runner.demo", "runner.demo._opts('cot')", "runner.cli"),
        ("core.types", "None", "runner"),
    ],
)
def test_no_import_cycle(module: str, use: str, forbidden: str):
    code = (
        f"import sys, {module}; {use}; bad = [m for m in sys.modules if m == {forbidden!r} or "
        f"m.startswith({forbidden!r} + '.')]; print(bad); sys.exit(1 if bad else 0)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, (module, p.stdout, p.stderr)
