"""A job that dies without its record says why, on the twin's real Slurm: the cause is read
from the end of the job's log (toolkit.joblog), however long the output before it.

The jobs die as real ones do: bad data refused by the FSDP benchmark's own loader, an
OSError 28 raised after more than 4 KiB of output, a real MemoryError under ``ulimit -v``,
and a task ended by SIGKILL, the OOM killer's signal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.joblog import no_record_error

pytestmark = pytest.mark.twin
REPO = Path(__file__).resolve().parents[2]
CPU = ["--partition=cpu"]


def test_bad_data_read_on_the_node_is_bad_input_data(twin: TwinHandle, tmp_path: Path) -> None:
    # the FSDP benchmark's own loader refuses the file on the node (pctk bench fsdp checks
    # chat data before it queues a job, tests/fsdp/test_sft_data.py; a script of one's own
    # that runs the benchmark does not)
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
                    '"content": "hello"}]}\n{"messages": [truncated\n')
    job_id, out = twin.sbatch(
        f"cd {REPO}\nPYTHONPATH={REPO} srun {sys.executable} -m benchmarks.fsdp.train "
        f"--model tiny --device cpu --workload sft --data {data} --steps 1\n", *CPU)
    state = twin.wait(job_id)
    assert state == "FAILED"
    err = no_record_error(job_id, state, out)
    assert err.message.startswith(
        f"job {job_id} ended FAILED without a result record: bad input data ({out}, line: "
        f"error: DataError: {data}:2: not JSON ("), err.message
    assert "fix the data file the log names" in (err.hint or "")


def test_no_space_after_4_kib_of_output_is_named(twin: TwinHandle) -> None:
    # 19 KiB of a training loop's output, then the traceback: nothing of the cause is in the
    # first 4 KiB of the log
    job_id, out = twin.sbatch(
        f"{sys.executable} -c \"\nfor i in range(400): print(f'step {{i}}: loss 2.5 ' + 'x' * 30)"
        "\nraise OSError(28, 'No space left on device', '/fsx/ckpt/step-3/shard-0.pt')\"\n",
        *CPU)
    state = twin.wait(job_id)
    assert state == "FAILED"
    text = out.read_bytes()
    assert len(text) > 8192 and b"No space" not in text[:4096]
    err = no_record_error(job_id, state, out)
    assert err.message == (f"job {job_id} ended FAILED without a result record: no space left "
                           f"on device ({out}, last line: OSError: [Errno 28] No space left on "
                           "device: '/fsx/ckpt/step-3/shard-0.pt')")


def test_a_real_memory_error_is_out_of_memory(twin: TwinHandle) -> None:
    job_id, out = twin.sbatch(
        f"ulimit -v 1000000\n{sys.executable} -c \"print('loading shards', flush=True); "
        "shard = bytearray(4 << 30)\"\n", *CPU)
    state = twin.wait(job_id)
    assert state == "FAILED"
    err = no_record_error(job_id, state, out)
    assert err.message == (f"job {job_id} ended FAILED without a result record: out of "
                           f"memory ({out}, last line: MemoryError)")
    assert "smaller model" in (err.hint or "")


def test_a_task_killed_by_sigkill_is_likely_out_of_memory(twin: TwinHandle) -> None:
    job_id, out = twin.sbatch(
        f"{sys.executable} -c \"import os, signal; print('step 1', flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)\"\n", *CPU)
    state = twin.wait(job_id)
    assert state == "FAILED"
    message = no_record_error(job_id, state, out).message
    assert message.startswith(f"job {job_id} ended FAILED without a result record: out of "
                              "memory, most likely (killed by SIGKILL"), message
    # bash's line for it, the last of the log, shown (up to 200 characters)
    last = out.read_text().strip().splitlines()[-1]
    assert "Killed" in last and f"({out}, last line: {last[:150]}" in message
