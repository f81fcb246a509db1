"""Imports go one way, down the layers, and never in a circle.

Layers, lowest first: core ← providers, cache ← suites ← runner ← report ← cli. A module may import
its own package and any package of a lower layer; providers and cache (one layer) do not import each
other. Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

LAYER = {"core": 0, "providers": 1, "cache": 1, "suites": 2, "runner": 3, "report": 4, "cli": 5}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in LAYER:
        for p in (REPO / pkg).rglob("*.py"):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _graph() -> dict[str, set[str]]:
    """module → the modules of ours it imports (a `from pkg import name` naming a submodule counts)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, *([node.module] if node.module else [])])
                # `from pkg import sub` depends on the submodule; `from pkg import name`, on pkg itself
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            for t in targets:
                while t and t not in mods:  # `import a.b.c` depends on the deepest module of ours named
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_no_import_upward_or_sideways():
    bad = []
    for mod, deps in _graph().items():
        pkg = mod.split(".")[0]
        for d in deps:
            dpkg = d.split(".")[0]
            if dpkg != pkg and LAYER[dpkg] >= LAYER[pkg]:
                bad.append(f"{mod} -> {d}")
    assert sorted(bad) == []


# Rooms inside runner/: the call path (runner.calls) makes calls, it does not plan them; pacing state
# (runner.budgets) knows neither. A module of the left room never imports one of the right.
ROOMS_APART = [
    ("runner.calls", ("runner.scheduler", "runner.run", "runner.resume", "runner.remaining", "runner.batch")),
    ("runner.budgets", ("runner.calls", "runner.scheduler", "runner.run")),
]


@pytest.mark.parametrize("room, apart", ROOMS_APART)
def test_rooms_inside_runner_stay_apart(room: str, apart: tuple[str, ...]):
    graph = _graph()
    assert any(m.startswith(room + ".") for m in graph), room  # the room exists: the test can fail
    bad = [
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m == room or m.startswith(room + ".")
        for d in deps
        if any(d == a or d.startswith(a + ".") for a in apart)
    ]
    assert sorted(bad) == []


def test_the_call_path_is_one_room():
    """call, gate, fan-out, learned rules, spend, estimates and halt live in runner.calls, not flat in runner."""
    graph = _graph()
    for name in ("call", "gate", "fanout", "learned", "spend", "estimates", "halt"):
        assert f"runner.calls.{name}" in graph and f"runner.{name}" not in graph, name


def test_the_checker_sees_circles_and_upward_imports():
    """The two tests above would fail on what they forbid."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = _graph()
    assert "core.types" in graph and "runner.run" in graph["cli.main"] | {
        d for m in graph if m.startswith("cli.") for d in graph[m]
    }


@pytest.mark.parametrize(
    "module, use, forbidden",
    [
        ("providers.sim", "providers.sim.sim_model('sim/x')", "runner"),
        ("cli.demo", "cli.demo._opts('cot')", "cli.main"),
        ("core.types", "None", "runner"),
        ("runner.run", "None", "cli"),
        ("runner.run", "None", "report"),
    ],
)
def test_importing_a_module_loads_nothing_above_it(module: str, use: str, forbidden: str):
    code = (
        f"import sys, {module}; {use}; bad = [m for m in sys.modules if m == {forbidden!r} or "
        f"m.startswith({forbidden!r} + '.')]; print(bad); sys.exit(1 if bad else 0)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, (module, p.stdout, p.stderr)
