"""The storage benchmark across 4 nodes of the local twin (cpu partition), real fio against
a temporary folder standing in for /fsx. Sizes are small: the machine has 2 cores."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from toolkit.bench.storage import driver as drv
from toolkit.errors import PctkError

pytestmark = pytest.mark.twin
REPO = Path(__file__).resolve().parents[2]
SMALL = {"jobs_per_node": 2, "size_mib": 4, "ckpt_mib": 2, "rand_seconds": 1,
         "meta_files": 50}


def job(tmp: Path, target: str, **kw: Any) -> drv.StorageJob:
    return drv.StorageJob(**{"nodes": 4, "target": target, "run_dir": tmp / "run",
                             "partition": "cpu", "share_timeout": 5.0, **SMALL, **kw})


def fsx_config(target: Path, capacity_gib: int, kind: str, per_unit: int,
               storage: str) -> dict:
    return {"SharedStorage": [{
        "Name": "fsx", "StorageType": "FsxLustre", "MountDir": str(target),
        "FsxLustreSettings": {"StorageCapacity": capacity_gib, "DeploymentType": kind,
                              "PerUnitStorageThroughput": per_unit, "StorageType": storage}}]}


# 1.2 TiB of PERSISTENT_1 HDD at 12 MB/s/TiB: 14 MB/s, far below what this disk gives
FAR_LESS = (1200, "PERSISTENT_1", 12, "HDD")
# 100.8 TiB of PERSISTENT_2 at 1000 MB/s/TiB: 98 GB/s, far above it
FAR_MORE = (100800, "PERSISTENT_2", 1000, "SSD")


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if not p.is_dir()]


@pytest.fixture(scope="module")
def four_node_run(twin, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[dict[str, Any], Path, Path]:
    tmp = tmp_path_factory.mktemp("storage")
    target = tmp / "fsx"
    target.mkdir()
    j = job(tmp, str(target))
    rec = drv.run_storage(j, config=fsx_config(target, *FAR_LESS), timeout=240)
    return rec, j.run_dir, target


def test_record_totals_are_the_sum_of_the_fio_reports(four_node_run) -> None:
    rec, run_dir, target = four_node_run
    assert rec["kind"] == "storage" and rec["params"]["job_state"] == "COMPLETED"
    assert sorted(rec["cluster"]["hosts"]) == [f"cpu-dy-c5-{i}" for i in range(1, 5)]
    m = rec["metrics"]
    for phase, side in (("seq_write", "write"), ("seq_read", "read"),
                        ("seq_write_shared", "write"), ("seq_read_shared", "read"),
                        ("ckpt_write", "write"), ("ckpt_read", "read")):
        reports = sorted(run_dir.glob(f"fio-*-{phase}.json"))
        assert len(reports) == 4
        jobs = [json.loads(p.read_text())["jobs"][0][side] for p in reports]
        assert m[phase]["total_bytes"] == sum(j["io_bytes"] for j in jobs)
        slowest = max(j["runtime"] for j in jobs) / 1000
        assert m[phase]["slowest_node_s"] == pytest.approx(slowest)
        assert m[phase]["mb_per_s"] == pytest.approx(
            sum(j["io_bytes"] for j in jobs) / slowest / 1e6)
        assert len(m[phase]["per_node"]) == 4
    per_rank = SMALL["size_mib"] << 20
    assert m["seq_write"]["total_bytes"] == 4 * SMALL["jobs_per_node"] * per_rank
    assert m["seq_read_shared"]["total_bytes"] == 4 * SMALL["jobs_per_node"] * per_rank
    reports = [json.loads(p.read_text())["jobs"][0]["read"]
               for p in run_dir.glob("fio-*-rand_read.json")]
    assert m["rand_read"]["total_ios"] == sum(r["total_ios"] for r in reports) > 0
    # latency percentiles over all 4 nodes' I/Os, from the histograms in fio's json+ reports
    bins = sum(sum(r["clat_ns"]["bins"].values()) for r in reports)
    assert m["rand_read"]["lat_merged_from"] == (
        f"fio completion-latency histograms of 4 node(s), {bins} I/Os")
    assert 0 < m["rand_read"]["lat_p50_us"] <= m["rand_read"]["lat_p99_us"]
    assert m["meta_create"]["total_files"] == 4 * SMALL["meta_files"]
    assert m["meta_remove"]["per_s"] > 0
    assert files_under(target) == [] and list(target.iterdir()) == []


def test_verdict_trips_both_ways(four_node_run) -> None:
    rec, _run_dir, target = four_node_run
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    assert rec["metrics"]["provisioned_mb_per_s"] == pytest.approx(1200 / 1024 * 12)
    judged = drv.apply_verdict(json.loads(json.dumps(rec)), fsx_config(target, *FAR_MORE),
                               None)
    assert judged["verdict"]["status"] == "FAIL", judged["verdict"]
    unjudged = drv.apply_verdict(json.loads(json.dumps(rec)), None, None)
    assert unjudged["verdict"]["status"] == "UNKNOWN"


def test_record_is_accepted_by_results_add(four_node_run, tmp_path: Path) -> None:
    rec, run_dir, _target = four_node_run
    r = subprocess.run([str(Path(sys.executable).parent / "pctk"), "results", "add",
                        str(run_dir / "record.json"), "--db", str(tmp_path / "r.db"),
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    added = json.loads(r.stdout)["added"][0]
    assert added["kind"] == "storage" and added["id"] == rec["id"]
    # 7 fio phases x (report + job file) + the node result, on 4 nodes
    assert added["logs"] == len(rec["raw_logs"]) == 4 * (7 * 2 + 1)


def test_target_not_shared_between_nodes_is_refused(twin, tmp_path: Path) -> None:
    root = tmp_path / "local"
    with pytest.raises(PctkError, match="not shared between the nodes") as err:
        drv.run_storage(job(tmp_path, f"{root}/%n"), timeout=120)
    assert "before any data was written" in err.value.message
    assert files_under(root) == []
    assert not list((tmp_path / "run").glob("node-*.json"))


def test_target_without_the_space_is_refused(twin, tmp_path: Path) -> None:
    target = tmp_path / "fsx"
    target.mkdir()
    with pytest.raises(PctkError, match="MiB free"):
        drv.run_storage(job(tmp_path, str(target), size_mib=1 << 30), timeout=120)
    assert list(target.iterdir()) == []


def test_scancel_mid_run_leaves_no_files(twin, tmp_path: Path) -> None:
    target = tmp_path / "fsx"
    target.mkdir()
    j = job(tmp_path, str(target), rand_seconds=60, phases="seq,rand")
    j.run_dir.mkdir(parents=True)
    from toolkit import slurm

    job_id = slurm.sbatch(j.sbatch_args(), env=drv.job_env())
    deadline = time.monotonic() + 120
    while len(list(j.run_dir.glob("fio-*-rand_read.fio"))) < 4:
        assert time.monotonic() < deadline, "random-read phase never started"
        time.sleep(0.2)
    time.sleep(1.0)  # fio is reading now
    assert files_under(target), "expected benchmark files while it runs"
    # the command it names is the one that cancels it
    cancel = subprocess.run([str(Path(sys.executable).parent / "pctk"), "cancel", job_id],
                            capture_output=True, text=True, timeout=60)
    assert cancel.returncode == 0, cancel.stderr
    assert twin.wait(job_id, timeout=90) == "CANCELLED"
    twin.wait_gone(job_id)  # each node's clean-up runs while the job is COMPLETING
    assert files_under(target) == [] and list(target.iterdir()) == []


def test_pctk_bench_storage_command(twin, tmp_path: Path) -> None:
    import yaml

    target = tmp_path / "fsx"
    target.mkdir()
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(fsx_config(target, *FAR_MORE)))
    pctk = str(Path(sys.executable).parent / "pctk")
    args = [pctk, "bench", "storage", "-N", "2", "-p", "cpu", "--config", str(config),
            "--jobs-per-node", "1", "--size-mib", "2", "--ckpt-mib", "1", "--rand-seconds",
            "1", "--meta-files", "20", "--run-dir", str(tmp_path / "run"), "--timeout", "180",
            "--db", str(tmp_path / "results.db"), "--block-sizes", "1M,512k",
            # clients with 3,200 Gbps each: the 98 GB/s provisioned is the lower figure (the
            # twin's c5.4xlarge ceiling, 2 x 1.25 GB/s, is near what this disk gives: WARN)
            "--instance-type", "p5.48xlarge"]
    r = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stderr  # FAIL against 98 GB/s provisioned
    rec = json.loads(r.stdout)
    assert rec["params"]["target"] == str(target)  # the config's MountDir by default
    assert rec["verdict"]["status"] == "FAIL" and rec["cluster"]["nodes"] == 2
    for phase in ("seq_read", "ckpt_write"):  # the sweep: each phase at both block sizes
        assert rec["metrics"][phase]["block"] == "1M"
        assert rec["metrics"][f"{phase}@512k"]["block"] == "512k"
        assert (rec["metrics"][f"{phase}@512k"]["total_bytes"]
                == rec["metrics"][phase]["total_bytes"] > 0)
    assert list(target.iterdir()) == []
    r = subprocess.run([pctk, "results", "list", "--db", str(tmp_path / "results.db"),
                        "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and rec["id"] in r.stdout  # stored automatically
    r = subprocess.run([pctk, "bench", "storage", "--nodes", "0", "--target", "/fsx"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--nodes must be at least 1" in r.stderr
    assert "Traceback" not in r.stderr


def test_sbatch_script_by_hand(twin, tmp_path: Path) -> None:
    target, out = tmp_path / "fsx", tmp_path / "out"
    target.mkdir()
    log = tmp_path / "slurm.out"
    r = twin.cmd("sbatch", "--parsable", "--nodes=2", "--partition=cpu", f"--chdir={REPO}",
                 f"--output={log}", f"--export=ALL,PCTK_PYTHON={sys.executable}",
                 str(REPO / "sbatch" / "storage.sbatch"), "--target", str(target),
                 "--out-dir", str(out), "--run-id", "h", "--jobs-per-node", "1",
                 "--size-mib", "2", "--phases", "seq")
    job_id = r.stdout.strip().split(";")[0]
    assert twin.wait(job_id, timeout=120) == "COMPLETED", log.read_text()
    rec = json.loads((out / "record.json").read_text())
    assert rec["kind"] == "storage" and rec["metrics"]["seq_read"]["total_bytes"] == 4 << 20
    assert "rand_read" not in rec["metrics"] and list(target.iterdir()) == []


def test_sigterm_while_waiting_names_the_job_and_pctk_cancel_cleans_up(twin, tmp_path: Path
                                                                  ) -> None:
    import signal

    target = tmp_path / "fsx"
    target.mkdir()
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "pctk"), "bench", "storage", "-N", "2", "-p", "cpu",
         "--target", str(target), "--run-dir", str(run_dir), "--jobs-per-node", "1",
         "--size-mib", "2", "--rand-seconds", "60", "--phases", "seq,rand", "--no-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(run_dir.glob("fio-*-rand_read.fio"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "never reached rand"
            time.sleep(0.2)
        # SIGTERM, as a service manager or a batch system stops it, is handled as Ctrl-C
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("pctk: stopped waiting; job ") and " keeps running." in err, err
    job_id = err.strip().rsplit("Cancel with: pctk cancel ", 1)[1]
    assert job_id.isdigit() and f"job {job_id} keeps running" in err
    assert files_under(target), "the job keeps running after the driver stops waiting"
    # the command it names is the one that cancels it
    cancel = subprocess.run([str(Path(sys.executable).parent / "pctk"), "cancel", job_id],
                            capture_output=True, text=True, timeout=60)
    assert cancel.returncode == 0, cancel.stderr
    assert twin.wait(job_id, timeout=90) == "CANCELLED"
    # CANCELLED is recorded as scancel signals the job; the node side removes its files as it
    # unwinds (well within the twin's KillWait), so give it that long before judging.
    deadline = time.monotonic() + 30
    while list(target.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert list(target.iterdir()) == []
