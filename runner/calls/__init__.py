"""The call path: everything between a planned request and the rows its answer makes.

`call` sends one group of samples through the circuit breaker, lane and provider; `gate` holds a
model's other calls until its first is answered; `fanout` lets a prompt-cache leader go first;
`learned` keeps what providers' refusals taught about each model; `spend` holds the cost ceilings;
`estimates` learns what a model really spends per call; `halt` cuts waits short on Ctrl-C.
The scheduler plans and orders calls; this package makes them.
"""
