"""Writes the extraction corpus (dev.jsonl, heldout.jsonl per suite) from hand-written phrasings.

Every phrasing below was written by hand after how a model family ends its answers (GPT-4o/4.1,
o-series, Claude 3.5-4, Gemini 1.5-2.5, Llama 3, Qwen 2.5/QwQ, DeepSeek V3/R1, Mistral, Grok) and
tagged with the miss category it exercises. Each phrasing is filled with several answers and a short
reasoning body that mentions other options/numbers (so "last stated answer wins" is exercised), with a
fixed seed: the files are reproducible, and they are the corpus (tests read the JSONL, not this file).

HELD-OUT phrasings are a separate list, written before any tuning and never used to tune the rules:
agreement on heldout.jsonl is the number that says whether extraction holds on unseen styles.

    python tests/data/extraction/compose.py    # rewrites tests/data/extraction/<suite>/*.jsonl
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent

# ---------------------------------------------------------------------------------------------------
# JEEBench. {L}: one letter; {LS}: "A, C"; {LSand}: "A and C"; {P}: "(A) and (C)"; {Lcat}: "AC";
# {X}: the number as written; {Q} context: question text where the case needs one.
# expected for letters: sorted letters; for numbers: the value (or null).

JEE_BODY_MCQ = [
    "Let's check each option.\n(A) The force is conservative, so the work is path independent. This is true.\n"
    "(B) Since the potential is not symmetric, (B) cannot hold.\n",
    "We compute the determinant: $\\Delta = 2(3) - 1(4) = 2 \\neq 0$, so option (D) is ruled out at first "
    "sight, but let us verify (A) and (B).\n",
    "Step 1: Write the rate law $r = k[A]^2$.\nStep 2: Compare with the options; option C looks tempting, "
    "but the order is 2.\n",
    "",
]
JEE_BODY_NUM = [
    "Using $PV = nRT$ with $P = 2$ atm and $T = 300$ K gives $n = 0.08$ initially; after heating, "
    "$n = 1.5$ times that.\n",
    "First, $\\int_0^1 x^2 dx = \\frac{1}{3}$. Then multiply by 3 and add the boundary term 4.\n",
    "The energy stored is $U = \\frac{1}{2}CV^2 = 12$ J before the plates separate.\n",
    "",
]

# (family, category, type, template, dev?)  type: MCQ | MCQ(multiple) | Integer | Numeric
JEE_DEV = [
    ("gpt-4o", "plain", "MCQ", "{B}Thus, the correct answer is **({L})**."),
    ("gpt-4o", "plain", "MCQ(multiple)", "{B}Therefore, the correct options are **{P}**."),
    ("claude-3.5", "plain", "MCQ", "{B}## Final Answer\n\nThe correct answer is **({L})**"),
    ("claude-3.5", "option-lines", "MCQ(multiple)", "{B}Therefore, the correct options are:\n\n{LINES}"),
    ("claude-4", "option-lines", "MCQ(multiple)", "{B}## Conclusion\n\nThe statements that hold are:\n{LINES}"),
    ("gemini-2.5", "boxed", "MCQ", "{B}Final Answer: The final answer is $\\boxed{{{L}}}$"),
    ("gemini-2.5", "boxed", "MCQ(multiple)", "{B}Final Answer: The final answer is $\\boxed{{{Lcat}}}$"),
    ("llama-3", "boxed", "MCQ", "{B}The final answer is: $\\boxed{{({L})}}$"),
    ("qwen-2.5", "boxed", "MCQ(multiple)", "{B}Therefore, the answer is \\(\\boxed{{{LS}}}\\)."),
    ("deepseek-r1", "boxed", "MCQ", "{B}\n**Final Answer**\n\\boxed{{{L}}}"),
    ("deepseek-r1", "brackets", "MCQ(multiple)", "{B}\n**Final Answer**\n\\boxed{{[{LS}]}}"),
    ("o3", "plain", "MCQ", "{B}**Answer: {L}**"),
    ("o3", "plain", "MCQ(multiple)", "{B}**Answer: {LSand}**"),
    ("mistral", "brackets", "MCQ", "{B}So the final answer is [{L}]."),
    ("mistral", "brackets", "MCQ(multiple)", "{B}Final answer: [{LS}]"),
    ("grok-3", "brackets", "MCQ(multiple)", "{B}**Final answer:** {BR}"),
    ("gpt-4.1", "plain", "MCQ(multiple)", "{B}**Correct options: {LSand}**"),
    ("qwq", "boxed", "MCQ(multiple)", "{B}So the correct choices are \\boxed{{{LS}}}."),
    ("gpt-4o", "none", "MCQ", "{B}None of the given options is correct."),
    ("claude-3.5", "plain", "MCQ(multiple)", "{B}The correct statements are {P}."),
    # numbers
    ("gpt-4o", "plain", "Numeric", "{B}Therefore, the final answer is $\\boxed{{{X}}}$."),
    ("claude-3.5", "units", "Integer", "{B}**Final answer: {X} moles**"),
    ("claude-4", "units", "Numeric", "{B}## Final Answer\n\n$\\boxed{{{X} \\text{{ J}}}}$"),
    ("gemini-2.5", "percent", "Numeric", "{B}Final Answer: The final answer is $\\boxed{{{X}\\%}}$"),
    ("llama-3", "units", "Numeric", "{B}The final answer is: $\\boxed{{{X} \\, \\mathrm{{m/s}}}}$"),
    ("qwen-2.5", "fraction", "Numeric", "{B}Thus the required value is \\(\\boxed{{{FRAC}}}\\)."),
    ("deepseek-r1", "expression", "Integer", "{B}\n**Final Answer**\n\\boxed{{{POW}}}"),
    ("o3", "units", "Integer", "{B}Final answer: {X} moles"),
    ("mistral", "percent", "Numeric", "{B}Final answer: {X}%"),
    ("gpt-4.1", "abs-signed", "Numeric", "{B}So $X = -{X}$.\n\n**Final answer: $-{X}$**"),
    ("claude-4", "abs-signed", "Integer", "{B}Therefore $\\Delta H = -{X}$ kJ.\n\n**Final answer: -{X}**"),
    ("grok-3", "plain", "Integer", "{B}**Answer: {X}**"),
    ("gemini-1.5", "fraction", "Numeric", "{B}The final answer is $\\frac{{{NUM}}}{{{DEN}}}$."),
    ("gpt-4o", "units", "Numeric", "{B}Hence, the final answer is **{X} cm**."),
]

JEE_HELDOUT = [
    ("claude-sonnet-4", "option-lines", "MCQ(multiple)", "{B}**Conclusion.** Hence the correct answers are:\n{LINES2}"),
    ("gpt-5", "brackets", "MCQ", "{B}**Final answer:** \\boxed{{[{L}]}}"),
    ("gemini-2.5-pro", "brackets", "MCQ(multiple)", "{B}**Final Answer:** $\\boxed{{[{LS}]}}$"),
    ("qwen3", "boxed", "MCQ(multiple)", "{B}</think>\n\nThe correct options are $\\boxed{{{P}}}$."),
    ("deepseek-v3", "plain", "MCQ", "{B}### Final Answer\nThe correct option is **{L}**."),
    ("llama-3.3", "plain", "MCQ(multiple)", "{B}The final answer is: $\\boxed{{{LScomma}}}$"),
    ("o4-mini", "plain", "MCQ", "{B}Answer: ({L})"),
    ("mistral-large", "option-lines", "MCQ(multiple)", "{B}Thus, the correct options are\n\n{LINES}\n"),
    ("claude-opus-4", "none", "MCQ(multiple)", "{B}Therefore none of the options are correct."),
    # numbers
    ("claude-sonnet-4", "units", "Integer", "{B}**Final answer: {X} moles**"),
    ("gpt-5", "abs-signed", "Numeric", "{B}Hence $X = -{X}$, and the requested value is $-{X}$.\n\nFinal answer: $-{X}$"),
    ("gemini-2.5-pro", "fraction", "Numeric", "{B}Final Answer: The final answer is $\\boxed{{\\frac{{{NUM}}}{{{DEN}}}}}$"),
    ("qwen3", "expression", "Integer", "{B}</think>\n\nSo the answer is $\\boxed{{{POW}}}$."),
    ("deepseek-v3", "percent", "Numeric", "{B}### Final Answer\nThe percentage is **{X}%**."),
    ("o4-mini", "units", "Numeric", "{B}Answer: ≈ {X} m/s"),
    ("llama-3.3", "units", "Numeric", "{B}The final answer is: $\\boxed{{{X} \\text{{ kJ/mol}}}}$"),
    ("grok-4", "plain", "Numeric", "{B}**Final Answer**\n\n\\[\n\\boxed{{{X}}}\n\\]"),
]

ABS_QUESTION = (
    "The enthalpy change of the reaction is $X$ kJ per mole. What is the value of $|\\mathrm{{X}}|$?"
)
PLAIN_QUESTION = "What is the value of $X$?"
OPTION_TEXT = {
    "A": "the work done is independent of the path",
    "B": "the potential energy is maximum at $x=0$",
    "C": "$f$ is continuous on $[0,1]$",
    "D": "the entropy of the system increases",
}


def _letters(rng: random.Random, multiple: bool) -> str:
    if not multiple:
        return rng.choice("ABCD")
    k = rng.choice([1, 2, 2, 3, 3, 4])
    return "".join(sorted(rng.sample("ABCD", k)))


def _jee_case(rng: random.Random, fam: str, cat: str, qtype: str, tpl: str) -> dict:
    multiple = qtype == "MCQ(multiple)"
    ctx: dict = {}
    if qtype.startswith("MCQ"):
        ls = _letters(rng, multiple)
        ctx = {
            "L": ls[0],
            "LS": ", ".join(ls),
            "LScomma": ",".join(ls),
            "LSand": ls[0] if len(ls) == 1 else ", ".join(ls[:-1]) + " and " + ls[-1],
            "P": " and ".join(f"({c})" for c in ls) if len(ls) < 3 else ", ".join(f"({c})" for c in ls[:-1])
            + f", and ({ls[-1]})",
            "Lcat": ls,
            "BR": " ".join(f"[{c}]" for c in ls),
            "LINES": "\n".join(f"- **({c})** {OPTION_TEXT[c]}" for c in ls),
            "LINES2": "\n".join(f"* ({c}) — {OPTION_TEXT[c]}" for c in ls),
        }
        expected: object = None if cat == "none" else ls
        question = "Which of the following is(are) correct?\n" + " ".join(
            f"({c}) {t}" for c, t in OPTION_TEXT.items()
        )
        body = rng.choice(JEE_BODY_MCQ)
    else:
        if cat == "fraction":
            num, den = rng.choice([(63, 8), (7, 2), (5, 4), (27, 16), (9, 8), (11, 4)])
            ctx = {"FRAC": f"\\frac{{{num}}}{{{den}}}", "NUM": num, "DEN": den}
            expected = num / den
        elif cat == "expression":
            base, exp = rng.choice([(2, 5), (3, 4), (2, 10), (5, 3), (80, 2), (4, 3)])
            ctx = {"POW": f"{base}^{{{exp}}}" if exp > 9 else f"{base}^{exp}"}
            expected = float(base**exp)
        else:
            if qtype == "Integer":
                v = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 25, 36, 120])
                x = str(v)
            else:
                v = round(rng.uniform(0.05, 99.0), 2)
                x = f"{v:.2f}"
            ctx = {"X": x}
            expected = float(x)
        question = ABS_QUESTION if cat == "abs-signed" else PLAIN_QUESTION
        body = rng.choice(JEE_BODY_NUM)
    ctx["B"] = body
    return {
        "family": fam,
        "category": cat,
        "type": qtype,
        "question": question,
        "text": tpl.format(**ctx),
        "expected": expected,
    }


# ---------------------------------------------------------------------------------------------------
# MARVEL: avr (choice 1-4), coarse (a count), fine (one of two words).

MARVEL_AVR_DEV = [
    ("gpt-4o", "plain", "The pattern rotates by 90 degrees each step, so choice 2 would continue it only if "
     "the dot moved. Looking again, the answer is choice {N}."),
    ("claude-3.5", "plain", "Each panel adds one side to the shape.\n\n**Answer: {N}**"),
    ("gemini-1.5", "plain", "The missing piece should be a hexagon with three dots. Option {N} fits best."),
    ("llama-3", "boxed", "The final answer is: $\\boxed{{{N}}}$"),
    ("qwen-2.5", "boxed", "Comparing choices 1 through 4, the answer is \\boxed{{{N}}}."),
    ("gpt-4.1", "words", "The sequence alternates colours; the {ORD} choice completes it."),
    ("o3", "terse", "{N}"),
    ("mistral", "plain", "Based on the rotation, I would choose option {N}."),
    ("claude-4", "plain", "Looking at choices 1-4:\n- Choice 1: wrong orientation\n- Choice {N}: matches\n\n"
     "**Choice {N}** is the most appropriate answer."),
    ("grok-3", "refusal", "I'm sorry, but I can't determine the answer from this image."),
    ("deepseek-r1", "plain", "</think>\nThe correct choice is **{N}**."),
    ("gemini-2.5", "words", "The answer is choice {WORD}."),
]
MARVEL_AVR_HELDOUT = [
    ("gpt-5", "plain", "Final answer: choice {N}"),
    ("claude-sonnet-4", "plain", "The missing panel must contain two arrows pointing left.\n\n**The answer is {N}.**"),
    ("qwen3", "boxed", "</think>\n\n\\boxed{{{N}}}"),
    ("gemini-2.5-pro", "plain", "Therefore, the most appropriate choice is **({N})**."),
    ("llama-3.3", "plain", "Choice {N} is the correct answer because it continues the rotation."),
    ("deepseek-v3", "refusal", "I cannot see the image clearly enough to answer."),
]
MARVEL_COUNT_DEV = [
    ("gpt-4o", "plain", "There are {N} grids in the context part, including the blank grid."),
    ("claude-3.5", "plain", "Counting row by row: 3 on top... In total there are **{N}** grids."),
    ("gemini-1.5", "terse", "{N}"),
    ("llama-3", "words", "I count {W} panels."),
    ("qwen-2.5", "boxed", "The answer is \\boxed{{{N}}}."),
    ("mistral", "plain", "Answer: {N}"),
    ("o3", "plain", "{N} grids."),
    ("claude-4", "plain", "The choices part has 4 cells per row in one row... so the total is {N}."),
]
MARVEL_COUNT_HELDOUT = [
    ("gpt-5", "plain", "Total grids (blank included): {N}"),
    ("qwen3", "words", "There are {W} grids in the whole puzzle."),
    ("gemini-2.5-pro", "boxed", "Counting each panel, I get $\\boxed{{{N}}}$."),
    ("claude-sonnet-4", "plain", "**{N} grids** in total."),
]
MARVEL_FINE_DEV = [
    ("gpt-4o", "plain", "The small triangle in choice 2 is in the {A} part."),
    ("claude-3.5", "plain", "Looking at choice 2, the triangle sits in the **{A}** part, not the {D} part."),
    ("gemini-1.5", "terse", "{Acap}."),
    ("llama-3", "plain", "Answer: {A}"),
    ("qwen-2.5", "plain", "It is in the {A} part rather than the {D} part."),
    ("o3", "plain", "{Acap} part."),
]
MARVEL_FINE_HELDOUT = [
    ("gpt-5", "plain", "Final answer: {A}"),
    ("claude-sonnet-4", "plain", "The triangle is located in the {A} part of choice 2."),
    ("deepseek-v3", "plain", "**{Acap}** — it is clearly not in the {D} part."),
]
FINE_PAIRS = [("upper", "lower"), ("left", "right"), ("lower", "upper"), ("right", "left"), ("yes", "no"),
              ("inside", "outside")]
ORD = {1: "first", 2: "second", 3: "third", 4: "fourth"}
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
         10: "ten", 12: "twelve"}


def _marvel_case(rng: random.Random, kind: str, fam: str, cat: str, tpl: str) -> dict:
    if kind == "avr":
        n = rng.randint(1, 4)
        text = tpl.format(N=n, ORD=ORD[n], WORD=WORDS[n])
        return {"family": fam, "category": cat, "kind": kind, "text": text,
                "expected": None if cat == "refusal" else n}
    if kind == "coarse":
        n = rng.choice(list(WORDS))
        return {"family": fam, "category": cat, "kind": kind, "text": tpl.format(N=n, W=WORDS[n]),
                "expected": n}
    a, d = rng.choice(FINE_PAIRS)
    if rng.random() < 0.5:
        a, d = d, a  # the asserted word is the gold half the time
    answer, distractor = (a, d) if rng.random() < 0.5 else (d, a)
    return {"family": fam, "category": cat, "kind": kind, "text": tpl.format(A=a, D=d, Acap=a.capitalize()),
            "answer": answer, "distractor": distractor, "expected": a}


# ---------------------------------------------------------------------------------------------------
# M3GIA: letters A-D (some E/F), the authors' rule stage; expected = the letter a person reads, or null.

M3GIA_OPTIONS = [
    ("a red circle", "a blue square", "a green triangle", "a yellow star"),
    ("12", "15", "18", "21"),
    ("The man is going to the market", "The man is going home", "The man is lost", "The man is waiting"),
    ("north", "south", "east", "west", "north-east"),
]
M3GIA_DEV = [
    ("gpt-4o", "terse", "{L}"),
    ("gpt-4o", "plain", "The answer is {L}."),
    ("claude-3.5", "paren", "({L}) {T}"),
    ("gemini-1.5", "plain", "Answer: {L}"),
    ("llama-3", "dot", "{L}. {T}"),
    ("qwen-vl", "terse", "{L}"),
    ("internvl", "paren", "({L})"),
    ("gpt-4o-mini", "text-only", "Based on the picture, the correct choice is {T}"),
    ("claude-3-haiku", "refusal", "I'm not able to see an image here, so I cannot answer."),
    ("llava", "markdown", "**{L}**"),
    ("minicpm", "plain", "The correct option is {L}: {T}"),
    ("gemini-2.0", "cot", "Looking at the sequence, the numbers increase by 3. So the answer is ({L})."),
]
M3GIA_HELDOUT = [
    ("gpt-4.1", "markdown", "**Answer: {L}**"),
    ("claude-sonnet-4", "cot", "The pattern suggests {T}.\n\nAnswer: {L}"),
    ("qwen2.5-vl", "boxed", "\\boxed{{{L}}}"),
    ("gemini-2.5", "text-only", "It shows {T}."),
    ("llama-4", "refusal", "Sorry, I can't help with that."),
]


def _m3gia_case(rng: random.Random, fam: str, cat: str, tpl: str) -> dict:
    opts = rng.choice(M3GIA_OPTIONS)
    letters = "ABCDEF"[: len(opts)]
    i = rng.randrange(len(opts))
    return {"family": fam, "category": cat, "letters": list(letters), "options": list(opts),
            "text": tpl.format(L=letters[i], T=opts[i]), "expected": None if cat == "refusal" else letters[i]}


# ---------------------------------------------------------------------------------------------------
# VRB: labels A-D (or 1-4 / a-d per item), the reference's 8-step extraction.

VRB_BODY = [
    "Let me look at each option.\nOption A shows three apples, option B shows four.\n",
    "The shaded part is one quarter of the shape. Checking each option carefully:\n",
    "Step 1: count the triangles. Step 2: compare with the choices.\n",
]
VRB_DEV = [
    ("gpt-4o", "last-line", "{B}The correct answer is option {L}.\n\n{L}"),
    ("claude-3.5", "last-line", "{B}Therefore, the answer is {L}.\n{L}"),
    ("gemini-1.5", "boxed", "{B}Final answer: $\\boxed{{{L}}}$"),
    ("llama-3", "answer-is", "{B}The answer is {L}."),
    ("qwen-vl", "box-token", "{B}<|begin_of_box|>{L}<|end_of_box|>"),
    ("glm-4v", "tag", "{B}<answer>{L}</answer>"),
    ("mistral", "final", "{B}Final answer: **{L}**"),
    ("gpt-4.1", "markdown", "{B}**{L}**"),
    ("o3", "final", "{B}Final Answer: {L}"),
    ("claude-4", "choose", "{B}I choose {L} because it has the most dots."),
    ("refusal", "none", "I'm unable to view the image."),
]
VRB_HELDOUT = [
    ("gpt-5", "last-line", "{B}So the best option is {L}.\n\n**{L}**"),
    ("gemini-2.5-pro", "final", "{B}**Final Answer:** The final answer is **{L}**"),
    ("qwen2.5-vl", "boxed", "{B}\\boxed{{\\text{{{L}}}}}"),
    ("claude-sonnet-4", "answer-is", "{B}Considering each option carefully, the answer is {L}"),
]
VRB_LABELS = [("A", "B", "C", "D"), ("1", "2", "3", "4"), ("a", "b", "c", "d")]


def _vrb_case(rng: random.Random, fam: str, cat: str, tpl: str) -> dict:
    labels = rng.choice(VRB_LABELS)
    lab = rng.choice(labels)
    body = rng.choice(VRB_BODY) if labels[0] == "A" else ""
    return {"family": fam, "category": cat, "labels": list(labels), "text": tpl.format(B=body, L=lab),
            "expected": None if cat == "none" else lab}


# ---------------------------------------------------------------------------------------------------


def _fill(rng: random.Random, specs: list, make, per: int, tag: str) -> list[dict]:
    out = []
    for k, spec in enumerate(specs):
        for j in range(per):
            case = make(rng, *spec)
            case["id"] = f"{tag}-{k:02d}-{j}"
            out.append(case)
    return out


def compose() -> dict[str, dict[str, list[dict]]]:
    rng = random.Random(11)
    corpus: dict[str, dict[str, list[dict]]] = {}
    corpus["jeebench"] = {
        "dev": _fill(rng, JEE_DEV, _jee_case, 7, "dev"),
        "heldout": _fill(rng, JEE_HELDOUT, _jee_case, 7, "held"),
    }
    mk = {
        "dev": [("avr", MARVEL_AVR_DEV, 10), ("coarse", MARVEL_COUNT_DEV, 10), ("fine", MARVEL_FINE_DEV, 10)],
        "heldout": [("avr", MARVEL_AVR_HELDOUT, 10), ("coarse", MARVEL_COUNT_HELDOUT, 10),
                    ("fine", MARVEL_FINE_HELDOUT, 10)],
    }
    corpus["marvel"] = {
        part: [
            c
            for kind, specs, per in rows
            for c in _fill(rng, [(kind, *s) for s in specs], _marvel_case, per, f"{part}-{kind}")
        ]
        for part, rows in mk.items()
    }
    corpus["m3gia"] = {
        "dev": _fill(rng, M3GIA_DEV, _m3gia_case, 18, "dev"),
        "heldout": _fill(rng, M3GIA_HELDOUT, _m3gia_case, 20, "held"),
    }
    corpus["vrb"] = {
        "dev": _fill(rng, VRB_DEV, _vrb_case, 20, "dev"),
        "heldout": _fill(rng, VRB_HELDOUT, _vrb_case, 25, "held"),
    }
    return corpus


def main() -> None:
    for suite, parts in compose().items():
        (HERE / suite).mkdir(exist_ok=True)
        for part, cases in parts.items():
            lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
            (HERE / suite / f"{part}.jsonl").write_text(lines, encoding="utf-8")
        print(suite, {p: len(c) for p, c in parts.items()})


if __name__ == "__main__":
    main()
