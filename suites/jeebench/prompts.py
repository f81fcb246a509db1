"""The paper's prompts, verbatim from the authors' inference code (typos included: "the final will be",
"upto") and their released critique prompts. Every call sends an empty system message and one user message,
as inference.py does (`[{"role": "system", "content": ""}, {"role": "user", ...}]`)."""

from __future__ import annotations

from core.types import Message
from suites.jeebench.data import Item

SYSTEM = Message(role="system", content="")
"""inference.py sends an empty system message before the user's (`{"role": "system", "content": ""}`)."""
VARIANTS = ("normal", "cot", "cot-1shot", "cot-sc", "cot-critique", "cot-exam", "cot-tools")

PREFIX = {
    "MCQ": "In this problem, only one option will be correct. Give a detailed solution and end the solution with "
    "the final answer.",
    "MCQ(multiple)": "In this problem, multiple options can be correct. Give a detailed solution and end the solution "
    "with the final answer.",
    "Integer": "In this problem, the final answer will be a non-negative integer. Give a detailed solution and end "
    "the solution with the final answer.",
    "Numeric": "In this problem, the final will be a numeric value. Give the numerical answer correct upto the 2nd "
    "decimal digit. Give a detailed solution and end the solution with the final answer.",
}

EXAM = {
    "MCQ": "If the answer is wrong, you'll be given -1 marks. If the answer is correct, you'll be given +3 marks. "
    "If you're unsure of the answer, you can skip the question, and you'll be given 0 marks.",
    "MCQ(multiple)": "If any of the options in the final answer is wrong, you'll be given -2 marks. If all the "
    "options are correct, you'll be given +4 marks. If some of the options are correct, you'll be given +1 for "
    "each correct option. If you're unsure of the answer, you can skip the question, and you'll be given 0 marks.",
}

COT_SUFFIX = "Let's think step by step.\n"
CRITIQUE_SEPARATOR = "\n-----------\n"
CRITIQUE = "Find any problems(if any) with the given solution. If there are any errors, correct it and give the new answer."
"""§4.4's self-critique instruction as the authors sent it: their 200 released critique prompts
(somethingdevs/cs678-jeebench, data/responses/GPT4_CoT_self_refine_responses/responses_old.json, 2016-2019,
built on the released CoT completions) are all `"Problem: " + question + "\nSolution: Let's think step by
step.\n\n" + CoT answer + CRITIQUE_SEPARATOR + CRITIQUE`: no type instruction, a dashed separator, and
"Find any problems(if any) with the given solution." where the paper's §4.4 quotes "Find problems(if any) with
the given solutions." (the sent prompt is followed; the quote differs, recorded with the run)."""
PAPER_CRITIQUE = (
    "Find problems(if any) with the given solutions. If there are any errors, correct it and give the new answer."
)


def question_text(item: Item) -> str:
    return item.question.replace("\n\n", "\n").strip()


def prompt(item: Item, variant: str, few_shot: dict[str, dict[str, dict[str, str]]] | None = None) -> str:
    """The first-pass prompt of `variant` (cot-sc and cot-critique start from the cot prompt)."""
    prefix, q = PREFIX[item.type], question_text(item)
    if variant == "normal":
        p = prefix + "\n\nProblem: " + q
    elif variant in ("cot", "cot-sc", "cot-critique", "cot-tools"):
        p = prefix + "\n\nProblem: " + q + "\nSolution: " + COT_SUFFIX
    elif variant == "cot-1shot":
        if few_shot is None:
            raise ValueError("cot-1shot needs the few-shot examples")
        ex = few_shot[item.subject][item.type]
        p = prefix + "\n\nProblem: " + ex["problem"] + "\nSolution: " + ex["solution"] + "\n\nProblem: " + q
        p += "\nSolution: "
    elif variant == "cot-exam":
        if item.type not in EXAM:
            raise ValueError(f"cot-exam is for MCQ types only, not {item.type}")
        p = prefix + " " + EXAM[item.type] + "\n\nProblem: " + q + "\nSolution: " + COT_SUFFIX
    else:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return p.strip()


def critique_prompt(item: Item, cot_response: str) -> str:
    """The critique pass's prompt for `item`, byte for byte as the authors' released ones."""
    return "Problem: " + question_text(item) + "\nSolution: " + COT_SUFFIX + "\n" + cot_response + \
        CRITIQUE_SEPARATOR + CRITIQUE


JUDGE = {
    "MCQ": "The response below answers a single-correct multiple-choice question with options (A)-(D). Which "
    "option does it give as its final answer? Reply with the single letter only, or None if it gives no "
    "final option.",
    "MCQ(multiple)": "The response below answers a multiple-correct multiple-choice question with options "
    "(A)-(D). Which options does it give as its final answer? Reply with the letters only (for example ACD), "
    "or None if it gives no final option.",
    "Integer": "The response below answers a question whose answer is a non-negative integer. What final "
    "answer does it give? Reply with the number only, or None if it gives no final number.",
    "Numeric": "The response below answers a question whose answer is a number. What final answer does it "
    "give? Reply with the number only (decimal, no units), or None if it gives no final number.",
}
