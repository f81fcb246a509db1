"""The command line and the terminal: `evalsweep` (`main`: the parser and its dispatch), one module a
command (`demo`, `dryrun`, `models`, `cache`), the live view (`live`: layout, `progress`: watching a
run), and score-and-report after a run (`finish`).

The top layer: may import every other package (runner, report, suites, providers, cache, core);
nothing imports it.
"""
