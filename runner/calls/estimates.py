"""What a model really spends per call, learnt from its answers: output tokens (reasoning included)
and latency, per pass (answer, critique, judge...).

TPM pacing charges a call `prompt + max_tokens`, as providers count it when they admit a request
(OpenAI: the larger of max_tokens and its estimate; Anthropic: max_tokens, settled at the end), or
more when the model's answers so far spent more: a reasoning model writes several times its answer
budget in thoughts, and charged only the budget it runs the key into debt (429s) when its answers
settle. The running mean of its answers' output (reasoning included) per pass; the lane reconciles
every call with its real usage (a chat model's unused budget comes back as credit), so the mean is
what must be right, not each call. Latency feeds the longest-work-first order of a
concurrency-bound lane's queue: its median, not its mean (`_Median`).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from core.types import Request, text_of
from runner.budgets.rank import Rank

FIRST_PASS = "answer"
"""The pass a suite's requests start with (runner.scheduler counts progress by it); every other pass is
a follow-up, made from an answer (a critique, a judge, a tool round)."""

UNSEEN_S = math.inf
"""The expected duration of a pass with no answer yet: a lane ranks it with the longest it has seen
(runner.budgets.local), so every model starts early and none waits for all others to be known."""


TRIM_N, TRIM_X = 16, 4.0
"""A pass's first TRIM_N samples count at most TRIM_X times the mean so far (the suite's budget before
any): one early thought of 30x the median (a heavy tail) would otherwise set every call's charge for
the next minute, and charges held for calls in flight are what a TPM lane's pace is made of."""


@dataclass
class _Mean:
    n: int = 0
    total: float = 0.0

    def add(self, x: float, k: int = 1, cap: float | None = None) -> None:
        """`k` samples totalling `x`; with `cap`, early samples are counted at most TRIM_X x cap each."""
        if cap is not None and self.n < TRIM_N:
            x = min(x, TRIM_X * k * (self.total / self.n if self.n else cap))
        self.n += k
        self.total += x

    def get(self, default: float) -> float:
        return self.total / self.n if self.n else default


RANK_N = 101
"""A pass's latest latencies its median is taken over (a provider slowing down shows within them)."""


@dataclass
class _Median:
    """The median of the latest RANK_N latencies: the rank of a kind of call on its lane. A mean follows its
    heavy tail: one early thought of 30x the median (a long thinker, a Lomax draw) puts a model ahead of the
    others for the next hundred calls. Replays of 60 draws of bench/reasoning_sweep.py's laws, mean -> median
    (chains first): no-n 1.154 -> 1.146x its limit, conc 1.090 -> 1.091, shared 1.200 -> 1.189; ranked by the
    laws' own means 1.135, 1.086, 1.186. Neither sees the calls still in flight: a slow model's first answers
    are its quick ones, and a kind ranked last gets no answer more to correct it (bench no-n, seed 0: nn02
    ranked on one answer of 0.73 s until 52 s of 56, then its backlog, one call of 15 s, the lane's tail): a lane
    ranks a figure of few answers toward its group's over the lane's models (runner.budgets.rank.SHRINK_N)."""

    recent: deque[float] = field(default_factory=deque)
    ordered: list[float] = field(default_factory=list)

    def add(self, x: float) -> None:
        if len(self.recent) == RANK_N:
            del self.ordered[bisect.bisect_left(self.ordered, self.recent.popleft())]
        self.recent.append(x)
        bisect.insort(self.ordered, x)

    def __len__(self) -> int:
        return len(self.recent)

    def get(self, default: float) -> float:
        o, n = self.ordered, len(self.ordered)
        if not n:
            return default
        return o[n // 2] if n % 2 else (o[n // 2 - 1] + o[n // 2]) / 2


@dataclass
class Spend:
    """Per pass: output tokens per sample (their mean) and latency per call (by samples in the call: its
    median), as observed."""

    out: dict[str, _Mean] = field(default_factory=dict)
    latency: dict[tuple[str, int], _Median] = field(default_factory=dict)
    _work: dict[tuple[int, str, int], tuple[tuple[int, str, int], Callable[[], Rank], bool]] = field(
        default_factory=dict, repr=False
    )
    _budget: dict[str, int] = field(default_factory=dict, repr=False)  # a pass's max_tokens, as sent

    def tokens(self, req: Request) -> int:
        """Expected tokens of one sample of `req` (`cost`'s first)."""
        return self.cost(req)[0]

    def cost(self, req: Request) -> tuple[int, int]:
        """(expected tokens, admission charge) of one sample of `req`: its prompt (~4 chars a token,
        ~765 an image) and the output its pass used so far, at least the suite's max_tokens; and what
        a key counts when it admits the call, the prompt and max_tokens (the rest settles later)."""
        chars = images = 0
        for msg in req.messages:
            chars += len(text_of(msg.content))
            if not isinstance(msg.content, str):
                images += sum(1 for p in msg.content if p.type == "image")
        budget = req.decoding.max_tokens or 256
        self._budget[req.pass_] = budget
        m = self.out.get(req.pass_)
        prompt = chars // 4 + 765 * images
        return prompt + (budget if m is None else max(budget, round(m.get(budget)))), prompt + budget

    def seconds(self, pass_: str, n: int) -> float:
        """Expected latency of a call of `n` samples of `pass_`: the larger of its own median so far and
        a one-sample call's times 1 + ln n (an n call waits for the slowest of its n; heavy tails grow
        slowly with n; a few n calls alone say little). A pass of n calls only (a self-consistency run)
        is ranked by its own: taken from one-sample calls it had none, unseen for good, and a lane whose
        models all sent only n calls handed its leases in arrival order (replayed, bench/lane_replay:
        conc's 8 models x 20 items of n = 8 on 200 synthetic draws, 1.199 -> 1.171x its limit, 63 -> 108
        of them <= 1.15x)."""
        one = self.latency.get((pass_, 1))
        base = UNSEEN_S if one is None else one.get(UNSEEN_S)
        if n == 1:
            return base
        m = self.latency.get((pass_, n))
        own = 0.0 if m is None else m.get(0.0)
        return own if one is None and own else max(base * (1.0 + math.log(n)), own)

    def rank(self, pass_: str, n: int) -> tuple[float, int, tuple[str, int]]:
        """What a lane ranks a call of `n` samples of `pass_` by (runner.budgets.local): its expected
        latency (`seconds`), the answers that figure rests on (its own n's or one-sample calls', the more)
        and its group, the pass and n: a lane shrinks a figure of few answers toward its group's over
        the lane's models, so one quick first draw does not rank a model last for good."""
        one, m = self.latency.get((pass_, 1)), self.latency.get((pass_, n))
        return self.seconds(pass_, n), max(len(one or ()), len(m or ())), (pass_, n)

    def work(self, pass_: str, n: int) -> tuple[tuple[int, str, int], Callable[[], Rank], bool]:
        """The kind of a call (this model's pass and n), its expected duration (`rank`), read when a
        lease frees (runner.budgets.local orders a lane's waiting calls by it), and whether it is a
        follow-up: a pass after the first (`answer`: the scheduler's first pass) is made from an answer,
        its chain already begun, and goes before the first calls of a lane paced by tokens."""
        key = (id(self), pass_, n)
        got = self._work.get(key)
        if got is None:
            got = self._work[key] = (key, partial(self.rank, pass_, n), pass_ != FIRST_PASS)
        return got

    def observe(self, pass_: str, n: int, output_tokens: int | None, latency_s: float) -> None:
        if output_tokens is not None:
            self.out.setdefault(pass_, _Mean()).add(output_tokens, n, self._budget.get(pass_))
        self.latency.setdefault((pass_, n), _Median()).add(latency_s)
