"""`pctk observe collect` on the twin's real Slurm: nodes by state (a pctk drain with its
check), jobs pending on capacity, GPU hours and list-price cost from sacct, and a cluster
without accounting (said once, counts only)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.results.promparse import parse
from toolkit import catalog
from toolkit.cli import main
from toolkit.local.twin import Twin
from toolkit.observe import collect

pytestmark = pytest.mark.twin

ACCOUNT = "obs17"


def _samples(families: dict, name: str) -> list[tuple[dict[str, str], float]]:
    return list(families.get(name, {"samples": []})["samples"])


def _one(families: dict, name: str, **labels: str) -> float:
    hits = [v for lab, v in _samples(families, name)
            if all(lab.get(k) == want for k, want in labels.items())]
    assert len(hits) == 1, "\n".join([f"{name} {labels}: {len(hits)} samples; all:",
                                       *(f"  {lab} {v}" for lab, v in _samples(families, name))])
    return hits[0]


def _sum(families: dict, name: str, **labels: str) -> float:
    return sum(v for lab, v in _samples(families, name)
               if all(lab.get(k) == want for k, want in labels.items()))


def _controller_knows_association(twin, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = twin.cmd("scontrol", "show", "assoc_mgr", "flags=assoc", f"accounts={ACCOUNT}",
                       "users=root").stdout
        if f"Account={ACCOUNT} UserName=root" in out:
            return True
        time.sleep(0.5)
    return False


def test_nodes_jobs_and_cost_from_the_twin(twin, tmp_path: Path) -> None:
    twin.cmd("sacctmgr", "-i", "add", "account", ACCOUNT)
    twin.cmd("sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}")
    # slurmdbd pushes a new association to slurmctld a moment later (or, after slurmdbd was
    # restarted earlier in the session, not at all until slurmctld reloads them); a job
    # submitted before slurmctld knows it is accounted to root's default account instead
    assert _controller_knows_association(twin, 20) or (
        twin.cmd("scontrol", "reconfigure") and _controller_knows_association(twin, 40)), \
        twin.cmd("scontrol", "show", "assoc_mgr", "flags=assoc", f"accounts={ACCOUNT}").stdout
    node = "gpu-st-p5-4"
    twin.cmd("scontrol", "update", f"NodeName={node}", "State=DRAIN",
             "Reason=pctk: gpu_devices: 8 of 8 GPU device files missing")
    waiting = ""
    try:
        # one whole p5 (8 of 8 GPUs) and a 2-GPU job (which an exclusive queue gives the whole
        # node), both under our account
        whole, _ = twin.sbatch("sleep 2", "-p", "gpu", "-N1", "--gpus-per-node=8",
                               f"-A{ACCOUNT}")
        part, _ = twin.sbatch("sleep 3", "-p", "gpu", "-N1", "--gpus-per-node=2",
                              f"-A{ACCOUNT}")
        assert twin.wait(whole) == "COMPLETED" and twin.wait(part) == "COMPLETED"
        # slurmdbd applies a job's records asynchronously: on a busy host its row can be
        # listed a moment without its partition; the figures below are read once it has one
        deadline = time.monotonic() + 30
        while twin.cmd("sacct", "-n", "-X", "-P", "-j", f"{whole},{part}", "-o",
                       "Partition").stdout.split() != ["gpu", "gpu"] \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        # four nodes while one is drained: pending on capacity
        waiting, _ = twin.sbatch("true", "-p", "gpu", "-N4", f"-A{ACCOUNT}")
        deadline = time.monotonic() + 30
        while "Resources" not in (reason := twin.cmd("squeue", "-h", "-j", waiting, "-o",
                                                     "%r").stdout) \
                and "Nodes_required" not in reason.replace(" ", "_") \
                and "ReqNodeNotAvail" not in reason and time.monotonic() < deadline:
            time.sleep(0.5)

        out = tmp_path / "slurm.prom"
        assert main(["observe", "collect", "-o", str(out), "--cluster", "twin"]) == 0
        fams = parse(out.read_text())
        assert all(lab["cluster"] == "twin" for f in fams.values() for lab, _ in f["samples"])
        assert _one(fams, "pctk_slurm_node_drained", node=node) == 1
        (drained,) = [lab for lab, _ in _samples(fams, "pctk_slurm_node_drained")
                      if lab["node"] == node]
        assert drained["by"] == "pctk" and drained["check"] == "gpu_devices"
        assert _one(fams, "pctk_slurm_nodes", partition="gpu", state="drained") == 1
        assert _one(fams, "pctk_slurm_nodes", partition="gpu", state="idle") == 3
        assert _one(fams, "pctk_slurm_nodes", partition="cpu", state="idle") == 4
        assert _one(fams, "pctk_slurm_jobs", partition="gpu", state="PENDING") >= 1
        assert _one(fams, "pctk_slurm_jobs_pending_oldest_seconds", partition="gpu",
                    reason_class="capacity") >= 0
        assert _one(fams, "pctk_slurm_accounting_available") == 1

        # hours and dollars: recomputed here from sacct's own figures and the catalog price
        rows = twin.cmd("sacct", "-n", "-X", "-P", "-j", f"{whole},{part}", "-o",
                        "JobID,ElapsedRaw,AllocTRES,Partition").stdout.splitlines()
        elapsed = {r.split("|")[0]: int(r.split("|")[1]) for r in rows}
        cpus = {r.split("|")[0]: int(r.split("cpu=")[1].split(",")[0]) for r in rows}
        # GPUs held as accounting records them: the preset's gpu queue is exclusive
        # (JobExclusiveAllocation, OverSubscribe=EXCLUSIVE), so the 2-GPU job holds all 8
        gpus = {r.split("|")[0]: int(r.split("gres/gpu=")[1].split(",")[0].split("|")[0])
                for r in rows}
        assert gpus[whole] == 8 and gpus[part] in (2, 8), rows
        # the partition as accounting recorded it: under load the twin's slurmdbd has been seen
        # to record these short jobs with an empty partition; the collector reports sacct's
        partitions = {r.split("|")[3] for r in rows}
        node_cpus = int(twin.cmd("sinfo", "-h", "-n", "gpu-st-p5-1", "-o", "%c").stdout.split()[0])
        price = catalog.get("p5.48xlarge").price_usd_per_hour
        assert price
        gpu_h = (gpus[whole] * elapsed[whole] + gpus[part] * elapsed[part]) / 3600
        share_part = max(gpus[part] / 8, cpus[part] / node_cpus)
        usd = price * (elapsed[whole] + share_part * elapsed[part]) / 3600
        assert gpu_h > 0
        for fam in ("pctk_slurm_gpu_hours", "pctk_slurm_node_hours", "pctk_slurm_cost_dollars"):
            assert {lab["partition"] for lab, _ in _samples(fams, fam)
                    if lab["account"] == ACCOUNT} == partitions, _samples(fams, fam)
        assert _sum(fams, "pctk_slurm_gpu_hours", account=ACCOUNT) == pytest.approx(gpu_h)
        assert _sum(fams, "pctk_slurm_node_hours", account=ACCOUNT) == pytest.approx(
            (elapsed[whole] + elapsed[part]) / 3600)
        cost = _sum(fams, "pctk_slurm_cost_dollars", account=ACCOUNT)
        assert cost == pytest.approx(usd)
        (labels, *_) = [lab for lab, _ in _samples(fams, "pctk_slurm_cost_dollars")
                        if lab["account"] == ACCOUNT]
        assert labels["price"] == "on_demand_list" and labels["instance_type"] == "p5.48xlarge"
        assert labels["window"] == "24h"
    finally:
        if waiting:
            twin.cmd("scancel", waiting, check=False)
        twin.cmd("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)


def test_collect_serves_http_and_refuses_a_bad_address(twin) -> None:
    assert main(["observe", "collect", "--listen", "127.0.0.1:http"]) == 2


@pytest.fixture(scope="module")
def plain_twin():
    state = Path(tempfile.mkdtemp(prefix="pctk-obsna-", dir="/tmp"))
    t = Twin(state)
    t.up("p5-training", nodes=1, accounting=False)
    old = {k: os.environ.get(k) for k in t.env()}
    os.environ.update(t.env())
    try:
        yield t
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        t.down(purge=True)


def test_without_accounting_counts_only_and_says_so_once(plain_twin, capsys) -> None:
    collect._told_no_accounting.clear()
    reg = collect.registry(cluster="plain")
    first = parse(generate_latest(reg).decode())
    second = parse(generate_latest(reg).decode())
    err = capsys.readouterr().err
    assert err.count("no accounting on this cluster") == 1, err
    for fams in (first, second):
        assert _one(fams, "pctk_slurm_accounting_available") == 0
        assert _one(fams, "pctk_slurm_up") == 1
        assert _one(fams, "pctk_slurm_nodes", partition="gpu", state="idle") == 1
        assert "pctk_slurm_gpu_hours" not in fams and "pctk_slurm_cost_dollars" not in fams
