"""Index-free puzzle images for the coarse perception questions, built from the authors' `Panel_data/`.

The paper shows the coarse questions ("how many grids are there in the choices part?") a puzzle image
with the choice indices removed (§4), so the numbers 1-4 under the choices cannot be counted instead of
panels. Those images are not released; the authors' repository (github.com/1171-jpg/MARVEL_AVR) holds
every panel instead: `Panel_data/question_<id>_<k>.png` (the context panels, the blank one included)
and `answer_<id>_<k>.png` (the choices), as many as the puzzle's coarse answers say. This module lays
them out as the released puzzle images do (a "Context" grid above a "Choices" row, 180 px panels in
black frames) without the indices: context in the R x C grid its AVR question names ("3 by 3 matrix"),
else one row. The layout is ours; the panels are the authors'.

    python -m suites.marvel.panels DIR     # DIR/Panel_data/ -> DIR/coarse/<id>.png (all 770)

The same panels, sent one at a time, are Table 11's one-by-one prompting (prompts.one_by_one_message).

`evalsweep run marvel` builds the missing ones itself when DIR/Panel_data/ is there.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from suites.base import SuiteError

CELL, LINE, MARGIN, LABEL_H = 180, 4, 24, 48
_GRID = re.compile(r"(\d+) by (\d+) matrix")


def panel_paths(root: Path, pid: int, part: str) -> list[Path]:
    """`part` question|answer: the puzzle's panels in order (k = 0, 1, ...)."""
    found = sorted(
        (root / "Panel_data").glob(f"{part}_{pid}_*.png"), key=lambda p: int(p.stem.rsplit("_", 1)[1])
    )
    return found


def coarse_path(root: Path, pid: int) -> Path:
    return root / "coarse" / f"{pid}.png"


def _grid(question: str, n: int) -> tuple[int, int]:
    m = _GRID.search(question)
    if m and int(m[1]) * int(m[2]) == n:
        return int(m[1]), int(m[2])
    return 1, n


def _frame(canvas: Image.Image, panels: list[Path], rows: int, cols: int, x0: int, y0: int) -> None:
    draw = ImageDraw.Draw(canvas)
    for k, path in enumerate(panels):
        r, c = divmod(k, cols)
        x, y = x0 + c * CELL, y0 + r * CELL
        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((CELL - 2 * LINE, CELL - 2 * LINE))
            canvas.paste(im, (x + (CELL - im.width) // 2, y + (CELL - im.height) // 2))
        draw.rectangle((x, y, x + CELL, y + CELL), outline="black", width=LINE)


def compose(root: Path, pid: int, question: str, counts: tuple[int, int]) -> Image.Image:
    """The puzzle without choice indices; `counts` (context, choices) from its coarse answers."""
    ctx, ans = panel_paths(root, pid, "question"), panel_paths(root, pid, "answer")
    if (len(ctx), len(ans)) != tuple(counts):
        raise SuiteError(
            f"MARVEL puzzle {pid}: {root / 'Panel_data'} holds {len(ctx)} context and {len(ans)} choice "
            f"panels; its coarse answers say {counts[0]} and {counts[1]}"
        )
    rows, cols = _grid(question, len(ctx))
    width = 2 * MARGIN + max(cols, len(ans)) * CELL + 120
    height = 2 * LABEL_H + (rows + 1) * CELL + 2 * MARGIN
    canvas = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=32)
    draw.text((MARGIN // 2, MARGIN // 2), "Context", fill="black", font=font)
    _frame(canvas, ctx, rows, cols, (width - cols * CELL) // 2, LABEL_H + MARGIN // 2)
    y = LABEL_H + MARGIN // 2 + rows * CELL + MARGIN // 2
    draw.text((MARGIN // 2, y), "Choices", fill="black", font=font)
    _frame(canvas, ans, 1, len(ans), (width - len(ans) * CELL) // 2, y + LABEL_H)
    return canvas


def check_panels(root: Path, puzzles: Iterable) -> None:
    """One-by-one prompting (Table 11) needs every selected puzzle's panels, as many as its coarse answers
    say; a clear error naming what to get otherwise."""
    if not (root / "Panel_data").is_dir():
        raise SuiteError(
            f"--panels one-by-one sends the authors' panels: {root / 'Panel_data'} is absent. Copy Panel_data/ "
            "from https://github.com/1171-jpg/MARVEL_AVR into the data directory."
        )
    for p in puzzles:
        found = (len(panel_paths(root, p.id, "question")), len(panel_paths(root, p.id, "answer")))
        if found != tuple(p.coarse_answers[:2]):
            raise SuiteError(
                f"MARVEL puzzle {p.id}: {root / 'Panel_data'} holds {found[0]} context and {found[1]} choice panels; "
                f"its coarse answers say {p.coarse_answers[0]} and {p.coarse_answers[1]}"
            )


def ensure(root: Path, puzzles: Iterable) -> None:
    """Every selected puzzle's index-free image exists (built from Panel_data/ when missing), or a clear
    error naming what to get."""
    todo = [p for p in puzzles if not coarse_path(root, p.id).is_file()]
    if not todo:
        return
    if not (root / "Panel_data").is_dir():
        raise SuiteError(
            f"MARVEL coarse questions need the index-free puzzle images: {coarse_path(root, todo[0].id)} is "
            f"missing and {root / 'Panel_data'} is absent. Copy Panel_data/ from "
            "https://github.com/1171-jpg/MARVEL_AVR into the data directory (the images are built from it), "
            "or pass --coarse-images numbered (a recorded deviation)."
        )
    try:
        (root / "coarse").mkdir(exist_ok=True)
        for p in todo:
            img = compose(root, p.id, p.avr_question, tuple(p.coarse_answers[:2]))
            tmp = coarse_path(root, p.id).with_suffix(".tmp")
            img.save(tmp, format="PNG")
            tmp.replace(coarse_path(root, p.id))
    except OSError as e:
        raise SuiteError(
            f"cannot write the index-free puzzle images to {root / 'coarse'} ({e.strerror or e}): build them in "
            "a copy of the data directory you can write (python -m suites.marvel.panels DIR) and pass that "
            "--data-dir"
        ) from None


def main(argv: list[str] | None = None) -> None:
    from suites.marvel.data import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="MARVEL data directory holding Panel_data/")
    a = ap.parse_args(argv)
    ensure(a.dir.resolve(), load())
    print(f"{a.dir / 'coarse'}: {len(load())} index-free puzzle images")


if __name__ == "__main__":
    main()
