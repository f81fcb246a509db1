"""Hand-made cases for every rule of the JEEBench answer extractor (extract.py, fallbacks.py, mathexpr.py)
and the judge-reply parser: tricky responses, then the rules widened for issue #19, each group named by the
response sets it was added on."""

from __future__ import annotations

import pytest

from suites.jeebench.extract import extract, parse_judge

FALSE_Q = "Which of the following statement(s) is(are) FALSE?\n(A) x\n(B) y\n(C) z\n(D) w"


@pytest.mark.parametrize(
    ("text", "qtype", "question", "want"),
    [
        ("Therefore, the correct answer is (B) $6.4 \\times 10^{-34}$.", "MCQ", None, "B"),
        ("Hence, the correct option is $\\boxed{\\textbf{(C)}}$.", "MCQ", None, "C"),
        ("The answer is [A] 58001 bar.", "MCQ", None, "A"),
        (
            "Option (A) is wrong. Option (C) is correct.\nOption (D) is incorrect because of X.",
            "MCQ",
            None,
            "C",
        ),
        ("So the answer is (B) or (C).", "MCQ", None, None),  # several letters for a single-correct MCQ
        ("The answer is (E).", "MCQ", None, None),  # outside A-D
        ("After checking, none of the options are correct.", "MCQ", None, None),
        ("I'm sorry, but I cannot solve this problem.", "MCQ", None, None),
        (
            "First I thought (A). The correct answer is (B).\nOn reflection, the final answer is (D).",
            "MCQ",
            None,
            "D",
        ),
        ("Therefore, the correct options are (A), (B), and (D).", "MCQ(multiple)", None, "ABD"),
        ("The answer is $\\boxed{ABD}$.", "MCQ(multiple)", None, "ABD"),
        ("Final Answer: A, B and D", "MCQ(multiple)", None, "ABD"),
        ("Hence, the correct options are A, B, and C.", "MCQ(multiple)", None, "ABC"),
        ("Options (A) and (C) are true, and options (B) and (D) are false.", "MCQ(multiple)", None, "AC"),
        ("Therefore, all options (A), (B), (C), and (D) are correct.", "MCQ(multiple)", None, "ABCD"),
        (
            "Therefore, all the given expressions for $l$ are dimensionally correct.",
            "MCQ(multiple)",
            None,
            "ABCD",
        ),
        ("Hence, the FALSE statement(s) is (are) (A).", "MCQ(multiple)", FALSE_Q, "A"),
        (
            "(A) is false. (B) is true. (C) is true. (D) is true.\nSo only (A) is false.",
            "MCQ(multiple)",
            FALSE_Q,
            "A",
        ),
        ("The final answers are:\n(A) False\n(B) True\n(C) True\n(D) Not given", "MCQ(multiple)", None, "BC"),
        (
            "In conclusion, the correct options are $\\boxed{\\textbf{(A)}}$ and $\\boxed{\\textbf{(B)}}$.",
            "MCQ(multiple)",
            None,
            "AB",
        ),
        (
            "(A) is correct.\n(B) is incorrect.\n(C) is correct.\nTherefore, option (D) is incorrect.",
            "MCQ(multiple)",
            None,
            "AC",
        ),
        ("Therefore, the answer is 3.", "Integer", None, 3.0),
        ("the value displayed is $\\boxed{5}$.", "Integer", None, 5.0),
        (
            "So the maximum kinetic energy is $\\boxed{9.009 \\mathrm{MeV}}$.",
            "Integer",
            None,
            None,
        ),  # not an integer
        ("Therefore, the value of $6(\\alpha + \\beta)$ is undefined.", "Integer", None, None),
        ("Final Answer: 6.00 s", "Numeric", None, 6.0),
        ("Therefore, the height is $h=2.88$ m.\n\nFinal Answer: 2.88 m", "Numeric", None, 2.88),
        ("Final answer: $\\mathbf{Y} = 10^{-5}$", "Numeric", None, 1e-5),
        ("Final Answer: $2.08 \\times 10^{3} \\mathrm{~L}$", "Numeric", None, 2080.0),
        (
            "we must have $\\frac{b}{a}=\\boxed{\\frac{\\sqrt{3}}{2}}$.",
            "Numeric",
            None,
            pytest.approx(0.8660254),
        ),
        ("Therefore, the final answer is $\\boxed{n+1}$.", "Numeric", None, None),
        ("The final answer is: $K = 0.36(0.9 - x)^2$", "Numeric", None, None),
        (
            "Therefore, the depression of freezing point is $0.84 \\mathrm{~K}$ (rounded to 2 decimal places).",
            "Numeric",
            None,
            0.84,
        ),
        (
            "Hence, the frequency heard when the two men are $10 \\mathrm{~m}$ apart is 33 Hz.",
            "Numeric",
            None,
            33.0,
        ),
        ("The ratio of anions to cations is 6:1.\nFinal answer: $\\boxed{6:1}$", "Numeric", None, 6.0),
        ("I am not able to determine the final answer with certainty.", "Numeric", None, None),
        ("", "Numeric", None, None),
    ],
)
def test_extract_tricky(text: str, qtype: str, question: str | None, want: object) -> None:
    assert extract(text, qtype, question) == want


@pytest.mark.parametrize(
    ("reply", "qtype", "want"),
    [
        ("B", "MCQ", "B"),
        ("Answer: (C)", "MCQ", "C"),
        ("AC", "MCQ", None),
        ("ACD", "MCQ(multiple)", "ACD"),
        ("None", "MCQ(multiple)", None),
        ("E", "MCQ(multiple)", None),
        ("12", "Integer", 12.0),
        ("1.5", "Integer", None),
        ("0.25", "Numeric", 0.25),
        ("no idea", "Numeric", None),
    ],
)
def test_parse_judge(reply: str, qtype: str, want: object) -> None:
    assert parse_judge(reply, qtype) == want


def test_math_evaluator_is_bounded() -> None:
    from suites.jeebench.mathexpr import evaluate, latex_to_python

    assert evaluate(latex_to_python("\\frac{\\sqrt{3}}{2}")) == pytest.approx(0.8660254)
    assert evaluate("2*sqrt(2)+2*pi-6") == pytest.approx(3.1116124)
    assert evaluate("10**(9**9)") is None  # a runaway exponent from a model's answer is refused
    assert evaluate("(1)/(0)") is None and evaluate("(-18)**((1)/(3))") is None
    assert evaluate("__import__('os')") is None


# --- #19: rules widened for unseen model families (each case hand-made) ----------------------------------

Q_VALUES = r"What is $x$? (A) $2$ (B) $\frac{9}{2}$ (C) $6$ (D) $8$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        (r"Thus $\boxed{\frac{1}{2}}$", "Numeric", None, 0.5),
        (r"So the frequency is $\boxed{0.76 \mathrm{~Hz}}$", "Numeric", None, 0.76),
        ("The answer is 3 if b = 1.\nHence, the value of X is -6.6.", "Numeric", None, -6.6),
        ("We solve it.\nThe frequency of beats heard by the man is 2.86 Hz.", "Numeric", None, 2.86),
        ("Steps.\nx = 6.3 m", "Numeric", None, 6.3),
        (r"Therefore the number of elements is $14180$, which is the final answer.", "Numeric", None, 14180.0),
        (r"The correct option is $[\mathrm{D}]$", "MCQ", None, "D"),
        (r"Therefore the final answer is $[\mathrm{B}, \mathrm{D}]$", "MCQ(multiple)", None, "BD"),
        ("So the answer is 4.5.", "MCQ", Q_VALUES, "B"),  # a value equal to one option's value
        ("So the answer is 5.", "MCQ", Q_VALUES, None),  # equal to no option
        ("This corresponds to option (A).", "MCQ", None, "A"),
        ("The final answer is 380. (A)", "MCQ", None, "A"),
        # answers that are nothing but the answer ("normal" prompt)
        ("A, C, and D are correct.", "MCQ(multiple)", None, "ACD"),
        ("(A), (C) and (D)", "MCQ(multiple)", None, "ACD"),
        ("[B] 198", "MCQ", None, "B"),
        ("C) 12096", "MCQ", None, "C"),
        ("B. Cu metal and conc. $\\mathrm{HNO}_{3}$", "MCQ", None, "B"),
        ("(A) Chemisorption gives one layer.\n(D) Lowering the temperature favours it.", "MCQ(multiple)", None, "AD"),
        ("A and D", "MCQ", None, None),  # two letters are no single-correct answer
        ("3.75", "Numeric", None, 3.75),
        ("N = 8", "Integer", None, 8.0),
        ("1.25e-2", "Numeric", None, 0.0125),
        ("0.056 M", "Numeric", None, 0.056),
        ("2.5", "Integer", None, None),  # not an integer
    ],
)
def test_widened_rules(text: str, qtype: str, question: str | None, want: object) -> None:
    assert extract(text, qtype, question) == want


LONE_PAIRS = "Which have two lone pairs on the central atom? (A) $\\mathrm{BrF}_{5}$ (B) $\\mathrm{ClF}_{3}$ (C) $\\mathrm{XeF}_{4}$ (D) $\\mathrm{SF}_{4}$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        ("Final Answer: [B], [C], [D(i)]", "MCQ(multiple)", None, "BCD"),  # a sub-item of option D is D
        ("So the answer is [A(ii)].", "MCQ", None, "A"),
        ("Final Answer: The compounds are $\\mathrm{ClF}_{3}$ and $\\mathrm{XeF}_{4}$.", "MCQ(multiple)", LONE_PAIRS, "BC"),
        ("Final Answer: the compound is $\\mathrm{XeF}_{4}$.", "MCQ", LONE_PAIRS, "C"),
        ("Final Answer: $\\mathrm{ClF}_{3}$ and $\\mathrm{XeF}_{4}$", "MCQ", LONE_PAIRS, None),  # MCQ: one option
        ("It is $\\mathrm{XeF}_{4}$, I think.", "MCQ", LONE_PAIRS, None),  # no final-answer line: not read
        ("\\[ -(1+\\sqrt{3})\\frac{3\\pi}{4} \\approx -\\boxed{5.44} \\]", "Numeric", None, -5.44),  # sign outside
        ("so $x = 3 - \\boxed{2}$", "Numeric", None, 2.0),  # a subtraction, not a sign
        ("$$\\alpha = \\boxed{\\ln 2}$$", "Numeric", None, pytest.approx(0.6931, abs=1e-4)),
        ("The value is $\\boxed{2 \\ln 2}$.", "Numeric", None, pytest.approx(1.3863, abs=1e-4)),
    ],
)  # fmt: skip
def test_rules_for_gpt4_0613_text(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the dev half of a GPT-4-0613 set (somethingdevs/cs678-jeebench); its held-out half
    is measured, never read (suites/jeebench/README.md: extraction agreement)."""
    assert extract(text, qtype, question) == want


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        # letters stated true, in any case, with the false ones named after them
        ("We check each statement.\n\nB, C and D are TRUE.", "MCQ(multiple)", None, "BCD"),
        ("Steps.\n\nA, B, and D are true, but C is false.", "MCQ(multiple)", None, "ABD"),
        ("Steps.\n\nB and C are correct. A and D are incorrect.", "MCQ(multiple)", None, "BC"),
        ("Steps.\n\nA and C are true.", "MCQ", None, None),  # two letters are no single-correct answer
        ("Steps.\n\nA and B are false.", "MCQ(multiple)", None, None),  # false, not chosen
        # a solution that ends on the one option it chooses, quoted with its label
        ("The ring is brown because of the nitrosyl complex:\n\n(C) $[Fe(NO)(H_2O)_5]^{2+}$", "MCQ", None, "C"),
        ("So the energy is lowest in\n[B] the second orbit", "MCQ", None, "B"),
        ("Thus\nD) the wavelength is halved", "MCQ", None, "D"),
        ("(C) is wrong.\n(D) the wavelength is halved", "MCQ", None, None),  # a walk through the options
        ("So finally:\n(B) is not correct", "MCQ", None, None),  # a verdict against it
        ("Solving, x = 2 (Option B)", "MCQ", None, "B"),
        ("Steps.\n\nB, C and D are correct.\nA is incorrect.", "MCQ(multiple)", None, "BCD"),  # the false after
        ("Steps.\n\nOption (C) is the correct option.", "MCQ", None, "C"),
        ("The time comes to 3.1 s, closest to option (A) 3 s. The exact value is 3.1 s.", "MCQ", None, "A"),
        ("Hence the range that holds the value is (C) $(2,3)$.", "MCQ", None, "C"),
        ("So the molecules with one lone pair are (A) $NH_3$ and (D) $PCl_3$.", "MCQ(multiple)", None, "AD"),
        ("Heat in equals heat out.\nThe final temperature will be 42.5 K.", "Numeric", None, 42.5),
        ("In conclusion, the true statements are \\boxed{\\text{A, C, and D}}.", "MCQ(multiple)", None, "ACD"),
        ("So the answer is $\\boxed{\\text{B and C}}$", "MCQ(multiple)", None, "BC"),
        ("Checking them, the correct options are:\n\n(B) The area is 12.\n\n(D) The line meets the axis at 3.",
         "MCQ(multiple)", None, "BD"),  # list items apart by blank lines
        ("We cannot tell more. Therefore, the final answer is:\n\nEither (B) or (C).", "MCQ(multiple)", None, None),
        ("So the final answer is \\boxed{\\text{(A) or (D)}}.", "MCQ(multiple)", None, None),  # undecided
        ("Checking each one, only (D) is a possible value of $|z|$.", "MCQ", None, "D"),
        # numbers: a thousands separator, a display block closing the last line, "approximately"
        ("12,480.50", "Numeric", None, 12480.5),
        ("So the value is\n$$\n|\\vec{p}|^2 = 71\n$$", "Integer", None, 71.0),
        ("We get 4.2 J per kelvin.\nThe rise in temperature will be approximately 6.25 °C.", "Numeric", None, 6.25),
    ],
)  # fmt: skip
def test_rules_for_final_lines(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the authors' extractor CSVs' second half (hgaurav2k/JEEBench history), read once the
    half had been measured once as held out, so it is a tuned set now (suites/jeebench/README.md)."""
    assert extract(text, qtype, question) == want


PI_OPTIONS = "The sum is\n\n(A) $-\\frac{7 \\pi}{9}$\n\n(B) $-\\frac{2 \\pi}{9}$\n\n(C) 0\n\n(D) $\\frac{5 \\pi}{9}$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        # juxtaposition multiplies: options such as 7π/9 have values, so a value answer finds its option
        ("Therefore, the sum of all distinct solutions is $\\pi + (-\\pi) = \\boxed{0}$.", "MCQ", PI_OPTIONS, "C"),
        ("So the sum is $\\boxed{-\\frac{2\\pi}{9}}$.", "MCQ", PI_OPTIONS, "B"),
        ("The answer is $\\boxed{3\\sqrt{2}}$.", "Numeric", None, pytest.approx(4.2426407)),
        ("Thus $x = \\boxed{2\\pi}$.", "Numeric", None, pytest.approx(6.2831853)),
        # "... is (B) <its text>" as the last line, of either MCQ type; never two labels or a verdict against it
        ("The interval that contains the value of $4\\alpha$ is (B) $(1,2)$.", "MCQ(multiple)", None, "B"),
        ("So the correct choice is (D).", "MCQ", None, "D"),
        ("The interval is (B) $(1,2)$ or (C) $(2,3)$.", "MCQ(multiple)", None, None),
        ("The interval is (B) $(1,2)$, which is not right.", "MCQ", None, None),
    ],
)  # fmt: skip
def test_rules_added_on_dev_halves(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the dev halves of the GPT-4 sets and on the authors' two sets (suites/jeebench/README.md);
    the held-out halves were measured after, never read."""
    assert extract(text, qtype, question) == want


POINT_Q = "For which point(s) $Q$?\n(A) $\\hat{k}-\\frac{1}{2} \\hat{j}$\n(B) $\\hat{k}$\n(C) $\\hat{k}+\\hat{j}$\n(D) $\\hat{j}$"


@pytest.mark.parametrize(
    ("text", "qtype", "question", "want"),
    [
        # an option's content boxed: that option (exactly one option's text equals it, markup dropped)
        ("Thus, the only possible point $Q$ is $\\boxed{\\hat{k}}$.", "MCQ(multiple)", POINT_Q, "B"),
        ("So $Q = \\boxed{\\hat{k} + \\hat{j}}$.", "MCQ", POINT_Q, "C"),
        ("So $Q = \\boxed{2\\hat{k}}$.", "MCQ", POINT_Q, None),  # no option is that
        # the response ends by declaring the problem faulty, nothing answer-like after the claim: None
        ("$x_A = -0.85$\nThis indicates that there is an error in the problem statement or the given "
         "information. Please check the problem statement.", "Numeric", None, None),
        ("Since $W = 0$ the ratio is undefined. There is an error in the problem statement, and the value "
         "cannot be determined.", "Numeric", None, None),
        # ... but an answer given after the claim still counts
        ("There must be an error in the problem statement. However, assuming the data, x = 1.4 / (-0.4) = "
         "-3.50", "Numeric", None, -3.5),
        ("There must be an error in the given options. The closest answer is [B] 198.\nFinal answer: [B] 198",
         "MCQ", None, "B"),
        # a number cut off mid-formula is working, not the answer (Integer/Numeric; MCQ letters still read)
        ("$\\frac{1}{5!}(\\beta - \\alpha) = \\frac{1}{120} \\left[", "Numeric", None, None),
        ("so we have:\n\\[y =", "Numeric", None, None),
        ("The value is $\\frac{1}{2} \\left( 3 \\right) = 1.5$", "Numeric", None, 1.5),
        ("Therefore, the answer is (D).\n(D) $\\frac{1}{2} \\left(", "MCQ", None, "D"),
    ],
)  # fmt: skip
def test_rules_added_on_tuned_sets_for_issue_30(text: str, qtype: str, question: str | None, want: object) -> None:
    """Added on the tuned sets only (the dev halves of the authors' GPT-4 sets, the extractor CSVs, the GPT-3/3.5
    sets): +5 there, no loss on any tuned set."""
    assert extract(text, qtype, question) == want
