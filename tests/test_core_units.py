"""Cache keys, config validation errors, results file repair, token splitting, pacing limiter."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from cache.key import cache_key
from core.types import ImagePart, Request, user
from runner.config import ConfigError, load_config
from runner.results import ResultsWriter, final_rows, repair_tail
from runner.rowindex import index
from runner.rows import contiguous, split_tokens
from tests.helpers import fake_key

PNG1 = b"\x89PNG\r\n\x1a\n" + b"one image" * 10
PNG2 = b"\x89PNG\r\n\x1a\n" + b"other image" * 10


def _req(img: ImagePart | None = None, **kw) -> Request:
    parts = ([img] if img else []) + ["What is shown?"]
    base = dict(suite="s", item="i1", model="m", messages=[user(*parts)], decoding={"temperature": 0.0})
    base.update(kw)
    return Request(**base)


def test_same_request_same_key():
    assert cache_key(_req(), "gpt-x") == cache_key(_req(), "gpt-x")


def test_key_changes_with_what_changes_the_answer(tmp_path: Path):
    base = cache_key(_req(ImagePart(data=PNG1)), "gpt-x")
    assert cache_key(_req(ImagePart(data=PNG2)), "gpt-x") != base  # other image bytes
    assert cache_key(_req(ImagePart(data=PNG1), sample=1), "gpt-x") != base  # sample index
    assert cache_key(_req(ImagePart(data=PNG1), decoding={"temperature": 0.5}), "gpt-x") != base
    assert cache_key(_req(ImagePart(data=PNG1), pass_="critique"), "gpt-x") != base  # pass
    assert cache_key(_req(ImagePart(data=PNG1)), "gpt-y") != base  # model id
    assert cache_key(_req(ImagePart(data=PNG1)), "gpt-x", {"reasoning_effort": "high"}) != base


def test_key_ignores_where_and_who(tmp_path: Path):
    """Endpoint, key, run identity (model display name) and sim hints are not part of the key."""
    a = _req(model="display-a", sim={"correct": "x"})
    b = _req(model="display-b", meta={"note": 1})
    assert cache_key(a, "gpt-x") == cache_key(b, "gpt-x")


def test_image_path_bytes_base64_give_one_key(tmp_path: Path):
    f = tmp_path / "img.png"
    f.write_bytes(PNG1)
    k_path = cache_key(_req(ImagePart(path=str(f))), "m")
    k_bytes = cache_key(_req(ImagePart(data=PNG1)), "m")
    k_b64 = cache_key(_req(ImagePart.from_base64(base64.b64encode(PNG1).decode())), "m")
    k_url = cache_key(
        _req(ImagePart.from_base64("data:image/png;base64," + base64.b64encode(PNG1).decode())), "m"
    )
    assert k_path == k_bytes == k_b64 == k_url


def test_data_url_from_path_and_bytes(tmp_path: Path):
    f = tmp_path / "img.png"
    f.write_bytes(PNG1)
    assert ImagePart(path=str(f)).data_url() == ImagePart(data=PNG1).data_url()
    assert ImagePart(data=PNG1).data_url().startswith("data:image/png;base64,")


def test_config_error_names_file_line_field(tmp_path: Path):
    p = tmp_path / "evalsweep.toml"
    p.write_text(
        '[[endpoints]]\nname = "a"\nbase_url = "http://x/v1"\n\n[[endpoints]]\nname = "b"\n'
        'base_url = "http://y/v1"\nrpm = -5\n'
    )
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert f"{p}:8:" in msg and "endpoints[1].rpm" in msg and "name = 'b'" in msg and "greater than 0" in msg


def test_config_unknown_field_and_endpoint(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text('[[models]]\nname = "m"\nendpoint = "nope"\n')
    with pytest.raises(ConfigError, match=r"c.toml:3: models\[0\].endpoint.*unknown endpoint 'nope'"):
        load_config(p)
    p.write_text('[[endpoints]]\nname = "a"\nbase_url = "http://x"\nrmp = 5\n')
    with pytest.raises(ConfigError, match=r"c.toml:4: endpoints\[0\].rmp.*unknown field"):
        load_config(p)


def test_config_rejects_a_key_in_place_of_env_name(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text(f'[[endpoints]]\nname = "a"\nbase_url = "http://x"\napi_key_env = "{fake_key("abc-123")}"\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "NAME of an environment variable" in str(e.value) and fake_key("abc-123") not in str(e.value)


def test_config_accepts_issue_example(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text("""
[[endpoints]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "LOCAL_KEY"
rpm = 600
tpm = 1000000
max_concurrency = 64

[[models]]
name = "mock-a"
endpoint = "local"
model = "mock-a"
price_in = 0.5
price_out = 1.5

[[models]]
name = "released-gpt4"
provider = "replay"
path = "released/gpt4.jsonl"
""")
    cfg = load_config(p)
    assert cfg.resolve("mock-a").price_in == 0.5
    assert cfg.provider_of(cfg.resolve("released-gpt4")) == "replay"
    assert cfg.resolve("sim/strong").provider == "sim"
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
        cfg.resolve("gpt-9")


def _row(item: str, error: str | None = None, sample: int = 0) -> dict:
    return {
        "model": "m",
        "item": item,
        "sample": sample,
        "pass": "answer",
        "text": None if error else "x",
        "error": error,
    }


def test_torn_last_line_dropped_and_best_row_kept(tmp_path: Path):
    p = tmp_path / "results.jsonl"
    w = ResultsWriter(p)
    w.write(_row("a", error="HTTP 500"))
    w.write(_row("a"))
    w.write(_row("b", error="HTTP 500"))
    w.close()
    with p.open("ab") as f:
        f.write(b'{"model": "m", "item": "c", "sam')  # killed mid-write
    removed = repair_tail(p)
    assert removed > 0 and p.read_bytes().endswith(b"\n")
    done, final = index(p)
    assert len(done) == 1 and len(final) == 2
    got = {r["item"]: r for r in final_rows(p)}
    assert got["a"]["error"] is None and got["b"]["error"] == "HTTP 500"
    assert ResultsWriter(p).rows == 0  # reopening keeps the repaired file


def test_garbage_last_line_with_newline_dropped(tmp_path: Path):
    p = tmp_path / "results.jsonl"
    p.write_bytes(orjson.dumps(_row("a")) + b"\n" + b"\x00\x00garbage\n")
    repair_tail(p)
    assert p.read_bytes() == orjson.dumps(_row("a")) + b"\n"


def test_token_split_and_contiguous_groups():
    assert split_tokens(10, [1, 1, 1]) == [4, 3, 3] and sum(split_tokens(7, [5, 1])) == 7
    assert split_tokens(None, [1, 1]) == [None, None]
    assert contiguous([0, 1, 2, 5, 6, 9]) == [[0, 1, 2], [5, 6], [9]]
