"""Load: the bundled MARVEL label file (770 puzzles) and the puzzle images from a data directory.

The labels (2 MB, Apache-2.0, see data/NOTICE) ship with the package; the images (24 MB) do not, so
they are read from `--data-dir`, `$EVALSWEEP_MARVEL_DATA` or `./data/marvel`, which must hold
`images/<id>.png`. Everything is validated here, once, so later stages can trust the fields.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import orjson

from suites.base import RunSpec, SuiteError

LABEL_FILE = Path(__file__).parent / "data" / "marvel_label.json"
DATA_ENV = "EVALSWEEP_MARVEL_DATA"
DEFAULT_DATA_DIR = Path("data") / "marvel"
IMAGES_URL = "https://github.com/1171-jpg/MARVEL_AVR (folder Marvel/<id>.png)"

PATTERNS = (
    "Temporal Movement",
    "Spatial Relationship",
    "Quantities",
    "Mathematical",
    "2D-Geometry",
    "3D-Geometry",
)
CONFIGURATIONS = ("Sequence", "Matrix", "Two-row", "Group", "3D")
COARSE_PARTS = ("context", "choices", "whole")
"""Order of `c_perception_question_tuple` / `c_perception_answer_tuple`."""

REFERENCE = {
    "random": {"avr": 0.25, "fine": 0.5, "pattern": 1 / 6},
    "human": {"avr": 0.6886, "fine": 0.9867},
}
"""Reference rows printed beside the models (MARVEL paper): random chance and the human average."""

KINDS = ("avr", "fine", "coarse-context", "coarse-choices", "coarse-whole")
"""Item-id suffixes of the five questions per puzzle: item id = f"{id}/{kind}"."""


@dataclass(frozen=True)
class Puzzle:
    id: int
    pattern: str
    configuration: str
    avr_question: str
    explanation: str
    answer: int
    fine_question: str
    fine_answer: str
    fine_distractor: str
    coarse_questions: tuple[str, str, str]
    coarse_answers: tuple[int, int, int]

    def question(self, kind: str) -> str:
        """The question string exactly as the dataset gives it."""
        if kind == "avr":
            return self.avr_question
        if kind == "fine":
            return self.fine_question
        return self.coarse_questions[COARSE_PARTS.index(kind.removeprefix("coarse-"))]

    def gold(self, kind: str) -> int | str:
        if kind == "avr":
            return self.answer
        if kind == "fine":
            return self.fine_answer
        if kind == "pattern":
            return self.pattern
        return self.coarse_answers[COARSE_PARTS.index(kind.removeprefix("coarse-"))]


def _field(d: dict, name: str, typ: type, where: str) -> object:
    v = d.get(name)
    if not isinstance(v, typ) or isinstance(v, bool) or (isinstance(v, str) and not v.strip()):
        raise SuiteError(f"{where}: field {name!r} must be a non-empty {typ.__name__}, got {v!r}")
    return v


def parse(d: object, where: str) -> Puzzle:
    if not isinstance(d, dict):
        raise SuiteError(f"{where}: each puzzle must be a JSON object")
    cq = d.get("c_perception_question_tuple")
    ca = d.get("c_perception_answer_tuple")
    if not (isinstance(cq, list) and len(cq) == 3 and all(isinstance(q, str) and q for q in cq)):
        raise SuiteError(f"{where}: 'c_perception_question_tuple' must be 3 question strings")
    if not (isinstance(ca, list) and len(ca) == 3 and all(type(a) is int and a > 0 for a in ca)):
        raise SuiteError(f"{where}: 'c_perception_answer_tuple' must be 3 positive integers")
    p = Puzzle(
        id=_field(d, "id", int, where),  # type: ignore[arg-type]
        pattern=_field(d, "pattern", str, where),  # type: ignore[arg-type]
        configuration=_field(d, "task_configuration", str, where),  # type: ignore[arg-type]
        avr_question=_field(d, "avr_question", str, where),  # type: ignore[arg-type]
        explanation=_field(d, "explanation", str, where).strip(),  # type: ignore[union-attr]
        answer=_field(d, "answer", int, where),  # type: ignore[arg-type]
        fine_question=_field(d, "f_perception_question", str, where),  # type: ignore[arg-type]
        fine_answer=str(_field(d, "f_perception_answer", str, where)).strip(),
        fine_distractor=str(_field(d, "f_perception_distractor", str, where)).strip(),
        coarse_questions=(cq[0], cq[1], cq[2]),
        coarse_answers=(ca[0], ca[1], ca[2]),
    )
    if p.pattern not in PATTERNS:
        raise SuiteError(f"{where}: unknown pattern {p.pattern!r}; expected one of {', '.join(PATTERNS)}")
    if p.configuration not in CONFIGURATIONS:
        raise SuiteError(f"{where}: unknown task_configuration {p.configuration!r}")
    if p.answer not in (1, 2, 3, 4):
        raise SuiteError(f"{where}: 'answer' must be 1, 2, 3 or 4, got {p.answer}")
    if p.fine_answer.lower() == p.fine_distractor.lower():
        raise SuiteError(f"{where}: f_perception_answer and f_perception_distractor are the same")
    return p


@lru_cache(maxsize=4)
def load(path: Path = LABEL_FILE) -> tuple[Puzzle, ...]:
    """All puzzles in file order; errors name the file and the puzzle's index and id."""
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise SuiteError(f"{path}: MARVEL label file not found (reinstall evalsweep)") from None
    except orjson.JSONDecodeError as e:
        raise SuiteError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(raw, list):
        raise SuiteError(f"{path}: expected a JSON list of puzzles")
    puzzles = []
    for i, d in enumerate(raw):
        pid = d.get("id") if isinstance(d, dict) else None
        puzzles.append(parse(d, f"{path}: puzzle #{i} (id {pid})"))
    seen: dict[int, int] = {}
    for i, p in enumerate(puzzles):
        if p.id in seen:
            raise SuiteError(f"{path}: puzzle #{i}: duplicate id {p.id} (also puzzle #{seen[p.id]})")
        seen[p.id] = i
    return tuple(puzzles)


@lru_cache(maxsize=1)
def by_id() -> dict[int, Puzzle]:
    return {p.id: p for p in load()}


def data_dir(spec: RunSpec) -> Path:
    """--data-dir, else $EVALSWEEP_MARVEL_DATA, else ./data/marvel; absolute, so requests are portable."""
    d = spec.opt("data_dir") or os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR
    return Path(d).expanduser().resolve()


def image_path(root: Path, pid: int) -> Path:
    return root / "images" / f"{pid}.png"


def check_images(root: Path, ids: Iterable[int]) -> None:
    """Fail before anything is sent if the data directory or any needed image is missing."""
    how = (
        f"Get the MARVEL images from {IMAGES_URL} into DIR/images/<id>.png and pass --data-dir DIR "
        f"(or set {DATA_ENV}=DIR)."
    )
    if not (root / "images").is_dir():
        raise SuiteError(f"MARVEL data directory {root} has no images/ folder ({root / 'images'}). {how}")
    missing = [image_path(root, i) for i in ids if not image_path(root, i).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise SuiteError(f"MARVEL image {missing[0]} not found{more}. {how}")
