"""The M3GIA prompt (verbatim from the paper's code), the judge's extraction prompt, and sim responses."""

from __future__ import annotations

import hashlib

from suites.m3gia.data import Question

PREFIX = (
    "Assuming you are an expert in multimodality. The following are multiple-choice questions (with answers) "
    "about causal commonsense reasoning. That may include picture information. Please only output options "
    "such as A, B, C, D, E, etc. without any explanation."
)
SUFFIX = "Answer with the option's letter from the given choices directly."


def choices_line(q: Question) -> str:
    return "  ".join(f"({x}) {o}" for x, o in zip(q.letters, q.options, strict=True))


def prompt_text(q: Question, mode: str = "prefix") -> str:
    """`prefix` puts the instruction line first; `suffix` appends the short instruction after `Answer: `."""
    question = q.hint + "\n" + q.question if q.hint and q.question else (q.question or q.hint)
    body = "Question: " + question + "\nChoices: " + choices_line(q) + "\nAnswer: "
    return PREFIX + "\n" + body if mode == "prefix" else body + "\n" + SUFFIX


# Stage 2, verbatim from the authors' utils/prompt_config.py ("choice_extraction"), sent with their system
# prompt at temperature 0 and max_tokens 10 (utils/eval_utils.py: chat_completion_openai, API_MAX_OUTPUT).
JUDGE_SYSTEM = "You are a helpful assistant."
JUDGE_MAX_TOKENS = 10
JUDGE = (
    "You are an AI assistant who will help me to match an answer with several options of a single-choice "
    "question. You are provided with a question, several options, and an answer, and you need to find which "
    "option is most similar to the answer. If the meaning of all options are significantly different from the "
    "answer, output Z. You should only do the matching based exactly on the literal meaning of the options and "
    "answer. You should not perform any external inference based on your knowledge during the matching. Your "
    "should output a single uppercase character in A, B, C, D, E, F (if they are valid options), and Z. \n"
    "Example 1: \nQuestion: What is the main object in image? \nOptions: (A) teddy bear (B) rabbit (C) cat "
    "(D) dog \nAnswer: a cute teddy bear \nYour output: A \nExample 2: \nQuestion: \nWhat is the main object "
    "in image? \nOptions: (A) teddy bear (B) rabbit (C) cat (D) dog \nAnswer: Spider \nYour output: Z \n"
    "Now it's your turn: \nQuestion: {question} \nOptions: {options} \nAnswer: {answer} \nYour output:"
)


def judged_answer(response: str) -> str:
    """The response as the authors hand it to the judge: their parser's stripped, space-padded copy."""
    for ch in [",", ".", "!", "?", ";", ":", "'"]:
        response = response.strip(ch)
    return " " + response + " "


def judge_prompt(q: Question, response: str) -> str:
    """The authors fill {options} with the Python list of "(X) option" strings, printed as a list."""
    question = q.hint + "\n" + q.question if q.hint and q.question else (q.question or q.hint)
    choices = [f"({x}) {o}" for x, o in zip(q.letters, q.options, strict=True)]
    return JUDGE.format(question=question, options=str(choices), answer=judged_answer(response))


# --- simulated responses, in the styles real models answer this prompt with


def _pick(seq: list[str], *key: str) -> str:
    h = hashlib.blake2b("\x1f".join(key).encode(), digest_size=8).digest()
    return seq[int.from_bytes(h, "big") % len(seq)]


def _styled(q: Question, letter: str, salt: str) -> str:
    text = q.options[q.letters.index(letter)]
    styles = [
        letter,
        letter,
        f"({letter})",
        f"{letter}.",
        f"The answer is {letter}.",
        f"({letter}) {text}",
        f"Answer: {letter}",
    ]
    if len(text.split()) >= 2:  # longer options: some models answer with the option text alone
        styles.append(f"Based on the picture and the question, the correct choice is {text}")
    return _pick(styles, q.item, letter, salt)


def sim_hints(q: Question) -> dict[str, list[str] | str]:
    """A correct response and wrong ones (other letters, plus the occasional off-format refusal)."""
    wrong = [_styled(q, x, "w") for x in q.letters if x != q.answer]
    wrong.append(
        _pick(
            [
                "I cannot determine the answer from the given information.",
                "Sorry, the image is unclear to me.",
                "None of the options seem correct.",
            ],
            q.item,
        )
    )
    return {"correct": _styled(q, q.answer, "c"), "wrong": wrong}


def judge_sim(q: Question, response: str) -> dict[str, list[str] | str]:
    """What a good judge says for `response`: the option whose text it quotes, else Z."""
    low = response.lower()
    hits = [(low.rfind(o.lower()), x) for x, o in zip(q.letters, q.options, strict=True) if o.lower() in low]
    right = max(hits)[1] if hits else "Z"
    others = [x for x in q.letters if x != right]
    return {"correct": right, "wrong": others[:1] if right == "Z" else ["Z", others[0]]}
