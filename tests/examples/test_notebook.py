"""The example notebook runs top to bottom in a real Jupyter kernel against the twin."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

from toolkit.local.twin import Twin
from toolkit.results.store import ResultStore

pytestmark = pytest.mark.twin

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "submit_from_notebook.ipynb"


def _twin_view(twin, jobs: Path) -> str:
    """slurmctld's view of the jobs and nodes, and the end of every job log under ``jobs``."""
    out = [twin.cmd("squeue", "-h", "-o", "%i %j %T %r %N", check=False).stdout,
           twin.cmd("sinfo", "-h", "-N", "-o", "%N %T %E", check=False).stdout]
    for log in sorted(jobs.rglob("*.out")) + sorted(jobs.rglob("*.err")):
        lines = log.read_text(errors="replace").splitlines()[-8:]
        out.append(f"--- {log.relative_to(jobs)}\n" + "\n".join(lines))
    return "\n".join(out)


def test_notebook_submits_watches_and_gathers(twin, tmp_path, monkeypatch):
    monkeypatch.setenv("PCTK_NOTEBOOK_JOBS", str(tmp_path / "jobs"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellTimeoutError as exc:  # say where it waited: the jobs, the nodes, the logs' ends
        raise AssertionError(f"{exc}\n{_twin_view(twin, tmp_path / 'jobs')}") from None
    outputs = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    )
    assert str(twin.state_dir) in outputs  # it found the twin
    assert "('cpu', 'c5.4xlarge')" in outputs  # the queue without GPUs, picked from the config
    assert "seed 7: score" in outputs and "cpu-dy-c5-" in outputs
    assert "[1.0, 1.0]" in outputs
    errors = [o for cell in nb.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    # runs clean: no warnings and nothing on stderr (the progress bar is plain stdout text)
    stderr = [o.get("text", "") for cell in nb.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "stream" and o.get("name") == "stderr"]
    assert stderr == []
    assert "Warning" not in outputs
    assert "jobs" in outputs and "8/8" in outputs  # the final progress line


# Two configs of a user's own, not presets: a CPU-only cluster, and a p4d training cluster
# whose CPU queue has a well-formed type the catalog lacks (facts unknown). Static nodes: no
# boot to wait for.
CPU_ONLY = """\
Region: us-east-1
Image: {Os: alinux2023}
HeadNode: {InstanceType: m5.2xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmSettings:
    Database:
      Uri: "db:3306"
      UserName: slurm
      PasswordSecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb"
  SlurmQueues:
    - Name: work
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.2xlarge, MinCount: 2, MaxCount: 2}
"""
P4D = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: m5.8xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmSettings:
    Database:
      Uri: "db:3306"
      UserName: slurm
      PasswordSecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb"
  SlurmQueues:
    - Name: train
      Networking: {SubnetIds: [subnet-0123456789abcdef0], PlacementGroup: {Enabled: true}}
      ComputeResources:
        - {Name: p4d, InstanceType: p4d.24xlarge, MinCount: 2, MaxCount: 2,
           Efa: {Enabled: true}}
    - Name: tools
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c8i, InstanceType: c8i.4xlarge, MinCount: 2, MaxCount: 2}
"""


@pytest.mark.parametrize(("name", "text", "picked", "node"), [
    ("nb-cpu", CPU_ONLY, "('work', 'c5.2xlarge')", "work-st-c5-"),
    ("nb-p4d", P4D, "('tools', 'c8i.4xlarge')", "tools-st-c8i-"),
])
def test_notebook_runs_with_other_configs(name, text, picked, node, tmp_path, monkeypatch):
    """docs/submission.md promises the notebook runs unchanged with any config (it failed in cell 2
    with AttributeError on a type the catalog lacked)."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    state = Path(tempfile.mkdtemp(prefix=f"pctk-{name}-", dir="/tmp"))
    twin = Twin(state)
    twin.up(config, nodes=2)
    try:
        for k, v in twin.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("PCTK_NOTEBOOK_JOBS", str(tmp_path / "jobs"))
        nb, outputs = _run(tmp_path)
        errors = [f"{o.get('ename')}: {o.get('evalue')}" for cell in nb.cells
                  for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert errors == []
        assert picked in outputs
        assert "seed 7: score" in outputs and node in outputs
        assert "[1.0, 1.0]" in outputs  # two nodes, one rank each
    finally:
        twin.down(purge=True)


def _run(cwd: Path) -> tuple[nbformat.NotebookNode, str]:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    outputs = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    )
    return nb, outputs


STUDY_NOTEBOOK = NOTEBOOK.parent / "scaling_and_plan.ipynb"


def test_notebook_runs_a_scaling_study_and_a_plan_from_python(twin, tmp_path, monkeypatch):
    """examples/scaling_and_plan.ipynb top to bottom: the study stores its three records in
    the results database (the test's own), draws its plots, and the plan reads one of them.
    The notebook is kept without outputs."""
    saved = nbformat.read(STUDY_NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in saved.cells if c.cell_type == "code")
    monkeypatch.setenv("PCTK_NOTEBOOK_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("PCTK_RESULTS_DB", str(tmp_path / "results.db"))
    client = NotebookClient(saved, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for cell in saved.cells if cell.cell_type == "code" for o in cell.get("outputs", []))
    errors = [o for cell in saved.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == [], errors
    assert "bottleneck: twin-shared-cpu" in outputs
    assert "1 node(s):" in outputs and "2 node(s):" in outputs
    assert "stored: 3 records" in outputs
    assert any("image/png" in o.get("data", {}) for cell in saved.cells
               for o in cell.get("outputs", []))
    assert "recommend 130 nodes: the fewest nodes that finish within --days 30" in outputs
    assert "local twin" in outputs  # the plan set the twin's MFU aside and said so
    with ResultStore(tmp_path / "results.db", writer=False) as store:
        assert sorted(r["kind"] for r in store.list()) == ["fsdp", "fsdp", "scaling"]
