"""Every malformed input: a one-line error naming the file, line or flag; exit 2; no traceback; nothing
sent. Table-driven: each case builds its input and names what the error must say."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import fake_key, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture(scope="module")
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _lines(path: Path, *objs: object) -> Path:
    path.write_bytes(b"".join((o if isinstance(o, bytes) else orjson.dumps(o)) + b"\n" for o in objs))
    return path


def _q(i: object, **kw: object) -> dict[str, object]:
    return {"id": i, "prompt": f"Question {i}?", "choices": ["a", "b"], "answer": "A", **kw}


def _run(
    t: Path, mock: MockServer, data: Path | None = None, *extra: str, cfg: Path | None = None
) -> list[str]:
    cfg = cfg or write_config(t / "c.toml", mock.base_url, ["ok-a"])
    data = data or write_dataset(t / "good.jsonl", 3)
    return run_args(data, "ok-a", cfg, t / "run", *extra)


def _cfg(t: Path, mock: MockServer, extra: str) -> Path:
    return write_config(t / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=extra)


def _finished(t: Path, mock: MockServer) -> list[str]:
    """A run directory made by a real (good) run: the case then damages it."""
    args = _run(t, mock)
    assert main(args) == 0
    return args


def _damaged_manifest(content: bytes) -> Callable[[Path, MockServer], list[str]]:
    def make(t: Path, mock: MockServer) -> list[str]:
        args = _finished(t, mock)
        (t / "run" / "manifest.json").write_bytes(content)
        return args

    return make


def _row_without_item(t: Path, mock: MockServer) -> list[str]:
    args = _finished(t, mock)
    with (t / "run" / "results.jsonl").open("ab") as f:
        f.write(orjson.dumps({"model": "ok-a", "sample": 0, "pass": "answer", "error": None}) + b"\n")
    return args


def _no_results(t: Path, mock: MockServer) -> list[str]:
    _finished(t, mock)
    (t / "run" / "results.jsonl").unlink()
    return ["score", str(t / "run")]


def _file(t: Path) -> Path:
    p = t / "a-file"
    p.write_text("x")
    return p


CASES: dict[str, tuple[Callable[[Path, MockServer], list[str]], str]] = {
    "duplicate ids": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a"), _q("b"), _q("a"))),
        "d.jsonl:3: duplicate id 'a' (also on line 1)",
    ),
    "ids 1 and '1' collide": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q(1), _q("1"))),
        "d.jsonl:2: duplicate id '1' (also on line 1)",
    ),
    "missing image": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a"), _q("b", images=["nope.png"]))),
        "d.jsonl:2: image file not found",
    ),
    "empty dataset": (lambda t, m: _run(t, m, _lines(t / "d.jsonl")), "d.jsonl: no items"),
    "blank-only dataset": (lambda t, m: _run(t, m, _lines(t / "d.jsonl", b"", b"  ")), "d.jsonl: no items"),
    "non-string prompt": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a"), {"id": "b", "prompt": ["x"]})),
        'd.jsonl:2: "prompt" must be a non-empty string',
    ),
    "null id": (lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q(None))), 'd.jsonl:1: "id" must be'),
    "bool id": (lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q(True))), 'd.jsonl:1: "id" must be'),
    "not JSON": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a"), b"{oops")),
        "d.jsonl:2: not valid JSON",
    ),
    "choices not a list": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a", choices="ab"))),
        'd.jsonl:1: "choices" must be a list',
    ),
    "images not a list": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a", images="x.png"))),
        'd.jsonl:1: "images" must be a list',
    ),
    "multiple-choice line without answer": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", _q("a"), {"id": "b", "prompt": "Q?", "choices": ["x", "y"]})),
        'd.jsonl:2: no gold "answer" for multiple-choice item \'b\'',
    ),
    "exact-match line with empty answer": (
        lambda t, m: _run(t, m, _lines(t / "d.jsonl", {"id": 7, "prompt": "Q?", "answer": ""})),
        'd.jsonl:1: no gold "answer" for exact-match item 7',
    ),
    "--limit -1": (lambda t, m: _run(t, m, None, "--limit", "-1"), "--limit: must be >= 0"),
    "--samples 0": (lambda t, m: _run(t, m, None, "--samples", "0"), "--samples: must be >= 1"),
    "--temperature nan": (
        lambda t, m: _run(t, m, None, "--temperature", "nan"),
        "--temperature: must be >= 0",
    ),
    "--temperature -1": (lambda t, m: _run(t, m, None, "--temperature", "-1"), "--temperature: must be >= 0"),
    "--temperature inf": (
        lambda t, m: _run(t, m, None, "--temperature", "inf"),
        "--temperature: must be >= 0",
    ),
    "--grace -5": (lambda t, m: _run(t, m, None, "--grace", "-5"), "--grace: must be >= 0"),
    "base_url not a url": (
        lambda t, m: _run(t, m, cfg=_url_cfg(t)),
        "c.toml:4: endpoints[0].base_url (name = 'mock'): not an http(s) URL: 'not a url'",
    ),
    "retry_max_s < retry_initial_s": (
        lambda t, m: _run(t, m, cfg=_cfg(t, m, "retry_initial_s = 5\nretry_max_s = 1\n")),
        "retry_max_s (1) is below retry_initial_s (5)",
    ),
    "rpm 0": (lambda t, m: _run(t, m, cfg=_cfg(t, m, "rpm = 0\n")), "c.toml:5: endpoints[0].rpm"),
    "unknown config field": (
        lambda t, m: _run(t, m, cfg=_cfg(t, m, "rmp = 10\n")),
        "c.toml:5: endpoints[0].rmp (name = 'mock'): unknown field",
    ),
    "key instead of env name": (
        lambda t, m: _run(t, m, cfg=_cfg(t, m, f'api_key_env = "{fake_key("abc123-xyz")}"\n')),
        "must be the NAME of an environment variable",
    ),
    "config not TOML": (
        lambda t, m: _run(t, m, cfg=_write(t / "c.toml", b"[[endpoints]\n")),
        "c.toml: not valid TOML",
    ),
    "config invalid UTF-8": (
        lambda t, m: _run(t, m, cfg=_write(t / "c.toml", b'# ok\n# caf\xe9\n[[endpoints]]\nname = "x"\n')),
        "c.toml:2: not valid UTF-8",
    ),
    "--config a directory": (lambda t, m: _run(t, m, cfg=t), "is a directory, not a config file"),
    "--out a file": (lambda t, m: _run(t, m, None, "--out", str(_file(t))), "is a file, not a directory"),
    "--cache-dir a file": (lambda t, m: _run(t, m, None, "--cache-dir", str(_file(t))), "--cache-dir"),
    "--models empty": (lambda t, m: [*_run(t, m)[:3], " , ", *_run(t, m)[4:]], "--models: give at least one"),
    "corrupt manifest.json": (_damaged_manifest(b'{"suite": '), "manifest.json: not valid JSON"),
    "empty-object manifest.json": (_damaged_manifest(b"{}"), "manifest.json: not a run manifest"),
    "manifest.json a list": (_damaged_manifest(b"[1]"), "manifest.json: not a run manifest"),
    "results row without item": (_row_without_item, "results.jsonl:4: not a results row (no 'item')"),
    "score: no results.jsonl": (_no_results, "no results.jsonl"),
    "score: corrupt manifest": (
        lambda t, m: _damaged_manifest(b"nope")(t, m)[:0] + ["score", str(t / "run")],
        "manifest.json: not valid JSON",
    ),
    "score: not a directory": (
        lambda t, m: ["score", str(t / "missing")],
        "not a run directory (no such directory)",
    ),
    "sweep: samples 0": (
        lambda t, m: ["sweep", str(_sweep(t, m, "samples = 0")), "--no-live"],
        "runs[0]: --samples: must be >= 1",
    ),
}


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def _url_cfg(t: Path) -> Path:
    return write_config(t / "c.toml", "not a url", ["ok-a"])


def _sweep(t: Path, m: MockServer, extra: str) -> Path:
    cfg = write_config(t / "c.toml", m.base_url, ["ok-a"])
    data = write_dataset(t / "good.jsonl", 3)
    p = t / "sweep.toml"
    p.write_text(
        f'config = "{cfg}"\nout = "{t / "runs"}"\n[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["ok-a"]\n{extra}\n'
    )
    return p


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_clear_line_exit_2_nothing_sent(
    case: str, tmp_path: Path, mock: MockServer, capfd: pytest.CaptureFixture[str]
):
    make, expected = CASES[case]
    args = make(tmp_path, mock)
    capfd.readouterr()
    before = mock.total
    code = main(args)
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (case, err)
    assert mock.total == before, f"{case}: calls were sent"
    assert len(lines) == 1 and lines[0].startswith("evalsweep: error: "), (case, err)
    assert expected in lines[0], (case, lines[0])


def test_allow_missing_gold_scores_those_items_none(tmp_path: Path, mock: MockServer):
    data = _lines(tmp_path / "d.jsonl", _q("a"), {"id": "b", "prompt": "Q?", "choices": ["x", "y"]}, _q("c"))
    assert main(_run(tmp_path, mock, data, "--allow-missing-gold")) == 0
    assert main(["score", str(tmp_path / "run")]) == 0
    scored = {
        r["item"]: r for r in map(orjson.loads, (tmp_path / "run" / "scored.jsonl").read_bytes().splitlines())
    }
    assert scored["b"]["score"] is None and scored["b"]["gold"] is None
    assert scored["a"]["score"] in (0.0, 1.0) and scored["c"]["gold"] == "A"
    models = orjson.loads((tmp_path / "run" / "scores.json").read_bytes())["models"]
    assert models["ok-a"]["n"] == 2
