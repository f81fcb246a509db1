"""Shared test setup: no internet, shared data location, a fresh cache per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.servers import pg_cluster, pg_url, redis_server  # noqa: F401  (real-server fixtures)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present (CI and developer machines have ../shared)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own evalsweep cache directory, so tests never see each other's answers."""
    monkeypatch.setenv("EVALSWEEP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def marvel_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROOT with ROOT/marvel a MARVEL data directory: the shared puzzle images (linked) and a `Panel_data/`
    of small made-up panels, as many per puzzle as its coarse answers say (the authors' panels are not in
    ../shared), so coarse questions get their index-free images (suites/marvel/panels.py)."""
    if not (SHARED_DATA / "marvel" / "images").is_dir():
        pytest.skip(f"{SHARED_DATA / 'marvel'} not present (CI and developer machines have ../shared)")
    from PIL import Image

    from suites.marvel.data import load

    root = tmp_path_factory.mktemp("marvel_data")
    (root / "marvel").mkdir()
    (root / "marvel" / "images").symlink_to(SHARED_DATA / "marvel" / "images")
    panels = root / "marvel" / "Panel_data"
    panels.mkdir()
    blank = Image.new("RGB", (24, 24), "white")
    for p in load():
        for part, n in (("question", p.coarse_answers[0]), ("answer", p.coarse_answers[1])):
            for k in range(n):
                blank.save(panels / f"{part}_{p.id}_{k}.png")
    return root
