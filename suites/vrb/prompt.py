"""The VRB prompt, verbatim from the reference (vrb-benchmark `load.py`): one user message, image first."""

from __future__ import annotations

from core.types import Message, user
from suites.vrb.data import Item

TEMPLATE = """Please answer the following question about the image.
{question}

The image contains four possible answers labelled {labels}.
Please think step by step and consider each option carefully.
Give your final answer option (e.g. one of {labels}) as a single character on a new line at the end of your response."""

MAX_TOKENS: int | None = None
"""Unset: each provider's own maximum, so reasoning models keep their long chains of thought and no
model rejects the sweep for asking more than its cap (the reference asked 33,000, which e.g. gpt-4o's
16,384 cap refuses). Set `params = {max_tokens = N}` for a model in the config to cap it."""


def prompt_text(question: str, labels: tuple[str, ...]) -> str:
    """The reference renders the labels as "A, B, C, D" in both places (the first followed by the
    sentence's own period). The reference's Jinja template also starts with a newline, which we drop
    as the issue's exact prompt does."""
    return TEMPLATE.format(question=question, labels=", ".join(labels))


def messages(item: Item) -> list[Message]:
    """A single user message: the image (detail "high", as the reference sends it), then the text."""
    return [user(item.image, prompt_text(item.question, item.labels), detail="high")]
