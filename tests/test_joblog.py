"""Why a job ended without its record, from the end of its log (toolkit.joblog), on real
log files: what Python, PyTorch, the kernel and slurmstepd print when a job dies."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from toolkit.joblog import TAIL_BYTES, classify, no_record_error, read_tail

STEPS = "".join(f"step {i:5d} | loss 4.{i % 1000:03d} | 1,234 tokens/s\n" for i in range(3000))


def steps(size: int) -> str:
    """About ``size`` bytes of a training loop's output, in whole lines."""
    return STEPS[:STEPS.index("\n", size) + 1]
ENOSPC = ("Traceback (most recent call last):\n"
          '  File "/opt/pctk/benchmarks/fsdp/checkpoint.py", line 88, in save\n'
          "    torch.save(state, tmp)\n"
          "OSError: [Errno 28] No space left on device: '/fsx/ckpt/step-3/shard-0.pt'\n")


def _log(tmp_path: Path, text: str, name: str = "slurm-12.out") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_cause_at_the_end_of_a_long_log_is_found_and_the_start_is_not_read(
        tmp_path: Path) -> None:
    # a MemoryError long before the end (a recovered retry) must not decide: only the last
    # TAIL_BYTES are read, and the last cause there wins
    log = _log(tmp_path, "MemoryError\n" + STEPS + ENOSPC + "srun: error: c5-1: task 0: "
               "Exited with exit code 1\n")
    assert log.stat().st_size > TAIL_BYTES > 4096
    err = no_record_error("12", "FAILED", log)
    assert err.message == (f"job 12 ended FAILED without a result record: no space left on "
                           f"device ({log}, line: OSError: [Errno 28] No space left on device: "
                           "'/fsx/ckpt/step-3/shard-0.pt')")
    assert "free space" in (err.hint or "")
    assert len(err.one_line().splitlines()) == 1


def test_the_last_line_is_named_so(tmp_path: Path) -> None:
    log = _log(tmp_path, steps(5000) + ENOSPC)
    assert no_record_error("12", "FAILED", log).message.endswith(
        f"no space left on device ({log}, last line: OSError: [Errno 28] No space left on "
        "device: '/fsx/ckpt/step-3/shard-0.pt')")


@pytest.mark.parametrize(("line", "cause"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
     "total capacity of 79.11 GiB of which 1.06 GiB is free.", "out of memory"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=12.0. Some of the step tasks "
     "have been OOM Killed.", "out of memory"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=12.batch.", "out of memory"),
    ("/var/spool/slurmd/job00012/slurm_script: line 9:  4242 Killed    python train.py",
     "out of memory, most likely (killed by SIGKILL, the kernel's OOM killer's signal)"),
    ("MemoryError", "out of memory"),
    ("benchmarks.fsdp.data.DataError: /data/tok.bin: 12 tokens, need at least 129",
     "bad input data"),
    ("error: DataError: /data/chat.jsonl:3: not JSON (Expecting value)", "bad input data"),
    ("OSError: [Errno 28] No space left on device", "no space left on device"),
])
def test_each_cause_in_its_own_words(tmp_path: Path, line: str, cause: str) -> None:
    log = _log(tmp_path, steps(6000) + line + "\n")
    message = no_record_error("7", "FAILED", log).message
    assert message.startswith(f"job 7 ended FAILED without a result record: {cause} "
                              f"({log}, last line: ")


def test_slurms_out_of_memory_state_is_enough(tmp_path: Path) -> None:
    log = _log(tmp_path, steps(2000))
    tail = read_tail(log)
    assert classify("OUT_OF_MEMORY", tail.lines)[0] is not None
    message = no_record_error("9", "OUT_OF_MEMORY", log).message
    assert message.startswith("job 9 ended OUT_OF_MEMORY without a result record: out of "
                              f"memory (Slurm: OUT_OF_MEMORY; {log}, last line: step ")


def test_no_known_cause_shows_the_last_line(tmp_path: Path) -> None:
    log = _log(tmp_path, steps(3000) + "RuntimeError: something else broke\n\n")
    err = no_record_error("5", "FAILED", log)
    assert err.message == (f"job 5 ended FAILED without a result record ({log}, last line: "
                           "RuntimeError: something else broke)")
    assert err.hint == f"read the log's end: tail -n 50 {log}"


def test_a_long_or_hostile_last_line_stays_one_short_line(tmp_path: Path) -> None:
    log = _log(tmp_path, "OSError: [Errno 28] No space left on device: '" + "x" * 5000
               + "\x1b[31m'\n")
    line = no_record_error("5", "FAILED", log).one_line()
    assert len(line.splitlines()) == 1 and "\x1b" not in line and len(line) < 600


def test_missing_empty_fifo_and_symlink_logs_are_said_not_read(tmp_path: Path) -> None:
    assert no_record_error("1", "FAILED", tmp_path / "none.out").message.endswith(
        f"(no log: {tmp_path / 'none.out'})")
    assert no_record_error("1", "CANCELLED", _log(tmp_path, "\n\n", "e.out")).message \
        .endswith(f"(empty log: {tmp_path / 'e.out'})")
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(
        no_record_error("1", "FAILED", fifo).message), daemon=True)
    reader.start()
    reader.join(10)  # a blocking open of a FIFO without a writer would never return
    assert result == [f"job 1 ended FAILED without a result record (not a regular file "
                      f"(a FIFO): {fifo})"]
    link = tmp_path / "link.out"
    link.symlink_to(_log(tmp_path, ENOSPC, "real.out"))
    assert no_record_error("1", "FAILED", link).message.endswith(
        f"(not a regular file (a symbolic link): {link})")
