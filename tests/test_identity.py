"""A run's identity: the same data reached by another path is the same run; other data is not."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli.main import main
from runner.identity import data_identity, differences, identities
from tests.helpers import rows, run_args, write_dataset


def _fp(suite: str, **options: object) -> dict:
    return {"suite": suite, "options": options, "samples": None, "temperature": None}


def test_a_file_or_folder_is_known_by_its_content_not_its_path(tmp_path: Path):
    a = write_dataset(tmp_path / "a.jsonl", 5)
    b = tmp_path / "mnt" / "other-name.jsonl"
    b.parent.mkdir()
    shutil.copy(a, b)
    assert data_identity(str(a)) == data_identity(str(b)) is not None
    b.write_bytes(b.read_bytes() + b"\n")
    assert data_identity(str(a)) != data_identity(str(b))
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    for d in (d1, d2):
        (d / "images").mkdir(parents=True)
        (d / "images" / "1.png").write_bytes(b"x" * 10)
    assert data_identity(str(d1)) == data_identity(str(d2))
    (d2 / "images" / "2.png").write_bytes(b"y")
    assert data_identity(str(d1)) != data_identity(str(d2))
    assert data_identity(str(tmp_path / "absent")) is None


def test_differences_name_each_setting_and_accept_another_spelling_of_the_same_data(tmp_path: Path):
    a = write_dataset(tmp_path / "a.jsonl", 5)
    old = _fp(f"jsonl:{a}", data_dir=str(tmp_path), variant="cot")
    rec = identities(old)
    moved = tmp_path.parent / (tmp_path.name + "-mount")
    moved.symlink_to(tmp_path)
    same = _fp(f"jsonl:{moved / 'a.jsonl'}", data_dir=str(moved), variant="cot")
    assert differences(old, same, rec) == []
    other = _fp(f"jsonl:{a}", data_dir=str(tmp_path), variant="cot-sc")
    assert differences(old, other, rec) == ["--variant: 'cot' (this command: 'cot-sc')"]
    a.write_bytes(a.read_bytes() + b"\n")  # the data itself edited under the same path: another run
    edited = differences(old, old, rec)  # (#37: it used to resume the old answers silently)
    assert [m.split(":")[0] for m in edited] == ["options.data_dir", "suite"]
    assert all("was edited since this run began" in m for m in edited)
    changed = _fp(f"jsonl:{moved / 'a.jsonl'}", data_dir=str(moved), variant="cot")
    msgs = differences(old, changed, rec)  # the file changed, and so did the folder holding it
    assert [m.split(":")[0] for m in msgs] == ["options.data_dir", "suite"]
    assert all("not the same data" in m for m in msgs)


def test_a_run_resumes_from_a_copy_of_its_data_at_another_path_and_refuses_other_data(tmp_path: Path, capsys):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    out = tmp_path / "run"
    assert main(run_args(data, "sim/strong", None, out)) == 0
    copy = tmp_path / "elsewhere" / "d.jsonl"
    copy.parent.mkdir()
    shutil.copy(data, copy)
    assert main(run_args(copy, "sim/strong,sim/weak", None, out)) == 0
    rs = rows(out)
    assert len(rs) == 12 and {r["model"] for r in rs} == {"sim/strong", "sim/weak"}
    changed = tmp_path / "changed" / "d.jsonl"
    changed.parent.mkdir()
    changed.write_bytes(data.read_bytes().replace(b"Question 0", b"Question zero"))
    capsys.readouterr()
    assert main(run_args(changed, "sim/strong", None, out)) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and "not the same data" in err and str(changed) in err


def test_an_edited_data_file_at_the_same_path_is_refused_naming_it(tmp_path: Path, capsys):
    """#37: editing the data file in place and rerunning resumed the old answers silently; now exit 2."""
    data = write_dataset(tmp_path / "d.jsonl", 4)
    out = tmp_path / "run"
    assert main(run_args(data, "sim/strong", None, out)) == 0
    before = rows(out)
    data.write_bytes(data.read_bytes().replace(b"Question 1", b"Question one"))
    capsys.readouterr()
    assert main(run_args(data, "sim/strong", None, out)) == 2
    err = capsys.readouterr().err
    assert f"{data}' was edited since this run began" in err and "Traceback" not in err, err
    assert rows(out) == before  # nothing was added or sent
