"""#40: the live ETA is the forecast (runner.forecast) of the work left, every pass and lane counted: at the
end of a cot-critique run's first pass, the critiques still to come are in it (the rate of first-pass rows
said `done`). Against the real local mock (latency injected); the forecast's inputs and outputs are
checked, not wall timings."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

from cli.progress import snapshot, sweep_line, watch
from runner.config import load_config
from runner.eta import SHRINK, Live
from runner.forecast import LaneWork
from runner.run import execute
from runner.rundir import RunPlan
from suites.base import RunSpec
from tests.helpers import write_config
from tests.mock_openai import MockServer

ITEMS = 6


def test_the_eta_at_the_end_of_the_first_pass_counts_the_critiques_to_come(tmp_path: Path):
    srv = MockServer(latency_s=0.2).start()
    got: dict[str, Any] = {}

    async def probe(runs: list[Any], **kw: Any) -> None:
        """The real progress view, and a look at its forecast the moment the last answer is written."""
        eta: Live = kw["eta"]
        view = asyncio.create_task(watch(runs, **kw))
        try:
            while True:
                st = runs[0].stats.get("m")
                if "flying" not in got and (w := eta.on_wire(time.monotonic())):
                    got["flying"] = w  # the lanes' calls on the wire, as the forecast reads them
                # (once the run's plan is counted: before, a total of 0 reads as `done`)
                if "blind" not in got and st is not None and st.total and st.ok + st.errors == 0:
                    await asyncio.to_thread(eta.prepare)
                    eta.refresh()  # before any answer: the prior alone, not said (the dry run's guess)
                    got["blind"] = (eta.last is not None, eta.eta(0, "m"), snapshot(runs, eta=eta)[0]["eta"])
                if st is not None and st.done >= ITEMS and "fc" not in got:
                    await asyncio.to_thread(eta.prepare)
                    eta.refresh()  # (no await from here: the counters are those the forecast read)
                    got.update(todo=eta.todo, fc=eta.last, critiques=st.ok + st.errors - st.done,
                               wire=eta.on_wire(time.monotonic()),
                               rows=snapshot(runs, eta=eta), seen={k: list(v) for k, v in runs[0].spent["m"].items()})
                    got["line"] = sweep_line(got["rows"])
                await asyncio.sleep(0.005)
        finally:
            view.cancel()

    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["m"], extra_endpoint="max_concurrency = 2\n")
        plan = RunPlan(RunSpec("jeebench", {"variant": "cot-critique"}, limit=ITEMS), ["m"], tmp_path / "r")
        code = execute([plan], load_config(cfg), command="test", cache_dir=tmp_path / "cache", live=False,
                       watch=probe)
    finally:
        srv.stop()
    assert code == 0 and "fc" in got, "the first pass ended while the view watched"
    ((key, by_pass),) = got["flying"].items()  # each call on the wire said as its run, model, pass, samples
    assert key == (0, "m") and set(by_pass) <= {"answer", "critique"}
    assert all(n == 1 and age >= 0 and ln.name for v in by_pass.values() for ln, age, n in v)
    assert got["blind"] == (True, None, "?")  # a forecast made, but from priors alone: the rate's `?` said
    left = ITEMS - got["critiques"]
    assert left >= 1  # the last answer's critique at least
    flying = sum(n for _, _, n in got["wire"].get((0, "m"), {}).get("critique", []))  # on the wire: sent
    assert 0 <= flying <= 2 and not got["wire"].get((0, "m"), {}).get("answer")
    (t,) = got["todo"]  # the forecast's inputs: no answer left, the critiques still to send
    assert (t.calls, t.follow["critique"][:2]) == (0, [left - flying, left - flying])
    own, every = got["seen"]["latency:critique"], [got["seen"][f"latency:{p}"] for p in ("answer", "critique")]
    assert own[1] == ITEMS - left < SHRINK  # this run's own critiques so far, weighed with all its calls' mean
    for p in ("answer", "critique"):  # (and their log-spread, the law of a call on the wire: runner.history)
        assert got["seen"][f"lnlat:{p}"][1] == got["seen"][f"lnlat2:{p}"][1] == got["seen"][f"latency:{p}"][1]
    basis = own[0] + (SHRINK - own[1]) * sum(e[0] for e in every) / sum(e[1] for e in every)
    lat, n = t.latency_seen["critique"]  # ... and the calls on the wire, at their age and what they have left
    assert n == SHRINK + flying and lat / n >= basis / SHRINK * (1 - 1e-9)
    fc = got["fc"]  # its output: the critiques' calls over the lane's 2 slots (no RPM or TPM), or the last
    mean = lat / n  # ones in flight together ending with their slowest (~1 + ln k calls), or those on the wire
    unsent = left - flying
    assert fc.expected_s >= max(unsent * mean / 2, mean * (1 + math.log(min(unsent, 2))) if unsent else 0.0) > 0 or (
        flying and fc.expected_s > 0)
    assert fc.bound in ("concurrency", "longest chain", "calls in flight", "last calls")
    (row,) = got["rows"]
    assert row["done"] == row["total"] == ITEMS  # every first-pass row in ...
    assert row["eta_s"] > 0 and row["eta"] != "done"  # ... and not done (before: `done`, from the answers' rate)
    assert "ETA done" not in got["line"]


def test_a_lane_shared_in_turn_ends_each_model_with_its_share():
    """Processor sharing on the binding limit: of work 1 and 3 on one lane, the small model ends at half
    the lane's time (1 + 1 of 4), the large with the lane."""
    w = LaneWork("k", None, None, 1, busy_s=[4.0, 4.0, 4.0])
    w.parts = {("0", "a"): [[1, 0, 1.0, 1.0, 0.0]] * 3, ("0", "b"): [[1, 0, 3.0, 3.0, 0.0]] * 3}
    assert w.ends(0) == {("0", "a"): 2.0, ("0", "b"): 4.0}
