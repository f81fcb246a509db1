"""What several processes share about one API key or one run: the lane's pacing budget (`local`: this
process; `redis` and its Lua script: every process on the key, `attach`: putting a sweep's lanes on
them) and `--join` work leases in Postgres (`leases`).

A budget (the seam `runner.lanes` talks to) implements:

    reserve(tokens) -> float     claim the next RPM slot (and `tokens` of TPM); seconds to wait for it
    confirm() -> float           at the slot: 0 = admitted (recorded), else seconds to wait and re-confirm
    reconcile(est, actual)       correct the TPM account once the real usage is known
    pause(seconds)               nobody on this key is admitted before now + seconds (key exhausted)
    defer_tokens(seconds)        no token admitted before now + seconds (refused for tokens); requests go
    set_limits(rpm, tpm)         the effective per-minute limits (config or provider), None = unlimited
    factor / set_factor(f)       the AIMD multiplier applied to both limits (and to concurrency if none)
    await acquire() / release()  a concurrency lease (cap: max_concurrency, 1 while probing limits)

`LocalBudget` also offers `on_sent()` (stamps the send of the request just admitted), hears
`late_by(s)` (a late timer widens its window guard ~1 s), orders lease waiters by expected work
(`acquire(work)`), queues calls for tokens (`take(est, charge)`: charged what the key counts at
admission, the expected rest held until the answer settles) and has `near` (its account at the last
admission).
`RedisBudget` also offers `granted()`: the future a call whose slot is not granted yet waits on
(set when the slot is due), so it is woken once instead of re-confirming; queues calls for tokens
across processes (`take`), and `stale()`: a wait for a call's tokens again when they were admitted long
before its send (it waited for a lease), the key charging them only as it goes.

Part of the engine: imports core and runner's lower modules (config, results, lanes' seam), never
the scheduler, report or cli.
"""
