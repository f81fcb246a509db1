"""Scale benchmark (issue 13): scoring a big run in bounded memory.

First a sim run's memory as calls grow (`--run-only`: that alone). Then generates two run directories — 1,000,000 rows (2 models x 500,000 items, jsonl suite) and 45 models x
700 items in VRB's published format (a synthetic dataset) — then runs `evalsweep score` on each in a
subprocess and prints its peak RSS (sampled every 20 ms) and wall time; then the same for `evalsweep
report` and the viewer's page weight. Target: the 1M-row run scored in < 500 MB RSS.
`--resume-rows N` (issue 40): what a resume holds per finished row: a sim run of N finished rows resumed
with a few left, beside a resume of an empty run of the same items (bytes a finished row = the
difference of their peak RSS / N), and the time of the resume's scan of its results (runner.results.index).
`--resume-rows N --dry-run` (issue 47): the same for `--dry-run` over that run directory (what the dry run
holds per finished row, runner.remaining.finished_rows), beside a dry run over an empty run directory.

    python bench/scale.py [--dir /tmp/evalsweep-scale] [--items 500000] [--models 2]
                          [--vrb-models 45] [--vrb-items 700] [--keep]
    python bench/scale.py --resume-rows 200000 [--repeat 3] [--dry-run]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.types import row_identity  # noqa: E402

LETTERS = "ABCD"


def _row(model: str, suite: str, item: str, text: str | None, k: int, error: str | None = None) -> bytes:
    """One results.jsonl line shaped like the runner's (every field, a real-length key)."""
    key = hashlib.sha256(row_identity(model, item, 0, "answer").encode()).hexdigest()
    return (
        orjson.dumps(
            {
                "model": model,
                "suite": suite,
                "item": item,
                "sample": 0,
                "pass": "answer",
                "key": key,
                "text": text,
                "usage": {"input_tokens": 120, "output_tokens": 40},
                "cost_usd": 0.00012,
                "latency_s": 0.8,
                "attempts": 1,
                "cached": False,
                "error": error,
                "error_kind": "server" if error else None,
                "via": None,
                "lane": "mock#0",
                "finish_reason": None if error else "stop",
                "t": 1_760_000_000.0 + k,
            }  # fmt: skip
        )
        + b"\n"
    )


def _manifest(run: Path, suite: str, models: list[str], options: dict | None = None) -> None:
    spec = {"suite": suite, "options": options or {}, "samples": None, "temperature": None, "limit": None}
    man = {"suite": suite, "run_name": run.name, "spec": spec, "models": models, "status": "complete"}
    (run / "manifest.json").write_bytes(orjson.dumps(man))


def _write(path: Path, lines: Iterator[bytes]) -> None:
    with path.open("wb", buffering=1 << 22) as f:
        for line in lines:
            f.write(line)


def make_jsonl_run(root: Path, n_items: int, n_models: int) -> Path:
    data, run = root / "items.jsonl", root / "jsonl-run"
    run.mkdir(parents=True, exist_ok=True)
    _write(
        data,
        (
            orjson.dumps(
                {
                    "id": f"q{i}",
                    "prompt": f"Question {i}?",
                    "choices": ["w", "x", "y", "z"],
                    "answer": LETTERS[i % 4],
                }
            )
            + b"\n"  # fmt: skip
            for i in range(n_items)
        ),
    )
    models = [f"model-{m}" for m in range(n_models)]
    suite = f"jsonl:{data}"

    def rows() -> Iterator[bytes]:
        k = 0
        for i in range(n_items):  # completion order: items interleaved across models, as a sweep writes
            for m, name in enumerate(models):
                k += 1
                if (i * 7 + m) % 100 == 0:
                    yield _row(name, suite, f"q{i}", None, k, "HTTP 500 after 6 attempts")
                    continue
                pick = LETTERS[i % 4] if (i * 31 + m * 17) % 10 < 6 + m else LETTERS[(i + 1) % 4]
                yield _row(
                    name, suite, f"q{i}", f"Looking at the options one by one.\nThe answer is {pick}.", k
                )

    _write(run / "results.jsonl", rows())
    _manifest(run, suite, models)
    return run


def make_vrb_run(root: Path, n_models: int, n_items: int) -> Path:
    from suites.base import RunSpec
    from suites.vrb import data, sim
    from suites.vrb.synthetic import write_dataset

    vrb_dir = write_dataset(
        root / "vrb-data", {"zambia": n_items * 3 // 5, "india": n_items - n_items * 3 // 5}
    )
    items = list(data.load(RunSpec(suite="vrb", options={"data_dir": str(vrb_dir)})))
    run = root / "vrb-run"
    run.mkdir(parents=True, exist_ok=True)
    models = [f"model-{m:02d}" for m in range(n_models)]

    def rows() -> Iterator[bytes]:
        k = 0
        for m, name in enumerate(models):
            for j, it in enumerate(items):
                k += 1
                right = (j * 13 + m * 7) % 100 < 30 + m
                x = it.solution if right else next(lab for lab in it.labels if lab != it.solution)
                yield _row(name, "vrb", it.key, sim.response(it, x, j + m), k)

    _write(run / "results.jsonl", rows())
    _manifest(run, "vrb", models, {"data_dir": str(vrb_dir), "datasets": None})
    return run


def peak_rss(args: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of `python -m cli ARGS`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"`evalsweep {' '.join(args)}` failed:\n{proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return peak / 2**20, wall


SIM_MODELS = ["sim/medium", "sim/weak", "sim/strong", "sim/frontier", "sim/open-large", "sim/random"]


def run_growth(root: Path, n_models: int, n_items: int) -> tuple[float, float, float]:
    """A sim sweep of `n_models` x `n_items` calls, then x 10 the items: (peak RSS MB of each, bytes a
    call of the growth). Nothing per call may stay: a night of 45 models over large files stays flat."""
    cfg = root / "sim.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\nmax_concurrency = 256\n')
    peaks = []
    for n in (n_items, 10 * n_items):
        data = root / f"sim-{n}.jsonl"
        _write(data, (orjson.dumps({"id": f"q{i}", "prompt": f"Question {i}: which letter?", "choices":
                                    ["w", "x", "y", "z"], "answer": LETTERS[i % 4]}) + b"\n" for i in range(n)))
        rss, _ = peak_rss(["run", f"jsonl:{data}", "--models", ",".join(SIM_MODELS[:n_models]), "--config",
                           str(cfg), "--out", str(root / f"sim-run-{n}"), "--no-cache", "--no-live", "--no-score"])
        peaks.append(rss)
    return peaks[0], peaks[1], (peaks[1] - peaks[0]) * 2**20 / (9 * n_items * n_models)


RESUME_LEFT = 5
"""Rows a resumed run still calls in `resume_cost`."""


def _sim_run(root: Path, data: Path, out: Path, *more: str) -> tuple[float, float]:
    cfg = root / "sim.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\nmax_concurrency = 256\n')
    return peak_rss(["run", f"jsonl:{data}", "--models", SIM_MODELS[0], "--config", str(cfg), "--out", str(out),
                     "--no-cache", "--no-live", "--no-score", *more])


def make_resumable(root: Path, n_rows: int) -> tuple[Path, Path]:
    """(dataset of n_rows + RESUME_LEFT items, run directory with the first n_rows finished): one real sim
    call makes the manifest and a row, copied for the other items (the runner's own row shape)."""
    data, out = root / f"resume-{n_rows}.jsonl", root / f"resume-run-{n_rows}"
    shutil.rmtree(out, ignore_errors=True)
    n = n_rows + RESUME_LEFT
    _write(data, (orjson.dumps({"id": f"q{i}", "prompt": f"Question {i}: which letter?", "choices":
                                ["w", "x", "y", "z"], "answer": LETTERS[i % 4]}) + b"\n" for i in range(n)))
    _sim_run(root, data, out, "--limit", "1")
    first = orjson.loads((out / "results.jsonl").read_bytes().splitlines()[0])
    with (out / "results.jsonl").open("ab", buffering=1 << 22) as f:
        for i in range(1, n_rows):
            f.write(orjson.dumps({**first, "item": f"q{i}", "key": hashlib.sha256(f"q{i}".encode()).hexdigest(),
                                  "t": first["t"] + i}, option=orjson.OPT_APPEND_NEWLINE))
    return data, out


def resume_cost(root: Path, n_rows: int, repeat: int) -> None:
    """Peak RSS of resuming n_rows finished rows (RESUME_LEFT to call) and of resuming an empty run of the
    same items (every row to call), alternated `repeat` times; prints the medians, the bytes a finished
    row and the time of `index` (the resume's scan) over those rows in this process."""
    import statistics
    import tracemalloc

    from runner.rowindex import index

    data, out = make_resumable(root, n_rows)
    saved = (out / "results.jsonl").read_bytes()
    full, empty, scans = [], [], []
    for _ in range(repeat):
        (out / "results.jsonl").write_bytes(saved)  # (a resume appends its new rows)
        full.append(_sim_run(root, data, out))
        shutil.rmtree(root / "resume-empty", ignore_errors=True)
        empty.append(_sim_run(root, data, root / "resume-empty"))
        (out / "results.jsonl").write_bytes(saved)
        t0 = time.perf_counter()
        done = index(out / "results.jsonl", set())[0]
        scans.append(time.perf_counter() - t0)
        assert len(done) == n_rows, len(done)
        del done
    tracemalloc.start()  # (numpy's arrays are traced too)
    before = tracemalloc.get_traced_memory()[0]
    done = index(out / "results.jsonl", set())[0]
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del done
    rss = statistics.median(r for r, _ in full)
    base = statistics.median(r for r, _ in empty)
    print(f"resume of {n_rows:,} finished rows ({RESUME_LEFT} to call): peak RSS {rss:,.1f} MB (runs: "
          f"{', '.join(f'{r:.1f}' for r, _ in full)}), wall {statistics.median(w for _, w in full):.2f} s")
    print(f"resume of an empty run ({n_rows + RESUME_LEFT:,} to call): peak RSS {base:,.1f} MB (runs: "
          f"{', '.join(f'{r:.1f}' for r, _ in empty)})")
    print(f"held per finished row: {(rss - base) * 2**20 / n_rows:,.1f} bytes; the resume's scan (index): "
          f"{statistics.median(scans):.3f} s ({statistics.median(scans) / n_rows * 1e6:.2f} us a row)")
    print(f"the index alone (tracemalloc): {(held - before) / n_rows:,.1f} bytes a finished row held, "
          f"{(peak - before) / n_rows:,.1f} at the peak of its read", flush=True)


def dry_run_cost(root: Path, n_rows: int, repeat: int) -> None:
    """Peak RSS of `--dry-run` over a run directory of n_rows finished rows (RESUME_LEFT to call) and over an
    empty one of the same items, alternated `repeat` times; prints the medians and the bytes a finished row."""
    import statistics

    data, out = make_resumable(root, n_rows)
    full, empty = [], []
    for _ in range(repeat):
        full.append(_sim_run(root, data, out, "--dry-run"))
        shutil.rmtree(root / "dry-empty", ignore_errors=True)
        empty.append(_sim_run(root, data, root / "dry-empty", "--dry-run"))
    rss, base = statistics.median(r for r, _ in full), statistics.median(r for r, _ in empty)
    print(f"dry run over {n_rows:,} finished rows ({RESUME_LEFT} to call): peak RSS {rss:,.1f} MB (runs: "
          f"{', '.join(f'{r:.1f}' for r, _ in full)}), wall {statistics.median(w for _, w in full):.2f} s")
    print(f"dry run over an empty run ({n_rows + RESUME_LEFT:,} to call): peak RSS {base:,.1f} MB (runs: "
          f"{', '.join(f'{r:.1f}' for r, _ in empty)}), wall {statistics.median(w for _, w in empty):.2f} s")
    print(f"held per finished row: {(rss - base) * 2**20 / n_rows:,.1f} bytes", flush=True)


def _timed(what: str, make: Callable[[], Path]) -> Path:
    t0 = time.perf_counter()
    run = make()
    size = (run / "results.jsonl").stat().st_size / 2**20
    print(f"{what}: generated in {time.perf_counter() - t0:.1f} s ({size:,.0f} MB results.jsonl)", flush=True)
    return run


def page_weight(out: Path) -> tuple[float, float, float, float]:
    """MB: index.html, the largest per-model viewer file, the prompts, everything under samples/."""
    js = list((out / "samples").rglob("*.js"))
    models = [p.stat().st_size for p in js if p.name != "prompts.js"]
    prompts = [p.stat().st_size for p in js if p.name == "prompts.js"]
    total = sum(p.stat().st_size for p in (out / "samples").rglob("*") if p.is_file())
    mb = 2**20
    return (out / "index.html").stat().st_size / mb, max(models, default=0) / mb, sum(prompts) / mb, total / mb


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=None, help="where to generate (default: a temp dir)")
    p.add_argument("--items", type=int, default=500_000, help="jsonl items per model")
    p.add_argument("--models", type=int, default=2, help="jsonl models")
    p.add_argument("--vrb-models", type=int, default=45)
    p.add_argument("--vrb-items", type=int, default=700)
    p.add_argument("--keep", action="store_true", help="keep the generated run directories")
    p.add_argument("--run-models", type=int, default=len(SIM_MODELS), help="sim models of the run's memory")
    p.add_argument("--run-items", type=int, default=20_000, help="items of the smaller sim run (the other: x10)")
    p.add_argument("--run-only", action="store_true", help="only the sim run's memory growth")
    p.add_argument("--resume-rows", type=int, default=0, help="only a resume's memory over this many finished rows")
    p.add_argument("--repeat", type=int, default=3, help="resumes measured of each kind (--resume-rows)")
    p.add_argument("--dry-run", action="store_true", help="with --resume-rows: the dry run's memory, not the resume's")
    a = p.parse_args(argv)
    root = a.dir or Path(tempfile.mkdtemp(prefix="evalsweep-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        if a.resume_rows:
            (dry_run_cost if a.dry_run else resume_cost)(root, a.resume_rows, a.repeat)
            return
        small, big, per_call = run_growth(root, min(a.run_models, len(SIM_MODELS)), a.run_items)
        print(f"run: {a.run_models} sim models x {a.run_items:,} items: peak RSS {small:,.0f} MB; x {10 * a.run_items:,}"
              f": {big:,.0f} MB; growth {per_call:,.0f} bytes a call (target: ~0)", flush=True)
        if a.run_only:
            return
        runs = {
            f"jsonl {a.models} x {a.items:,}": _timed(
                "jsonl", lambda: make_jsonl_run(root, a.items, a.models)
            ),
            f"vrb {a.vrb_models} x {a.vrb_items}": _timed(
                "vrb", lambda: make_vrb_run(root, a.vrb_models, a.vrb_items)
            ),
        }
        weights: list[tuple[str, tuple[float, ...]]] = []
        print(f"\n{'run':<24} {'rows':>10} {'stage':<7} {'peak RSS MB':>12} {'wall s':>8}")
        for name, run in runs.items():
            n = sum(1 for _ in (run / "results.jsonl").open("rb"))
            rss, wall = peak_rss(["score", str(run)])
            print(f"{name:<24} {n:>10,} {'score':<7} {rss:>12,.0f} {wall:>8.1f}", flush=True)
            rss, wall = peak_rss(["report", str(run), "--out", str(run / "report")])
            print(f"{name:<24} {n:>10,} {'report':<7} {rss:>12,.0f} {wall:>8.1f}", flush=True)
            weights.append((name, page_weight(run / "report")))
        print("\nviewer page weight (MB): index.html opens; a model's file loads when chosen; prompts on a click")
        print(f"{'run':<24} {'index.html':>10} {'model max':>10} {'prompts':>8} {'samples/':>9}")
        for name, w in weights:
            print(f"{name:<24} {w[0]:>10.2f} {w[1]:>10.2f} {w[2]:>8.2f} {w[3]:>9.1f}")
    finally:
        if not a.keep and a.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
