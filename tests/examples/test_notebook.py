"""The example notebook runs top to bottom in a real Jupyter kernel against the twin."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.twin

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "submit_from_notebook.ipynb"


def test_notebook_submits_watches_and_gathers(twin, tmp_path, monkeypatch):
    monkeypatch.setenv("PCTK_NOTEBOOK_JOBS", str(tmp_path / "jobs"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
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
