"""The plain data every stage passes along (requests, completions, rows): the bottom layer, importing
nothing of ours, so suites, the scheduler, the cache and providers may all depend on it."""
