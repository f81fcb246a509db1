"""Batch mode: a model's calls go out as provider batches (half price, answers within 24 h).

  batcher.py  the Batcher the scheduler hands requests to: queue, submit, poll, resolve, fall back live
  journal.py  `batches.jsonl`, the write-ahead journal that lets a resumed run wait for in-flight batches
  plan.py     which models batch (`--batch off|on|auto`) and the cost / wall-time numbers `--dry-run` prints

Import order is one way: plan -> batcher -> journal; this file imports none of them, so importing
`runner.batch.journal` (run.py, at startup) does not pull in the scheduler.
"""
