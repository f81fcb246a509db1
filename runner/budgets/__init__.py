"""What several processes share about one API key or one run: the lane's pacing budget (`local`: this
process; `redis` and its Lua script: every process on the key, `attach`: putting a sweep's lanes on
them) and `--join` work leases in Postgres (`leases`).

Part of the engine: imports core and runner's lower modules (config, results, lanes' seam), never
the scheduler, report or cli.
"""
