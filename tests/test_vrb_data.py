"""VRB loading and validation (published CSV format), the exact prompt, requests and sim hints."""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import pytest

from core.types import ImagePart, TextPart
from suites.base import RunSpec, SuiteError
from suites.vrb import SUITE, data, prompt, sim
from suites.vrb.extract import extract_step
from suites.vrb.image import reference_png, reference_size
from suites.vrb.synthetic import write_dataset

EXPECTED_PROMPT = (  # the reference's Jinja TEMPLATE_BOTH (load.py) rendered: its leading newline kept
    "\nPlease answer the following question about the image.\n"
    "How many circles are in this image?\n"
    "\n"
    "The image contains four possible answers labelled A, B, C, D.\n"
    "Please think step by step and consider each option carefully.\n"
    "Give your final answer option (e.g. one of A, B, C, D) as a single character on a new line at the end "
    "of your response."
)


@pytest.fixture(scope="module")
def vrb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("vrb"))


def spec(root: Path, **opts: object) -> RunSpec:
    return RunSpec(suite="vrb", options={"data_dir": str(root), **opts})


def copy_of(root: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(root, dst)
    return dst


def write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_shared_example_and_exact_prompt(shared_data: Path) -> None:
    items = data.load(spec(shared_data / "vrb"))
    assert [it.key for it in items] == ["test/Q001"]
    it = items[0]
    assert (it.solution, it.labels, it.image.name) == ("B", ("A", "B", "C", "D"), "Q001.png")
    assert it.category is None and it.severity is None  # no categories file in the example
    [msg] = prompt.messages(it)
    assert msg.role == "user"
    image, text = msg.content
    assert isinstance(image, ImagePart) and image.detail == "high" and image.path is None
    assert image.data == reference_png(it.image) and image.media_type() == "image/png"
    assert isinstance(text, TextPart) and text.text == EXPECTED_PROMPT


@pytest.mark.parametrize(
    ("size", "sent"),
    [
        ((500, 300), (500, 300)),  # both limits met: unchanged
        ((1000, 1000), (768, 768)),  # shortest side to 768
        ((1500, 800), (1440, 768)),
        ((4000, 3000), (1024, 768)),  # longest to 2048 (2048 x 1536), then shortest to 768
        ((3000, 1000), (2048, 682)),  # longest to 2048 leaves 682.7 < 768: truncated, not rounded
        ((800, 5000), (327, 2048)),
    ],
)
def test_images_resized_as_the_reference(tmp_path: Path, size: tuple[int, int], sent: tuple[int, int]) -> None:
    """fdllm LLMImage._format_image (detail "high"): longest side <= 2048, then shortest <= 768, bilinear,
    re-encoded as an RGB PNG whatever the file was."""
    from PIL import Image

    assert reference_size(*size) == sent
    src = Image.linear_gradient("L").resize(size)
    path = tmp_path / "q.jpg"
    src.save(path, format="jpeg")
    png = reference_png(path)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as orig, Image.open(__import__("io").BytesIO(png)) as got:
        assert got.size == sent and got.mode == "RGB"
        assert got.tobytes() == orig.resize(sent, Image.BILINEAR).convert("RGB").tobytes()
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.raises(SuiteError, match="bad.png: cannot read the image"):
        reference_png(tmp_path / "bad.png")


def test_check_decodes_every_image(vrb_dir: Path, tmp_path: Path) -> None:
    """A file with a PNG header but no image passes the header sniff; `check` decodes it before any call."""
    root = copy_of(vrb_dir, tmp_path / "d")
    SUITE.check(spec(root))
    first = sorted((root / "zambia-images").iterdir())[0]
    first.write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.raises(SuiteError, match="cannot read the image"):
        SUITE.check(spec(root))


@pytest.mark.parametrize(
    ("labels", "first", "second"),
    [
        (("a", "b", "c", "d"), "labelled a, b, c, d.\n", "(e.g. one of a, b, c, d) as"),
        (("1", "2", "3", "4"), "labelled 1, 2, 3, 4.\n", "(e.g. one of 1, 2, 3, 4) as"),
    ],
)
def test_prompt_labels_follow_the_option_set(labels: tuple[str, ...], first: str, second: str) -> None:
    text = prompt.prompt_text("Which shape comes next?", labels)
    assert first in text and second in text
    assert text == EXPECTED_PROMPT.replace(
        "How many circles are in this image?", "Which shape comes next?"
    ).replace("A, B, C, D", ", ".join(labels))


def test_load_synthetic(vrb_dir: Path) -> None:
    items = data.load(spec(vrb_dir))
    assert len(items) == 40
    assert [it.dataset for it in items] == ["india"] * 16 + ["zambia"] * 24  # discovered, sorted
    assert items[0].key == "india/Q001" and items[0].image == vrb_dir / "india-images" / "Q001.png"
    assert {it.option_id for it in items} == {"alpha_upper", "alpha_lower", "numeric"}
    assert all(it.solution in it.labels for it in items)
    assert {it.category for it in items} <= set(data.CATEGORIES)
    assert {s for it in items for s in it.skills} <= set(data.SKILLS)
    assert Counter(it.severity for it in items).keys() == {"no_error", "minor", "medium", "fatal"}


def test_datasets_option_and_order(vrb_dir: Path) -> None:
    assert {it.dataset for it in data.load(spec(vrb_dir, datasets="zambia"))} == {"zambia"}
    items = data.load(spec(vrb_dir, datasets="zambia, india"))
    assert items[0].dataset == "zambia" and items[-1].dataset == "india"
    with pytest.raises(
        SuiteError, match=r"--datasets kenya: .*kenya-questions-gold\.csv not found \(found: india, zambia\)"
    ):
        data.load(spec(vrb_dir, datasets="zambia,kenya"))


def test_data_dir_defaults(vrb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.ENV_DATA_DIR, str(vrb_dir))
    assert len(data.load(RunSpec(suite="vrb"))) == 40
    monkeypatch.delenv(data.ENV_DATA_DIR)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        SuiteError, match=r"data/vrb does not exist: pass --data-dir DIR or set EVALSWEEP_VRB_DATA"
    ):
        data.load(RunSpec(suite="vrb"))
    copy_of(vrb_dir, tmp_path / "data" / "vrb")
    assert len(data.load(RunSpec(suite="vrb"))) == 40


def test_annotations_are_normalised(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d", {"x": 3})
    write_csv(
        root / "x-questions-categories-gold.csv",
        [
            ["id ", " solution", " category ", " skills", " error_type_value", " error_severity_value "],
            ["Q001", "", " odd one out ", "rotation; Counting,  shape and form ", "", ""],
            ["Q002", "", "My New Task", "Folding; Shape & Form;Shading&Line Type", "blur", "Moderate"],
            ["Q009", "", "Odd One Out", "", "", ""],  # not in the questions file: ignored
        ],
    )
    a, b, c = data.load(spec(root))
    assert (a.category, a.skills, a.severity) == (
        "Odd One Out",
        ("Rotation", "Counting", "Shape and Form"),
        "no_error",
    )
    # "&" is "and", as the reference's indicator names (skill_difficulty_analysis.py)
    assert (b.category, b.severity, b.error_type) == ("My New Task", "medium", "blur")
    assert b.skills == ("Folding", "Shape and Form", "Shading and Line Type")
    assert data.split_skills("Shape & Form & More") == ("Shape & Form & More",)  # unknown: kept as written
    assert (c.category, c.skills, c.severity) == (None, (), None)  # not annotated


BAD_CASES = [
    # (file, rows, message pattern)
    ("options.csv", [["option_id", "values"], ["alpha_upper", "A"]], r"options\.csv:2: option_id 'alpha_upper' needs"),
    ("options.csv", [["option_id", "labels"]], r"options\.csv:1: header lacks column\(s\) values"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q001", "Q?", "greek", "A"]],
     r"x-questions-gold\.csv:2: option_id 'greek' is not in .*options\.csv"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q001", "Q?", "alpha_upper", "b"]],
     r"x-questions-gold\.csv:2: solution 'b' for id 'Q001' is not one of A,B,C,D"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q001", "Q?", "alpha_upper", "A"],
                              ["Q001", "Q?", "alpha_upper", "B"]], r"x-questions-gold\.csv:3: id 'Q001' appears twice"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q001", "", "alpha_upper", "A"]],
     r"x-questions-gold\.csv:2: field `question` is empty for id 'Q001'"),
    ("x-questions-gold.csv", [["id", "question", "option"], ["Q001", "Q?", "alpha_upper"]],
     r"x-questions-gold\.csv:1: header lacks column\(s\) option_id, solution"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q001", "Q?", "alpha_upper", "A", "x"]],
     r"x-questions-gold\.csv:2: more cells than header columns"),
    ("x-questions-gold.csv", [["id", "question", "option_id", "solution"], ["Q404", "Q?", "alpha_upper", "A"]],
     r"x-questions-gold\.csv:2: image for id 'Q404' not found: .*x-images/Q404\.png"),
    ("x-questions-categories-gold.csv", [["id", "category", "error_severity_value"], ["Q001", "Odd One Out", "severe"]],
     r"x-questions-categories-gold\.csv:2: field `error_severity_value` is 'severe'"),
    ("x-questions-categories-gold.csv", [["id", "category"], ["Q001", ""]],
     r"x-questions-categories-gold\.csv:2: field `category` is empty for id 'Q001'"),
    ("x-questions-categories-gold.csv", [["id", "skills"], ["Q001", "Rotation"]],
     r"x-questions-categories-gold\.csv:1: header lacks column\(s\) category"),
    ("x-questions-categories-gold.csv", [["id", "solution", "category"], ["Q001", "Z", "Odd One Out"]],
     r"x-questions-categories-gold\.csv:2: solution 'Z' for id 'Q001' disagrees with x-questions-gold\.csv"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "rows", "message"), BAD_CASES)
def test_bad_files_name_file_line_and_field(
    tmp_path: Path, name: str, rows: list[list[str]], message: str
) -> None:
    root = write_dataset(tmp_path / "d", {"x": 2})
    write_csv(root / name, rows)
    with pytest.raises(SuiteError, match=message):
        SUITE.check(spec(root))


def test_missing_files(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d", {"x": 2})
    (root / "options.csv").unlink()
    with pytest.raises(SuiteError, match=r"options\.csv: no such file"):
        SUITE.check(spec(root))
    root = write_dataset(tmp_path / "e", {"x": 2})
    for p in (root / "x-images").iterdir():
        p.unlink()
    (root / "x-images").rmdir()
    with pytest.raises(SuiteError, match=r"x-images: image folder for dataset 'x' not found"):
        SUITE.check(spec(root))
    root = write_dataset(tmp_path / "g", {"x": 2})
    (root / "x-questions-gold.csv").write_bytes(
        "id,question,option_id,solution\nQ001,Qu\xe9?,alpha_upper,A\n".encode("latin-1")
    )
    with pytest.raises(SuiteError, match=r"x-questions-gold\.csv: not UTF-8 text"):
        SUITE.check(spec(root))
    root = write_dataset(tmp_path / "f", {"x": 2})
    (root / "x-images" / "Q002.png").write_bytes(b"<html>Not Found</html>")
    with pytest.raises(
        SuiteError, match=r"x-images/Q002\.png: not a PNG/JPEG/GIF/WebP image \(item x/Q002\)"
    ):
        SUITE.check(spec(root))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SuiteError, match=r"no <dataset>-questions-gold\.csv file found"):
        SUITE.check(spec(empty))


def test_build_requests(vrb_dir: Path) -> None:
    reqs = list(SUITE.build(spec(vrb_dir)))
    items = data.load(spec(vrb_dir))
    assert [r.item for r in reqs] == [it.key for it in items]
    r = reqs[0]
    assert r.suite == "vrb" and r.model == "" and r.pass_ == "answer"
    assert (r.decoding.n, r.decoding.temperature, r.decoding.max_tokens) == (1, None, prompt.MAX_TOKENS)  # none sent
    assert len(r.messages) == 1 and r.messages[0].role == "user"  # no system prompt
    image = r.messages[0].content[0]
    assert isinstance(image, ImagePart) and image.detail == "high" and image.mime == "image/png"
    assert image.data == reference_png(items[0].image)  # the reference's resized PNG, not the file
    assert set(r.sim) == {"correct", "wrong"}
    s = RunSpec(suite="vrb", options={"data_dir": str(vrb_dir)}, samples=5, temperature=0.7, limit=3)
    reqs = list(SUITE.build(s))
    assert len(reqs) == 3 and (reqs[0].decoding.n, reqs[0].decoding.temperature) == (5, 0.7)


def test_arguments_and_run_name(vrb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = argparse.ArgumentParser()
    SUITE.add_arguments(p)
    monkeypatch.chdir(tmp_path)
    a = p.parse_args(["--data-dir", "rel/vrb", "--datasets", "zambia,india"])
    assert (
        a.data_dir == str(tmp_path / "rel" / "vrb") and a.datasets == "zambia,india"
    )  # absolute for `score`
    assert p.parse_args([]).data_dir is None  # then $EVALSWEEP_VRB_DATA, else ./data/vrb, at use
    assert SUITE.run_name(RunSpec(suite="vrb")) == "vrb"
    assert SUITE.run_name(RunSpec(suite="vrb", options={"datasets": "zambia,india"})) == "vrb-zambia-india"
    assert (SUITE.name, SUITE.headline) == ("vrb", "accuracy")


def test_sim_hints_extract_as_intended(vrb_dir: Path) -> None:
    steps: Counter[int] = Counter()
    refusals = 0
    for it in data.load(spec(vrb_dir)):
        h = sim.hints(it)
        got, step = extract_step(h["correct"], it.labels)
        assert got == it.solution, h["correct"]
        steps[step] += 1
        assert len(h["wrong"]) >= len(it.labels) - 1
        for w in h["wrong"]:
            got, step = extract_step(w, it.labels)
            assert got != it.solution
            steps[step] += 1
            refusals += got is None
        assert sim.hints(it) == h  # stable
    assert set(steps) == set(range(1, 9))  # a sim sweep exercises every extraction step
    assert refusals > 0
