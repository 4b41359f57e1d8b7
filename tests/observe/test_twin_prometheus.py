"""A real Prometheus in the loop, on a twin of its own.

`pctk local up --observe` starts Debian's prometheus and node_exporter and the Slurm collector
next to the twin; `pctk observe up --alert-for 5s` shortens every alert's `for:` (Prometheus
reloads its rules on SIGHUP). Then: a health sweep with one injected fault (gpu-st-p5-2's
placeholder GPU device files deleted, as in tests/health/test_twin_sweep.py) drains that node,
a collectives run on two nodes, and an FSDP record (tests/results/records.py) and a storage
record (a real one-node fio run, judged against a provisioned figure it cannot reach) stored in
the results database. Prometheus' HTTP API must show pctk's metrics with the right labels and
values, the drained node as drained, its alerts pending or firing, and every dashboard panel's
query must return series. `pctk local down` stops every daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.results import records
from tests.storage.test_node import run_node
from toolkit import catalog
from toolkit.local import procs
from toolkit.local.files import make_placeholder_device
from toolkit.observe.dashboard import dashboard_json, panel_queries
from toolkit.results.metrics import avg_busbw
from toolkit.results.store import ResultStore

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]
CODE = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"
FAULTY = "gpu-st-p5-2"


def _pctk(env: dict[str, str], *argv: str, timeout: float = 300
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=timeout)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    data = _get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert data["status"] == "success", data
    return list(data["data"]["result"])


def _wait_series(prom: str, expr: str, timeout: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        result = _query(prom, expr)
        if result or time.monotonic() > deadline:
            return result
        time.sleep(1)


def _value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


@pytest.fixture(scope="module")
def observed() -> Any:
    base = Path(tempfile.mkdtemp(prefix="pctk-obs-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLURM_CONF", "PCTK_TWIN_DIR", "PCTK_RESULTS_DB")}
    env.update(PCTK_HOME=str(base / "home"), PCTK_TWIN_DIR=str(base / "twins"))
    res = _pctk(env, "local", "up", "--config", "p5-training", "--nodes", "4", "--observe",
                "--json", timeout=400)
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    state_dir = Path(up["state_dir"])
    env["SLURM_CONF"] = str(state_dir / "etc" / "slurm.conf")
    try:
        yield {"env": env, "base": base, "up": up, "state_dir": state_dir}
    finally:
        for f in (state_dir / "nodes" / FAULTY / "dev").glob("nvidia*"):
            make_placeholder_device(f)
        _pctk(env, "local", "down", "--purge", timeout=300)
        shutil.rmtree(base, ignore_errors=True)


def test_prometheus_sees_pctk_metrics_alerts_and_dashboard(observed: Any) -> None:
    env, base, state_dir = observed["env"], observed["base"], observed["state_dir"]
    obs = observed["up"]["observe"]
    prom = obs["prometheus_url"]
    assert prom.startswith("http://127.0.0.1:") and obs["running"]
    status = _pctk(env, "local", "status", "--json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["observe"]["prometheus_url"] == prom
    assert f"Prometheus: {prom}" in _pctk(env, "local", "status").stdout
    res = _pctk(env, "observe", "up", "--alert-for", "5s")
    assert res.returncode == 0 and "alert rules reloaded" in res.stderr, res.stderr
    up = _wait_series(prom, "up == 1", timeout=60)  # both targets scraped
    deadline = time.monotonic() + 60
    while len(up) < 2 and time.monotonic() < deadline:
        time.sleep(1)
        up = _query(prom, "up == 1")
    assert sorted(s["metric"]["job"] for s in up) == ["node", "pctk-slurm"]
    targets = _get(f"{prom}/api/v1/targets")["data"]["activeTargets"]
    assert all(t["scrapeUrl"].startswith("http://127.0.0.1:") for t in targets)

    # one injected fault, then a sweep that drains the node
    dev = sorted((state_dir / "nodes" / FAULTY / "dev").glob("nvidia*"))
    assert len(dev) == 8
    for f in dev:
        f.unlink()
    mnt = base / "mnt"
    mnt.mkdir()
    res = _pctk(env, "health", "run", "--partition", "gpu", "--drain", "--max-drain", "1",
                "--mount", str(mnt), "--timeout", "180", "--json", timeout=300)
    assert res.returncode == 2, res.stderr
    for f in dev:
        make_placeholder_device(f)
    res = _pctk(env, "bench", "collectives", "--nodes", "2", "--partition", "cpu",
                "--min-bytes", "1K", "--max-bytes", "8K", "--iters", "2", "--warmup", "1",
                "--timeout", "240", "--json")
    assert res.returncode == 0, res.stderr
    collectives = json.loads(res.stdout)
    # an FSDP result and a storage result that misses its provisioned throughput
    storage = _storage_record(base)
    with ResultStore(base / "home" / "results.db") as store:
        store.add(records.fsdp_record(mfu=0.31))
        store.add(storage)
    # a GPU job of known length (a quick health job may end within its first second)
    gpu_job = subprocess.run(["sbatch", "--parsable", "-p", "gpu", "-N1", "--gpus-per-node=8",
                              "--wrap", "sleep 2"], capture_output=True, text=True, env=env,
                             check=True).stdout.strip()
    _wait_ended(env, gpu_job)
    # four nodes while one is drained: a job pending on capacity
    job = subprocess.run(["sbatch", "--parsable", "-p", "gpu", "-N4", "--wrap", "true"],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    try:
        _check_metrics(prom, collectives, storage)
        _check_alerts(prom)
        for title, expr in panel_queries(dashboard_json()):
            assert _wait_series(prom, expr, timeout=60), f"panel {title!r}: no series for {expr}"
    finally:
        subprocess.run(["scancel", job], env=env)

    # everything stops with the twin, by pid
    daemons = [procs.Proc.from_json(p) for p in
               json.loads((state_dir / "observe" / "observe.json").read_text())["procs"]]
    assert {p.name for p in daemons} == {"node_exporter", "pctk-collector", "prometheus"}
    res = _pctk(env, "local", "down", timeout=300)
    assert res.returncode == 0, res.stderr
    assert not any(procs.is_running(p) for p in daemons)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{prom}/-/ready", timeout=5)
    assert "Prometheus" not in _pctk(env, "local", "status").stdout


def _wait_ended(env: dict[str, str], job: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"],
                           capture_output=True, text=True, env=env)
        if r.stdout.strip().startswith(("COMPLETED", "FAILED", "CANCELLED")):
            assert r.stdout.strip().startswith("COMPLETED"), r.stdout
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not end within {timeout} s")


def _storage_record(base: Path) -> dict[str, Any]:
    r = run_node(base / "fio-target", base / "fio-out")
    assert r.returncode == 0, r.stderr
    rec: dict[str, Any] = json.loads((base / "fio-out" / "record.json").read_text())
    rec["cluster"].update(name="train-a", instance_type="p5.48xlarge")
    # as if the file system were provisioned far beyond what this machine writes
    rec["metrics"]["expected_mb_per_s"] = 1e9
    return rec


def _check_metrics(prom: str, collectives: dict[str, Any], storage: dict[str, Any]) -> None:
    drained = _wait_series(prom, f'pctk_slurm_node_drained{{node="{FAULTY}"}}')
    assert len(drained) == 1 and _value(drained[0]) == 1
    labels = drained[0]["metric"]
    assert (labels["by"], labels["check"], labels["partition"], labels["job"]) == (
        "pctk", "gpu_devices", "gpu", "pctk-slurm")
    nodes = {s["metric"]["state"]: _value(s)
             for s in _wait_series(prom, 'pctk_slurm_nodes{partition="gpu"}')}
    assert nodes.get("drained") == 1 and nodes.get("idle", 0) + nodes.get("mixed", 0) + \
        nodes.get("allocated", 0) == 3, nodes

    # results come through node_exporter's textfile collector
    health = {(s["metric"]["node"], s["metric"]["check"]): _value(s) for s in _wait_series(
        prom, 'pctk_health_check_status{job="node"}')}
    assert health[(FAULTY, "gpu_devices")] == 2
    assert health[("gpu-st-p5-1", "gpu_devices")] == 0
    verdict = _wait_series(prom, 'pctk_result_verdict_status{kind="health"}')
    assert [_value(s) for s in verdict] == [2]
    busbw = _wait_series(prom, 'pctk_busbw_average_bytes_per_second{kind="collectives",'
                               'collective="all_reduce"}')
    assert len(busbw) == 1 and busbw[0]["metric"]["nodes"] == "2"
    assert _value(busbw[0]) == pytest.approx(avg_busbw(collectives)["all_reduce"] * 1e9,
                                             rel=1e-6)
    mfu = _wait_series(prom, 'pctk_fsdp_mfu_ratio{cluster="train-a"}')
    assert [_value(s) for s in mfu] == [pytest.approx(0.31)]
    seq_read = _wait_series(prom, 'pctk_storage_throughput_bytes_per_second{phase="seq_read"}')
    assert _value(seq_read[0]) == pytest.approx(
        storage["metrics"]["seq_read"]["mb_per_s"] * 1e6)

    # Slurm side: GPU hours and list-price cost (the 8-GPU job ran 2 s at least). Prometheus
    # may still hold a scrape from before that job's accounting record (the health jobs' 0 GPU
    # hours): wait for a scrape that has it, by asking for the values we expect
    price = catalog.get("p5.48xlarge").price_usd_per_hour or 0
    assert price > 0
    gpu_hours = _wait_series(prom, f'sum(pctk_slurm_gpu_hours{{partition="gpu"}}) >= {16 / 3600}')
    assert gpu_hours, _query(prom, "pctk_slurm_gpu_hours")
    cost = _wait_series(prom, 'sum(pctk_slurm_cost_dollars{partition="gpu",'
                              f'price="on_demand_list"}}) >= {2 / 3600 * price}')
    assert cost, _query(prom, "pctk_slurm_cost_dollars")
    pending = _wait_series(prom, 'pctk_slurm_jobs_pending{partition="gpu",'
                                 'reason_class="capacity"}', timeout=60)
    assert pending and _value(pending[0]) >= 1


def _check_alerts(prom: str) -> None:
    wanted = {("PctkNodeDrained", FAULTY), ("PctkHealthCheckFailed", FAULTY),
              ("PctkStorageBelowProvisioned", "")}
    deadline = time.monotonic() + 120
    while True:
        alerts = _get(f"{prom}/api/v1/alerts")["data"]["alerts"]
        seen = {(a["labels"]["alertname"], a["labels"].get("node", "")): a for a in alerts}
        if wanted <= set(seen) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert wanted <= set(seen), sorted(seen)
    drained = seen[("PctkNodeDrained", FAULTY)]
    assert drained["state"] in ("pending", "firing")
    assert drained["labels"]["check"] == "gpu_devices"
    assert drained["annotations"]["summary"] == f"{FAULTY} drained by pctk (gpu_devices failed)"
    assert not any(name == "PctkNodeDrained" and node != FAULTY for name, node in seen)
