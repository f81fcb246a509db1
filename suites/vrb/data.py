"""Load VRB data in its published format from `--data-dir`; every problem is a SuiteError naming the file.

Layout (Huti et al., 2026; the 701 real items are private, users hold them in this format):
- `options.csv`: `option_id,values` (`alpha_upper` "A,B,C,D", `alpha_lower`, `numeric` "1,2,3,4");
- `<dataset>-questions-gold.csv`: `id,question,option_id,solution`;
- `<dataset>-images/<id>.png` (`.jpg`/`.jpeg` also accepted, as in the reference DATA_FORMAT.md);
- optional `<dataset>-questions-categories-gold.csv`: `id, solution, category, skills, error_type_value,
  error_severity_value` (headers and cells may carry spaces; skills separated by `;` or `,`).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from suites.base import RunSpec, SuiteError

ENV_DATA_DIR = "EVALSWEEP_VRB_DATA"
DEFAULT_DATA_DIR = "./data/vrb"
QUESTIONS_SUFFIX = "-questions-gold.csv"
CATEGORIES_SUFFIX = "-questions-categories-gold.csv"
IMAGE_EXTS = (".png", ".jpg", ".jpeg")

CATEGORIES = (
    "Reasoning by Analogy",
    "Odd One Out",
    "Pattern Completion (Linear)",
    "Pattern Completion (2D)",
    "Match (Process)",
    "Match (Figure)",
)
SKILLS = (
    "Shape and Form",
    "Counting",
    "Shading and Line Type",
    "Rotation",
    "Reflection",
    "Scaling",
    "Folding",
    "Reconfiguring Shapes",
    "Layering",
    "Other",
)
SEVERITIES = ("no_error", "minor", "medium", "fatal")
"""Image-quality annotation levels; an empty cell means no error, `moderate` is read as `medium`."""
_SEVERITY_ALIASES = {
    "": "no_error",
    "none": "no_error",
    "nan": "no_error",
    "no error": "no_error",
    "no_error": "no_error",
    "minor": "minor",
    "medium": "medium",
    "moderate": "medium",
    "fatal": "fatal",
}


@dataclass(frozen=True)
class Item:
    dataset: str
    id: str
    question: str
    option_id: str
    labels: tuple[str, ...]
    solution: str
    image: Path
    category: str | None = None
    """None when the dataset has no categories file or the item is not in it."""
    skills: tuple[str, ...] = ()
    severity: str | None = None
    """One of SEVERITIES; None when not annotated."""
    error_type: str | None = None

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.id}"


def data_dir(spec: RunSpec) -> Path:
    return Path(spec.opt("data_dir") or os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR).expanduser()


def dataset_names(spec: RunSpec, root: Path) -> list[str]:
    """`--datasets a,b` in the given order, else every `*-questions-gold.csv` in `root`, sorted."""
    if not root.is_dir():
        raise SuiteError(
            f"VRB data directory {root} does not exist: pass --data-dir DIR or set {ENV_DATA_DIR} "
            f"(it must hold options.csv and <dataset>{QUESTIONS_SUFFIX} files)"
        )
    raw = spec.opt("datasets")
    if raw:
        names = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        names = [n.strip() for n in names if n.strip()]
        for n in names:
            if not (root / f"{n}{QUESTIONS_SUFFIX}").is_file():
                found = ", ".join(_discover(root)) or "none"
                raise SuiteError(
                    f"--datasets {n}: {root / (n + QUESTIONS_SUFFIX)} not found (found: {found})"
                )
        if len(set(names)) != len(names):
            raise SuiteError(f"--datasets {raw}: a dataset is listed twice")
        return names
    names = _discover(root)
    if not names:
        raise SuiteError(f"{root}: no <dataset>{QUESTIONS_SUFFIX} file found (is --data-dir right?)")
    return names


def _discover(root: Path) -> list[str]:
    return sorted(p.name[: -len(QUESTIONS_SUFFIX)] for p in root.glob(f"*{QUESTIONS_SUFFIX}"))


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) with stripped header names and cells; blank rows skipped; the header must
    have the required columns."""
    try:
        f = path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such file") from None
    with f:
        reader = csv.DictReader(f)
        try:
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in required if c not in header]
            if missing:
                raise SuiteError(
                    f"{path}:1: header lacks column(s) {', '.join(missing)} (expected "
                    f"{','.join(required)}; found {','.join(header) or 'nothing'})"
                )
            reader.fieldnames = header
            for row in reader:
                if None in row:
                    raise SuiteError(
                        f"{path}:{reader.line_num}: more cells than header columns (quote cells with commas)"
                    )
                cells = {k: (v or "").strip() for k, v in row.items()}
                if any(cells.values()):
                    yield reader.line_num, cells
        except csv.Error as e:
            raise SuiteError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None
        except UnicodeDecodeError as e:
            raise SuiteError(f"{path}: not UTF-8 text ({e}); save it as UTF-8") from None


def load_options(root: Path) -> dict[str, tuple[str, ...]]:
    path = root / "options.csv"
    out: dict[str, tuple[str, ...]] = {}
    for line, r in _rows(path, ("option_id", "values")):
        labels = tuple(v.strip() for v in r["values"].split(","))
        if not r["option_id"] or not all(labels) or len(set(labels)) != len(labels) or len(labels) < 2:
            raise SuiteError(
                f"{path}:{line}: option_id {r['option_id']!r} needs a quoted, comma-separated list of at least "
                f'two distinct labels in `values` (e.g. "A,B,C,D"), got {r["values"]!r}'
            )
        if r["option_id"] in out:
            raise SuiteError(f"{path}:{line}: option_id {r['option_id']!r} defined twice")
        out[r["option_id"]] = labels
    if not out:
        raise SuiteError(f"{path}: no option sets defined")
    return out


def _find_image(folder: Path, item_id: str) -> Path | None:
    for ext in IMAGE_EXTS:
        p = folder / f"{item_id}{ext}"
        if p.is_file():
            return p
    return None


def _canonical(value: str, known: tuple[str, ...]) -> str:
    """Known names case- and space-insensitively mapped to their canonical spelling; others kept.

    "&" reads as "and", as the reference's indicator names do (`skill.lower().replace(' ', '_')
    .replace('&', 'and')`, skill_difficulty_analysis.py): "Shape & Form" is Shape and Form, not an
    unknown skill that would fall out of the regressions."""
    squash = " ".join(value.split())
    spoken = " ".join(squash.replace("&", " and ").split()).lower()
    for k in known:
        if k.lower() in (squash.lower(), spoken):
            return k
    return squash


def split_skills(cell: str) -> tuple[str, ...]:
    out: list[str] = []
    for s in re.split(r"[;,]", cell):
        s = _canonical(s.strip(), SKILLS)
        if s and s not in out:
            out.append(s)
    return tuple(out)


def _annotations(root: Path, dataset: str, gold: dict[str, str]) -> dict[str, dict]:
    """The categories file's rows by id (empty when the optional file is absent)."""
    path = root / f"{dataset}{CATEGORIES_SUFFIX}"
    if not path.is_file():
        return {}
    out: dict[str, dict] = {}
    for line, r in _rows(path, ("id", "category")):
        iid = r["id"]
        if iid in out:
            raise SuiteError(f"{path}:{line}: id {iid!r} appears twice")
        if iid not in gold:
            continue  # annotations for items outside the questions file are not used
        if not r["category"]:
            raise SuiteError(f"{path}:{line}: field `category` is empty for id {iid!r}")
        sev_raw = r.get("error_severity_value", "")
        sev = _SEVERITY_ALIASES.get(sev_raw.lower())
        if sev is None:
            raise SuiteError(
                f"{path}:{line}: field `error_severity_value` is {sev_raw!r}; expected empty, "
                f"minor, medium (or moderate) or fatal"
            )
        sol = r.get("solution", "")
        if sol and sol != gold[iid]:
            raise SuiteError(
                f"{path}:{line}: solution {sol!r} for id {iid!r} disagrees with {dataset}{QUESTIONS_SUFFIX} "
                f"({gold[iid]!r}); fix whichever file is wrong"
            )
        out[iid] = {
            "category": _canonical(r["category"], CATEGORIES),
            "skills": split_skills(r.get("skills", "")),
            "severity": sev,
            "error_type": r.get("error_type_value") or None,
        }
    return out


def load_items(root: Path, datasets: list[str]) -> list[Item]:
    """Every item of `datasets`, in file order, validated (labels, gold, image present, annotations)."""
    options = load_options(root)
    items: list[Item] = []
    for ds in datasets:
        if not ds or "/" in ds:
            raise SuiteError(f"dataset name {ds!r} must be non-empty and contain no '/'")
        path = root / f"{ds}{QUESTIONS_SUFFIX}"
        img_dir = root / f"{ds}-images"
        if not img_dir.is_dir():
            raise SuiteError(
                f"{img_dir}: image folder for dataset {ds!r} not found (expected <id>.png files)"
            )
        rows: list[tuple[int, dict[str, str]]] = list(
            _rows(path, ("id", "question", "option_id", "solution"))
        )
        if not rows:
            raise SuiteError(f"{path}: no questions")
        gold: dict[str, str] = {}
        first: dict[str, int] = {}
        for line, r in rows:
            iid, oid = r["id"], r["option_id"]
            where = f"{path}:{line}"
            if not iid:
                raise SuiteError(f"{where}: field `id` is empty")
            if iid in gold:
                raise SuiteError(f"{where}: id {iid!r} appears twice (also line {first[iid]})")
            first[iid] = line
            if not r["question"]:
                raise SuiteError(f"{where}: field `question` is empty for id {iid!r}")
            if oid not in options:
                raise SuiteError(
                    f"{where}: option_id {oid!r} is not in {root / 'options.csv'} (known: {', '.join(options)})"
                )
            if r["solution"] not in options[oid]:
                raise SuiteError(
                    f"{where}: solution {r['solution']!r} for id {iid!r} is not one of "
                    f"{','.join(options[oid])} (option_id {oid}); scoring needs the gold label"
                )
            gold[iid] = r["solution"]
        notes = _annotations(root, ds, gold)
        for line, r in rows:
            image = _find_image(img_dir, r["id"])
            if image is None:
                raise SuiteError(
                    f"{path}:{line}: image for id {r['id']!r} not found: {img_dir / (r['id'] + '.png')}"
                )
            a = notes.get(r["id"], {})
            items.append(
                Item(
                    dataset=ds,
                    id=r["id"],
                    question=r["question"],
                    option_id=r["option_id"],
                    labels=options[r["option_id"]],
                    solution=r["solution"],
                    image=image,
                    category=a.get("category"),
                    skills=a.get("skills", ()),
                    severity=a.get("severity"),
                    error_type=a.get("error_type"),
                )
            )
    return items


_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def check_images(items: list[Item]) -> None:
    """Each image starts like a PNG/JPEG/GIF/WebP file (a header read, not a decode): a broken file
    would otherwise fail on every model of a sweep."""
    for it in items:
        with it.image.open("rb") as f:
            head = f.read(12)
        if not (head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
            raise SuiteError(f"{it.image}: not a PNG/JPEG/GIF/WebP image (item {it.key}); replace the file")


def load(spec: RunSpec) -> list[Item]:
    root = data_dir(spec)
    return load_items(root, dataset_names(spec, root))
