"""The engine: config → lanes → scheduler → results.jsonl → scoring, for one run or a sweep.

Owns the run directory (config snapshot, manifest, append-only results, resume), the scheduler and its
lanes (pacing, concurrency, retries), and the scoring stage. Rooms inside it:
- `runner.budgets`: lane budgets (local; shared through Redis) and `--join` leases in Postgres;
- `runner.batch`: provider batch APIs as an alternative to live calls.

May import core, providers, cache and suites; never report or cli (they sit above it).
"""
