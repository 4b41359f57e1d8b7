"""``pctk bench nccl parse`` through the installed console script: what it reads, what it
refuses, what it records about the run (from the log, not from the machine parsing it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.fsutil import InputTooLarge, NotRegularFile, open_regular_text

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SENDRECV = FIXTURES / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log"
PCTK = Path(sys.executable).parent / "pctk"


def _pctk(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PCTK), *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def _refused_quickly(path: str) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    res = _pctk("bench", "nccl", "parse", path, timeout=30)
    assert time.monotonic() - t0 < 20
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    return res


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    res = _refused_quickly(str(fifo))
    assert "not a regular file (a FIFO)" in res.stderr


def test_dev_zero_is_refused() -> None:
    res = _refused_quickly("/dev/zero")
    assert "not a regular file (a character device)" in res.stderr


def test_log_above_the_read_limit_is_refused(tmp_path: Path) -> None:
    res = _pctk("bench", "nccl", "parse", str(SENDRECV), "--max-bytes", "4K")
    assert res.returncode == 2
    assert "above the read limit of 4096 bytes" in res.stderr


def test_bounded_reader_stops_a_growing_file_at_the_cap(tmp_path: Path) -> None:
    log = tmp_path / "grow.log"
    log.write_text("x" * 100 + "\n")
    with open_regular_text(log, max_bytes=1000) as lines:
        log.write_text("y\n" * 2000)   # grows after the size check
        with pytest.raises(InputTooLarge):
            list(lines)
    with pytest.raises(NotRegularFile):
        open_regular_text(tmp_path)


def test_record_names_the_software_the_log_ran_and_parsing_skips_torch(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    probe = ("import sys\n"
             f"sys.argv = ['pctk', 'bench', 'nccl', 'parse', {str(SENDRECV)!r}, '-o', "
             f"{str(out)!r}]\n"
             "from toolkit.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "assert 'torch' not in sys.modules, 'parse imported torch'\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    rec = json.loads(out.read_text())
    sw = rec["software"]
    assert (sw["nccl"], sw["cuda"], sw["cuda_driver"]) == ("2.22.3", "12.2", "12.1")
    assert sw["torch"] is None and sw["python"] is None and "host" not in sw
    assert rec["cluster"]["hosts"] == ["lrdn2296"]


def test_expect_ranks_fails_a_run_on_fewer_ranks() -> None:
    ok = _pctk("bench", "nccl", "parse", str(SENDRECV), "--expect-ranks", "2", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["verdict"]["status"] == "PASS"
    bad = _pctk("bench", "nccl", "parse", str(SENDRECV), "--expect-ranks", "16", "--json")
    assert bad.returncode == 1
    assert any("16 launched" in r for r in json.loads(bad.stdout)["verdict"]["reasons"])


def test_many_runs_print_one_line_each(tmp_path: Path) -> None:
    loop = tmp_path / "loop.log"
    loop.write_text(SENDRECV.read_text() * 20)
    res = _pctk("bench", "nccl", "parse", str(loop), "--collective", "sendrecv")
    assert res.returncode == 0, res.stderr
    rows = [ln for ln in res.stdout.splitlines() if ln.split()[:2][-1:] == ["sendrecv"]]
    assert len(rows) == 20 and all(ln.split()[2] == "2" for ln in rows)
    assert "20 runs: one line each" in res.stdout


def test_a_large_log_is_streamed_not_held_in_memory(tmp_path: Path) -> None:
    """30 MiB of a real debug log (fixture 05's INFO lines repeated inside its one run):
    a parser holding the text and its lines would need over 100 MiB more than streaming."""
    real = (FIXTURES / "05_aws-efa-eks-p4d-16rank-oldformat-info.log").read_bytes()
    lines = real.splitlines(keepends=True)
    header = next(i for i, ln in enumerate(lines) if b"size         count" in ln)
    info = b"".join(ln for ln in lines[:header] if b"NCCL INFO" in ln)
    log = tmp_path / "debug.log"
    with log.open("wb") as fh:
        fh.write(b"".join(lines[:header - 1]))
        for _ in range((30 << 20) // len(info)):
            fh.write(info)
        fh.write(b"".join(lines[header - 1:]))
    # a child's peak RSS starts from its parent's at fork (and survives exec): measure it
    # from a small launcher process, not from this test process (which may hold torch)
    launcher = ("import os, sys\n"
                "pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)\n"
                "_, status, usage = os.wait4(pid, 0)\n"
                "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")
    res = subprocess.run([sys.executable, "-c", launcher, str(PCTK), "bench", "nccl", "parse",
                          str(log), "--collective", "all_reduce", "-o",
                          str(tmp_path / "rec.json")],
                         capture_output=True, text=True, timeout=300, check=True)
    code, maxrss_kib = (int(v) for v in res.stdout.split()[-2:])
    assert code == 0
    peak_mib = maxrss_kib / 1024
    assert peak_mib < 100, f"peak RSS {peak_mib:.0f} MiB for a 30 MiB log"
    rec = json.loads((tmp_path / "rec.json").read_text())
    assert len(rec["metrics"]["collectives"][0]["rows"]) == 30
