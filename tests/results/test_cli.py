from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.record import write_record

from . import records
from .conftest import Run


def write(folder: Path, rec: dict, log_text: str | None = None) -> Path:
    path = write_record(folder / f"{rec['kind']}-{rec['id'][:8]}.json", rec)
    if log_text is not None:
        for name in rec["raw_logs"]:
            (folder / name).write_text(log_text)
    return path


def test_add_list_show_round_trip(tmp_path: Path, db: Path, pctk: Run) -> None:
    nccl = write(tmp_path, records.nccl_record(), "#  size  count ...\n")
    fsdp = write(tmp_path, records.fsdp_record())
    code, out, err = pctk("results", "add", nccl, fsdp, "--db", db, "--json")
    assert code == 0, err
    added = json.loads(out)["added"]
    assert [a["kind"] for a in added] == ["nccl-tests", "fsdp"]
    assert added[0]["logs"] == 1 and all(a["new"] for a in added)

    code, out, _ = pctk("results", "add", nccl, "--db", db)
    assert code == 0 and "already stored" in out

    code, out, _ = pctk("results", "list", "--db", db, "--json")
    assert code == 0
    assert {r["kind"] for r in json.loads(out)} == {"nccl-tests", "fsdp"}
    code, out, _ = pctk("results", "list", "--db", db, "--kind", "fsdp")
    assert code == 0 and added[1]["id"][:12] in out and added[0]["id"][:12] not in out

    rid = added[0]["id"]
    code, out, _ = pctk("results", "show", rid[:10], "--db", db, "--json")
    shown = json.loads(out)
    assert shown["record"]["id"] == rid
    assert Path(shown["stored_logs"][0]["path"]).read_text() == "#  size  count ...\n"
    code, out, _ = pctk("results", "show", rid, "--db", db)
    assert code == 0 and "all_reduce busbw" in out and "16 GiB" in out


def test_env_var_chooses_the_database(tmp_path: Path, db: Path, pctk: Run,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCTK_RESULTS_DB", str(tmp_path / "team.db"))
    assert pctk("results", "add", write(tmp_path, records.health_record()))[0] == 0
    assert (tmp_path / "team.db").exists() and not db.exists()


@pytest.mark.parametrize("how", ["PCTK_RESULTS_DB", "--db"])
@pytest.mark.parametrize("folder", ["/", "FOLDER"])
def test_a_folder_as_the_database_is_a_one_line_refusal(
        tmp_path: Path, db: Path, pctk: Run, monkeypatch: pytest.MonkeyPatch, how: str,
        folder: str) -> None:
    """`--db` reads $PCTK_RESULTS_DB itself, past the check that refuses PCTK_HOME=/: the
    root folder was a ValueError traceback ("PosixPath('/') has an empty name")."""
    path = str(tmp_path / "state") if folder == "FOLDER" else folder
    Path(path).mkdir(exist_ok=True)
    before = sorted(Path(path).iterdir())
    record = write(tmp_path, records.health_record())
    for argv in (["results", "list"], ["results", "add", str(record)], ["report"]):
        if how == "--db":
            argv += ["--db", path]
        else:
            monkeypatch.setenv("PCTK_RESULTS_DB", path)
        code, out, err = pctk(*argv)
        assert code == 2 and out == "", err
        assert err == (f"pctk: error: results database {path} is a folder, not a database "
                       f"file; fix: name a file: --db {'DIR' if path == '/' else path}"
                       f"/results.db or PCTK_RESULTS_DB={'DIR' if path == '/' else path}"
                       "/results.db\n"), err
    assert sorted(Path(path).iterdir()) == before


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("this is { not json", "not JSON"),
        (json.dumps({"schema": "pctk.result/v0", "kind": "fsdp"}), "schema is"),
        (json.dumps([1, 2, 3]), "JSON object"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, db: Path, pctk: Run, content: str,
                                          fragment: str) -> None:
    good = write(tmp_path, records.fsdp_record())
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = pctk("results", "add", good, bad, "--db", db)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("pctk: error: ") and str(bad) in err and fragment in err
    assert not db.exists()  # nothing stored, not even an empty database


def test_missing_file_unknown_id_and_bad_threshold_exit_2(tmp_path: Path, db: Path,
                                                          pctk: Run) -> None:
    for argv in (("results", "add", tmp_path / "nope.json"),
                 ("results", "show", "0123456789ab"),
                 ("results", "compare", "--threshold", "12"),
                 ("results", "list", "--since", "someday")):
        code, _, err = pctk(*argv, "--db", db)
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1 and err.startswith("pctk: error: "), err


def test_missing_raw_log_is_a_warning_not_a_failure(tmp_path: Path, db: Path,
                                                    pctk: Run) -> None:
    code, _, err = pctk("results", "add", write(tmp_path, records.nccl_record()), "--db", db)
    assert code == 0 and "warning" in err and "nccl-tests.log" in err


def test_compare_against_baseline_exit_codes(tmp_path: Path, db: Path, pctk: Run) -> None:
    base = records.nccl_record(created="2026-01-01T00:00:00Z")
    same = records.nccl_record(scale=lambda s: 0.99, created="2026-01-02T00:00:00Z")
    slow = records.nccl_record(scale=records.drop_above(4 << 30, 0.8),
                               created="2026-01-03T00:00:00Z")
    assert pctk("results", "add", write(tmp_path, base), "--baseline", "--db", db)[0] == 0
    assert pctk("results", "add", write(tmp_path, same), write(tmp_path, slow), "--db", db)[0] == 0

    code, out, _ = pctk("results", "compare", same["id"], "--db", db)
    assert code == 0 and "no regressions" in out
    code, out, _ = pctk("results", "compare", "--db", db, "--json")  # latest = slow
    assert code == 1
    result = json.loads(out)
    assert result["regressed"] is True
    flagged = [p["where"] for c in result["comparisons"] for p in c["points"] if p["regression"]]
    assert flagged == ["all_reduce @ 4 GiB (4294967296 B)", "all_reduce @ 8 GiB (8589934592 B)",
                       "all_reduce @ 16 GiB (17179869184 B)"]
    code, _, _ = pctk("results", "compare", "--db", db, "--threshold", "25%")
    assert code == 0
    code, out, _ = pctk("results", "compare", slow["id"], "--against", same["id"], "--db", db)
    assert code == 1 and "REGRESSION" in out


def test_compare_without_baseline_is_exit_2(tmp_path: Path, db: Path, pctk: Run) -> None:
    rec = records.fsdp_record()
    pctk("results", "add", write(tmp_path, rec), "--db", db)
    code, _, err = pctk("results", "compare", rec["id"], "--db", db)
    assert code == 2 and "baseline" in err


def test_baseline_set_and_list(tmp_path: Path, db: Path, pctk: Run) -> None:
    rec = records.health_record()
    pctk("results", "add", write(tmp_path, rec), "--db", db)
    code, out, _ = pctk("results", "baseline", rec["id"][:8], "--db", db, "--json")
    assert code == 0 and json.loads(out)["kind"] == "health"
    code, out, _ = pctk("results", "baseline", "--db", db, "--json")
    assert [b["result_id"] for b in json.loads(out)] == [rec["id"]]


def test_report_command_writes_html(tmp_path: Path, db: Path, pctk: Run) -> None:
    pctk("results", "add", write(tmp_path, records.fsdp_record()), "--db", db)
    out_file = tmp_path / "r" / "report.html"
    out_file.parent.mkdir()
    code, out, _ = pctk("report", "--out", out_file, "--db", db, "--json")
    assert code == 0 and json.loads(out) == {"path": str(out_file), "results": 1,
                                              "overall": "PASS"}
    assert out_file.read_text().startswith("<!DOCTYPE html>")


def test_compare_says_nothing_to_compare_instead_of_an_empty_table(tmp_path: Path, db: Path,
                                                                    pctk: Run) -> None:
    base, latest = records.nccl_record(), records.nccl_record()
    lone = records.fsdp_record()  # no baseline and no history: nothing to compare it with
    paths = [write(tmp_path, r) for r in (base, lone)]
    assert pctk("results", "add", *paths, "--db", db)[0] == 0
    assert pctk("results", "baseline", base["id"], "--db", db)[0] == 0
    assert pctk("results", "add", write_record(tmp_path / "latest.json", latest),
                "--db", db)[0] == 0
    code, out, _ = pctk("results", "compare", "--db", db)
    assert code == 0
    assert f"fsdp train-a / p5.48xlarge {lone['id'][:12]}: nothing to compare (" in out
    assert "all_reduce" in out  # the nccl-tests comparison is still a table
    titles = [line for line in out.splitlines() if line.strip().startswith("fsdp")]
    assert len(titles) == 1  # one line for fsdp, no table title over zero rows


def test_report_refuses_a_missing_folder_instead_of_creating_it(tmp_path: Path, db: Path,
                                                                pctk: Run) -> None:
    # `report -o /missing/dir/x.html` made /missing/dir (as root, at /): a typo'd path is
    # refused in one line, exit 2, and nothing is created
    pctk("results", "add", write(tmp_path, records.fsdp_record()), "--db", db)
    out_file = tmp_path / "missing" / "dir" / "x.html"
    code, out, err = pctk("report", "-o", out_file, "--db", db)
    assert code == 2 and out == "", out
    assert err.count("\n") == 1 and err.startswith("pctk: error: ") and "missing" in err, err
    assert not (tmp_path / "missing").exists()
