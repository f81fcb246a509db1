"""Shared key budgets: K = 1, 2, 4 processes on one API key, with and without `[shared] redis_url`.

Each configuration starts K `evalsweep run` processes at once, each with its own dataset and each
configured with the key's full RPM, against the mock server (its own process) enforcing that RPM over
sliding 1-second windows; each has enough work to fill the key alone for --seconds. Printed side by
side: achieved rate / limit over the span when all K were sending, 429s received, and CPU per call. The CPU the Redis round trips add is the K=1 difference
(one process paces itself right either way, so neither has 429s to retry). Targets: >= 95% of the
limit, 0 x 429, <= 0.1 ms extra CPU per call.

    python bench/shared_limits.py [--rpm 12000] [--seconds 10] [--ks 1,2,4]

It ends with the Redis path's CPU per call in one process (`in_process`: the same admissions through a local
and a Redis budget), without a TPM and with one (its calls admitted by the key's Redis TPM account; the last
line settles each call, as answers do); `--in-process` runs these lines alone:

    python bench/shared_limits.py --in-process

Concurrency on one key across processes (#40), each process a Lane on the shared budget whose calls
take --latency s (no server: the budget is what is measured), beside the same workload alone on the
key in the same run (its single-process figure):

    python bench/shared_limits.py --busy-idle 7 --cap 8     1 busy process beside 7 idle ones (they
        hold the key open and heartbeat, sending nothing): the busy one's calls/s over its rate alone
    python bench/shared_limits.py --join 6 --cap 4          6 busy processes (--join workers) on a cap
        of 4: each one's calls/s and share of time idle while it holds work (calls waiting, none on
        the wire), the key's leases in use while any process waits

Each prints Redis commands per API call (INFO commandstats before/after, every process's) and the
Redis path's CPU per call (the busy processes' CPU per call on Redis minus on a LocalBudget alone).

TPM on one key across processes (#40 item 4), no server (the budget is what is measured):

    python bench/shared_limits.py --tpm 600000 [--calls 160]
        one fixed workload of calls each charged --charge tokens at admission (prompt + max_tokens) whose
        usage is heavy-tailed (1 in 8 uses all of it, the others a tenth): one process on a LocalBudget,
        then K = 1, 2 processes on one Redis-shared key (the work split between them), in one run. Printed:
        wall / (total tokens used / TPM), the share of the TPM used while calls wait, and the 429s the
        key would have sent (its bucket, a second deep, replayed from every process's admissions and
        answers: charged at admission, settled at the answer), and Redis script calls per API call. (TPM
        used may pass 1 on a short run: every account starts with a full bucket, a second of the TPM.)

    python bench/shared_limits.py --tpm 600000 --tpm-rpm 420 [--calls 160]
        calls that queue for the key's RPM slots while their tokens use over half its TPM (0.7 here), each
        using what it was charged: wall / (calls / RPM), the 429s for tokens, script calls per API call (a
        TPM account charging a call twice, one late for its slot, shows as a wall above 1x).

One module per mode (bench/shared_limits_rpm.py, _conc.py, _tpm.py; their shared worker plumbing in
_common.py); this file parses the arguments and runs the workers the modes spawn.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from bench import shared_limits_conc, shared_limits_rpm, shared_limits_tpm  # noqa: E402
from tests.servers import RedisServer  # noqa: E402


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("--worker", "--tpm-worker"):
        worker = shared_limits_conc.worker if sys.argv[1] == "--worker" else shared_limits_tpm.worker
        print(orjson.dumps(asyncio.run(worker(orjson.loads(sys.argv[2])))).decode())
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rpm", type=float, default=12000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ks", default="1,2,4")
    ap.add_argument("--busy-idle", type=int, metavar="N", help="1 busy process beside N idle ones")
    ap.add_argument("--join", type=int, metavar="K", help="K busy processes on one key")
    ap.add_argument("--cap", type=int, default=8, help="the key's max_concurrency (--busy-idle, --join)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per call (--busy-idle, --join, --tpm)")
    ap.add_argument("--tpm", type=float, help="the key's TPM: the heavy-tailed TPM workload")
    ap.add_argument("--calls", type=int, default=160, help="calls of the --tpm workload")
    ap.add_argument("--charge", type=int, default=1000, help="tokens each --tpm call is charged at admission")
    ap.add_argument("--tpm-rpm", type=float, metavar="RPM", help="--tpm: the key's calls queue for this RPM instead")
    ap.add_argument("--in-process", action="store_true", help="only the in-process lines (the Redis path's CPU per call)")
    a = ap.parse_args()
    if a.in_process:
        redis = RedisServer().start()
        try:
            shared_limits_rpm.in_process(redis.url)
        finally:
            redis.close()
        return
    if a.tpm is not None:
        redis = RedisServer().start()
        try:
            if a.tpm_rpm:
                shared_limits_tpm.rpm_queue_runs(redis.url, a.tpm, a.tpm_rpm, a.calls, a.charge, 16, a.latency)
            else:
                shared_limits_tpm.tpm_runs(redis.url, a.tpm, a.calls, a.charge, 16, a.latency)
        finally:
            redis.close()
        return
    if a.busy_idle is not None or a.join is not None:
        redis = RedisServer().start()
        try:
            if a.busy_idle is not None:
                shared_limits_conc.processes(redis.url, 1, a.busy_idle, a.cap, a.latency, a.seconds, 600_000)
            if a.join is not None:
                shared_limits_conc.processes(redis.url, a.join, 0, a.cap, a.latency, a.seconds, 600_000)
        finally:
            redis.close()
        return
    redis = RedisServer().start()
    try:
        shared_limits_rpm.runs(redis.url, a.rpm, a.seconds, [int(x) for x in a.ks.split(",")])
    finally:
        redis.close()


if __name__ == "__main__":
    main()
