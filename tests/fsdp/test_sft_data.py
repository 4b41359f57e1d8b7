"""SFT data is read and checked on the submitting side, before a job is queued (a file that
failed 22 s into a job, its reason only in the Slurm log), with the same reader the node uses;
ShareGPT files are read as chats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.fsdp.chatdata import read_conversations

REPO = Path(__file__).resolve().parents[2]
SHAREGPT = {"conversations": [{"from": "system", "value": "be brief"},
                              {"from": "human", "value": "2+2?"},
                              {"from": "gpt", "value": "4"}]}


def test_a_sharegpt_file_reads_as_chat(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.jsonl"
    path.write_text(json.dumps(SHAREGPT) + "\n")
    assert read_conversations(path) == [[{"role": "system", "content": "be brief"},
                                         {"role": "user", "content": "2+2?"},
                                         {"role": "assistant", "content": "4"}]]


@pytest.mark.parametrize(("content", "message"), [
    ("{not json\n", "chat.jsonl:1: not JSON"),
    (json.dumps({"conversations": [{"from": "bot", "value": "x"}]}) + "\n",
     "chat.jsonl:1: a ShareGPT conversation needs turns"),
    (json.dumps({"conversations": [{"from": "human", "value": "x"}]}) + "\n",
     "chat.jsonl:1: no assistant message"),
    ('{"text": "plain"}\n', "chat.jsonl:1: expected"),
])
def test_bad_data_is_refused_before_a_job_is_written(tmp_path: Path, content: str,
                                                     message: str) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(content)
    run_dir = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "bench", "fsdp", "--workload",
                        "sft", "--data", str(path), "--model", "tiny", "--tasks-per-node", "1",
                        "--gpus-per-node", "0", "--run-dir", str(run_dir)],
                       capture_output=True, text=True, timeout=120, cwd=REPO,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                            "PCTK_HOME": str(tmp_path / "state")})
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert message in line and "Traceback" not in r.stderr, line
    assert not (run_dir / "fsdp.sbatch").exists()
