"""Every option of every paper suite is enumerated with the deviation each value records (issue #19's one rule:
a setting that can move a number in a paper's table is the paper's or a recorded deviation).

Each suite's cases live in tests/test_<suite>_protocol.py (`CASES`); this test fails when a suite gains an option
its file does not cover, or a suite has no such file."""

from __future__ import annotations

import argparse
import importlib

import pytest

from suites.base import SUITES, RunSpec, get_suite


def _cases(suite: str) -> dict[str, list[tuple[object, str | None]]]:
    return importlib.import_module(f"tests.test_{suite}_protocol").CASES


def _options(suite: str) -> set[str]:
    p = argparse.ArgumentParser()
    get_suite(suite).add_arguments(p)
    return {a.dest for a in p._actions if a.dest != "help"}


@pytest.mark.parametrize("suite", SUITES)
def test_every_option_of_every_suite_has_cases(suite: str) -> None:
    cases = _cases(suite)
    assert _options(suite) == set(cases), f"{suite}: options and tests/test_{suite}_protocol.py CASES differ"
    for dest, values in cases.items():
        assert any(w is None for _, w in values), f"{suite} --{dest}: no case for the paper's setting"


@pytest.mark.parametrize("suite", SUITES)
def test_samples_and_limit_are_never_silent(suite: str) -> None:
    s = get_suite(suite)
    base = s.deviations(RunSpec(suite, {}))  # type: ignore[misc]
    assert len(s.deviations(RunSpec(suite, {}, limit=3))) > len(base)  # type: ignore[misc]
    assert len(s.deviations(RunSpec(suite, {}, samples=3))) > len(base)  # type: ignore[misc]
