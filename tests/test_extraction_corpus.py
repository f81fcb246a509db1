"""The hand-written extraction corpus (tests/data/extraction/<suite>/{dev,heldout}.jsonl): size, coverage of
every miss category issue 11 lists, and rule agreement on the held-out part that was never tuned on."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.agreement import agreement, load, read

CORPUS = Path(__file__).parent / "data" / "extraction"
SUITES = ("jeebench", "marvel", "m3gia", "vrb")

# Agreement of the rule stage on the held-out phrasings (measured; a regression fails the test).
# M3GIA's rules are the authors' parse_multi_choice_response: what they cannot read goes to the judge,
# so there the floor is on "never read wrong", and the unread share is what the judge stage must carry.
HELDOUT_FLOOR = {"jeebench": 0.97, "marvel": 0.97, "vrb": 0.97}


@pytest.mark.parametrize("suite", SUITES)
def test_corpus_size_and_split(suite: str) -> None:
    dev, held = load(CORPUS / suite / "dev.jsonl"), load(CORPUS / suite / "heldout.jsonl")
    assert len(dev) + len(held) >= 300 and len(held) >= 100
    ids = [c["id"] for c in dev + held]
    assert len(ids) == len(set(ids))
    # the held-out part is made of phrasings (family, template) that the dev part never uses
    dev_styles = {(c["family"], c["category"]) for c in dev}
    assert not {(c["family"], c["category"]) for c in held} & dev_styles


def test_jeebench_corpus_covers_the_issue_categories() -> None:
    cases = load(CORPUS / "jeebench" / "dev.jsonl") + load(CORPUS / "jeebench" / "heldout.jsonl")
    cats = {c["category"] for c in cases}
    assert {"option-lines", "brackets", "units", "percent", "abs-signed", "fraction", "expression"} <= cats
    texts = "\n".join(c["text"] for c in cases)
    assert "\\boxed{[" in texts and "moles" in texts and "\\frac{63}{8}" in texts and "80^2" in texts


@pytest.mark.parametrize("suite", list(HELDOUT_FLOOR))
def test_heldout_agreement(suite: str) -> None:
    ok, n, misses = agreement(suite, load(CORPUS / suite / "heldout.jsonl"))
    assert ok / n >= HELDOUT_FLOOR[suite], [(m["id"], m["expected"], m["got"]) for m in misses[:5]]


def test_m3gia_rules_read_wrong_only_when_an_option_hides_in_another() -> None:
    """The authors' option-text fallback takes the last substring hit: "north-east" also contains
    "east", so an answer quoting option E reads as C. Every other miss is unread (-> the judge)."""
    for part in ("dev", "heldout"):
        _, _, misses = agreement("m3gia", load(CORPUS / "m3gia" / f"{part}.jsonl"))
        for m in misses:
            if m["got"] is not None:
                said = m["options"][m["letters"].index(m["expected"])].lower()
                read = m["options"][m["letters"].index(m["got"])].lower()
                assert read in said and read != said, m


def test_jeebench_miss_categories_read_right() -> None:
    base = {"family": "t", "category": "t", "id": "t"}
    q_abs = "What is the value of $|\\mathrm{X}|$?"
    cases = [
        ("MCQ(multiple)", "Therefore, the correct options are:\n\n- **(A)** first\n- **(C)** third", "AC", None),
        ("MCQ(multiple)", "**Final Answer**\n\\boxed{[B, C]}", "BC", None),
        ("MCQ", "So the final answer is [B].", "B", None),
        ("Integer", "Final answer: 6 moles", 6.0, None),
        ("Numeric", "So $X = -90.39$.\n\nFinal answer: $-90.39$", 90.39, q_abs),
        ("Numeric", "So $X = -90.39$.\n\nFinal answer: $-90.39$", -90.39, "What is X?"),
        ("Numeric", "The final answer is $\\boxed{\\frac{63}{8}}$", 7.875, None),
        ("Integer", "\\boxed{80^2}", 6400.0, None),
        ("Numeric", "Final answer: 12.5%", 12.5, None),
        ("Numeric", "**Answer: 2.35 J**", 2.35, None),
    ]
    for qtype, text, want, q in cases:
        got = read("jeebench", {**base, "type": qtype, "text": text, "question": q})
        assert got == pytest.approx(want) if isinstance(want, float) else got == want, (text, got)
