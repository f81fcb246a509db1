"""The VRB prompt, verbatim from the reference (vrb-benchmark `load.py`): one user message, image first,
the image resized and re-encoded as the reference's LLM library does (image.py)."""

from __future__ import annotations

from core.types import ImagePart, Message, user
from suites.vrb.data import Item
from suites.vrb.image import reference_png

TEMPLATE = """
Please answer the following question about the image.
{question}

The image contains four possible answers labelled {labels}.
Please think step by step and consider each option carefully.
Give your final answer option (e.g. one of {labels}) as a single character on a new line at the end of your response."""

MAX_TOKENS: int | None = None
"""Unset: each provider's own maximum, so reasoning models keep their long chains of thought and no
model rejects the sweep for asking more than its cap (the reference asked 33,000, which e.g. gpt-4o's
16,384 cap refuses). Recorded as a deviation (`MAX_TOKENS_DEVIATION`): the reference sends min(33,000,
the model's maximum). Set `params = {max_tokens = N}` for a model in the config to cap it."""


def prompt_text(question: str, labels: tuple[str, ...]) -> str:
    """The reference renders the labels as "A, B, C, D" in both places (the first followed by the
    sentence's own period). The reference's Jinja template `TEMPLATE_BOTH` starts with a newline, kept
    here; Jinja drops its single trailing newline, so the text ends at "response."."""
    return TEMPLATE.format(question=question, labels=", ".join(labels))


def messages(item: Item) -> list[Message]:
    """A single user message: the image (detail "high", resized and PNG-encoded as the reference sends it),
    then the text."""
    image = ImagePart(data=reference_png(item.image), mime="image/png", detail="high")
    return [user(image, prompt_text(item.question, item.labels))]
