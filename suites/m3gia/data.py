"""Load M3GIA: questions from the authors' per-language parquet files, keys and factor labels bundled.

The parquet files (about 100 MB each, with images) are not bundled: they come from `--data-dir`, one
`<language>*.parquet` per language (`english_v1.parquet` on the hub). Answer keys, question types and CHC
factor labels are small and Apache-2.0, so they ship in `data/` (see data/NOTICE).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from suites.base import SuiteError

BUNDLED = Path(__file__).parent / "data"
HUB = "https://huggingface.co/datasets/Songweii/M3GIA"

LANGS: dict[str, str] = {
    "en": "english",
    "zh": "chinese",
    "fr": "french",
    "es": "spanish",
    "pt": "portuguese",
    "ko": "korean",
}
OPTION_COLS = ("A", "B", "C", "D", "E", "F")
TEXT_COLS = ("index", "question", "hint", "QuestionTypes")

# The paper's 5 clusters of the 18 question types (type names as in the answer keys, typo included).
CLUSTERS: dict[str, tuple[str, ...]] = {
    "Common Sense": ("Oral Vocabulary", "General Information", "Logo Problem"),
    "Visual-spatial": ("Visualization", "Picture Recognition", "Real-world Spatial"),
    "Comprehension": ("Readings-text", "Readings-VL", "Comic Problem"),
    "Mathematics": ("Math Facts", "Algebra", "Geometry", "Applied Problem"),
    "Reasoning": (
        "Number Seres",
        "Concept Formation",
        "Raven's Matrices",
        "Real-world Reasoning",
        "Syllogism Problem",
    ),
}
TYPES: tuple[str, ...] = tuple(t for ts in CLUSTERS.values() for t in ts)
CLUSTER_OF: dict[str, str] = {t: c for c, ts in CLUSTERS.items() for t in ts}
FACTORS = ("Gf", "Gc", "Gv", "Grw", "Gq", "I", "RG", "RQ")


@dataclass(frozen=True)
class Question:
    lang: str
    qid: str
    qtype: str
    question: str
    hint: str
    options: tuple[str, ...]
    answer: str
    image: bytes | None = None
    absent: str | None = None
    """The first absent option cell as the authors' code prints it ("None" for a null, "nan" for NaN): their
    `get_options` keeps it as one more option text (extract.authors_rules). None: all six options present."""

    @property
    def item(self) -> str:
        return f"{self.lang}/{self.qid}"

    @property
    def letters(self) -> tuple[str, ...]:
        return OPTION_COLS[: len(self.options)]


# --- bundled keys and labels


@cache
def answer_key(lang: str) -> dict[str, tuple[str, str]]:
    """question_id -> (question_type, ground_truth letter)."""
    path = BUNDLED / f"answer_dict_{LANGS[lang]}.jsonl"  # a JSON array despite the extension
    return {
        str(d["question_id"]): (d["question_type"], d["ground_truth"]) for d in json.loads(path.read_text())
    }


@cache
def factor_labels(lang: str) -> dict[str, frozenset[str]]:
    """factor -> the question ids that involve it."""
    d = json.loads((BUNDLED / "ability_label_dict.json").read_text())[LANGS[lang]]
    return {f: frozenset(map(str, d[f])) for f in FACTORS}


# --- options


def parse_languages(value: str | list[str] | None) -> list[str]:
    """`--languages en,zh` (codes or full names) -> codes in the canonical order."""
    if value is None or value == "" or value == "all":
        return list(LANGS)
    names = value if isinstance(value, list) else value.split(",")
    by_name = {v: k for k, v in LANGS.items()}
    out = set()
    for n in (x.strip().lower() for x in names if x.strip()):
        code = n if n in LANGS else by_name.get(n)
        if code is None:
            raise SuiteError(f"--languages: unknown language {n!r}; use codes from {', '.join(LANGS)}")
        out.add(code)
    return [c for c in LANGS if c in out]


def parquet_path(data_dir: str | Path | None, lang: str) -> Path:
    """The one `<language>*.parquet` in `data_dir`, or a SuiteError saying what is missing and where to get it."""
    name = LANGS[lang]
    where = f"download {name}_v1.parquet (and the other languages') from the M3GIA dataset on the hub, {HUB}"
    if not data_dir:
        raise SuiteError(
            f"m3gia needs the question parquet files: pass --data-dir DIR holding {name}*.parquet "
            f"(one per language); {where}"
        )
    d = Path(data_dir)
    if not d.is_dir():
        raise SuiteError(f"--data-dir {d}: no such directory (it should hold {name}*.parquet); {where}")
    found = sorted(d.glob(f"{name}*.parquet"))
    if not found:
        raise SuiteError(
            f"m3gia language {lang!r} ({name}): no file matching {name}*.parquet in {d.resolve()}; "
            f"{where}, or drop it with --languages"
        )
    if len(found) > 1:
        raise SuiteError(
            f"m3gia language {lang!r}: several files match {name}*.parquet in {d.resolve()} "
            f"({', '.join(p.name for p in found)}); keep one"
        )
    return found[0]


# --- parquet rows -> Questions


def _is_none(v: Any) -> bool:
    """An absent cell: null, NaN, or the strings 'nan', 'none' (the authors' is_none), and also '' (theirs keeps an
    empty string: a hint "" would prefix the question with a newline there; the hub files are not bundled, so
    whether any cell is "" is unchecked)."""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "none")


def _image_bytes(v: Any) -> bytes | None:
    if isinstance(v, dict):
        v = v.get("bytes")
    return bytes(v) if v else None


def _question(
    lang: str,
    row: dict[str, Any],
    path: Path,
    rownum: int,
    key: dict[str, tuple[str, str]],
    with_images: bool,
) -> Question | None:
    qid = str(row["index"]).strip()
    if qid.endswith(".0"):  # an integer index stored as float
        qid = qid[:-2]
    if qid not in key:
        raise SuiteError(
            f"{path}: row {rownum}: index {qid!r} is not in the {LANGS[lang]} answer key "
            f"(ids 1..{len(key)}); is this the M3GIA {LANGS[lang]} file?"
        )
    qtype, answer = key[qid]
    ptype = str(row.get("QuestionTypes") or "").strip()
    if ptype in CLUSTER_OF and ptype != qtype:
        raise SuiteError(
            f"{path}: row {rownum} (index {qid}): QuestionTypes {ptype!r} but the answer key says "
            f"{qtype!r}; is this the M3GIA {LANGS[lang]} file?"
        )
    options: list[str] = []
    absent = None
    for col in OPTION_COLS:  # options stop at the first empty one
        v = row.get(col)
        if _is_none(v):
            absent = "None" if v is None else str(v)  # pandas' str() of the cell, as the authors read it
            break
        options.append(str(v))
    if not options:
        return None  # the authors skip questions without options
    if answer not in OPTION_COLS[: len(options)]:
        raise SuiteError(
            f"{path}: row {rownum} (index {qid}): the key {answer!r} is not among its {len(options)} options"
        )
    question, hint = row.get("question"), row.get("hint")
    return Question(
        lang=lang,
        qid=qid,
        qtype=qtype,
        question="" if _is_none(question) else str(question).strip(),
        hint="" if _is_none(hint) else str(hint).strip(),
        options=tuple(options),
        answer=answer,
        image=_image_bytes(row.get("image")) if with_images else None,
        absent=absent,
    )


def load(
    data_dir: str | Path | None, lang: str, limit: int | None = None, images: bool = True
) -> Iterator[Question]:
    """A language's questions in file order, streamed by record batch (images are most of the 100 MB)."""
    path = parquet_path(data_dir, lang)
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise SuiteError(f"{path}: not a readable parquet file ({e}); re-download it from {HUB}") from None
    names = set(pf.schema_arrow.names)
    missing = [c for c in ("index", "question", "A") if c not in names]
    if missing:
        raise SuiteError(
            f"{path}: missing column(s) {', '.join(missing)}; expected the M3GIA schema "
            f"(index, question, hint, A..F, image, QuestionTypes)"
        )
    cols = [c for c in (*TEXT_COLS, *OPTION_COLS) if c in names]
    if images and "image" in names:
        cols.append("image")
    key = answer_key(lang)
    rownum, n = 0, 0
    seen: dict[str, int] = {}
    for batch in pf.iter_batches(batch_size=64, columns=cols):
        for row in batch.to_pylist():
            rownum += 1
            if limit is not None and n >= limit:
                return
            q = _question(lang, row, path, rownum, key, images)
            if q is not None and q.qid in seen:
                raise SuiteError(f"{path}: row {rownum}: duplicate index {q.qid} (also row {seen[q.qid]})")
            if q is not None:
                seen[q.qid] = rownum
                n += 1
                yield q
