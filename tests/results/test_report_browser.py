"""The report as a new user sees it, in headless Chromium at 1280 px.

The store mixes the hardware history of ``records.fill_store`` with what a first hour on the
twin leaves: CPU training runs without MFU (no published peak for the device), a 16-node
health sweep with long node names and many checks, and an nccl-tests run judged against the
catalog. Checked in the browser: no horizontal overflow at 1280 px, every plot drawn with
data, the overall verdict at the top, twin runs marked. The screenshot is copied to
``out/test-artifacts/report-1280.png``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record import new_record
from toolkit.results.report import CSP, write_report
from toolkit.results.store import ResultStore

from . import records
from .test_report import ARTIFACTS, chromium, console_lines, png_size, run_chromium

TWIN = {"name": "demo", "instance_type": "p5.48xlarge", "nodes": 2, "hosts": [],
        "partition": "gpu", "job_id": "7", "twin": True}
LONG_NODES = [f"gpu-training-queue-st-p5-48xlarge-efa-{i}" for i in range(1, 17)]
CHECKS = ["gpu_count", "gpu_memory", "nvlink_topology", "efa_devices", "efa_provider",
          "xid_errors", "ecc_errors", "pcie_link_width", "clock_throttle", "mounts",
          "nccl_version", "aws_ofi_nccl"]
PROBE = """<script>
addEventListener('load', () => {
  const pre = document.createElement('pre');
  pre.id = 'pctk-probe';
  const banner = document.getElementById('verdict');
  pre.textContent = JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth,
    banner: banner ? banner.textContent : null,
    bannerTop: banner ? banner.getBoundingClientRect().top : null,
    images: Array.from(document.images, i => ({alt: i.alt, width: i.naturalWidth,
      height: i.naturalHeight, points: Number(i.dataset.points)})),
    nodeHeaderHeights: Array.from(document.querySelectorAll('th.node'),
      th => th.getBoundingClientRect().height)});
  document.body.appendChild(pre);
});
</script>"""


def twin_fsdp(tokens: float, created: str) -> dict[str, Any]:
    metrics = {"tokens_per_s_per_gpu": tokens, "mfu": None, "peak_tflops": None,
               "step_time_p50_s": 0.21, "losses": [[s, 7.0 - 0.05 * s] for s in range(1, 21)]}
    rec = new_record("fsdp", params={"model": "tiny"}, metrics=metrics, status="PASS",
                     cluster=dict(TWIN, partition="cpu", instance_type="c5.4xlarge"))
    rec["created"] = created
    return rec


def twin_health() -> dict[str, Any]:
    nodes = {node: {check: {"status": "OK", "message": "ok"} for check in CHECKS}
             for node in LONG_NODES}
    nodes[LONG_NODES[3]]["xid_errors"] = {"status": "WARN", "message": "dmesg not readable"}
    rec = new_record("health", params={"checks": CHECKS}, metrics={"nodes": nodes},
                     status="WARN", reasons=["WARN: xid_errors: dmesg not readable"],
                     cluster=dict(TWIN, nodes=16))
    rec["created"] = "2026-01-06T09:00:00Z"
    return rec


def twin_nccl() -> dict[str, Any]:
    rec = records.nccl_record(created="2026-01-06T08:00:00Z", name="demo")
    rec["cluster"]["twin"] = True
    return rec


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report-browser")
    # records made here must not pick up a running twin's Slurm config (the session twin
    # exports SLURM_CONF): only the records built as twin runs are twin runs
    with pytest.MonkeyPatch.context() as mp, ResultStore(folder / "results.db") as store:
        mp.delenv("SLURM_CONF", raising=False)
        records.fill_store(store)
        store.add(twin_fsdp(410.0, "2026-01-06T10:00:00Z"))
        store.add(twin_fsdp(432.0, "2026-01-06T10:40:00Z"))
        store.add(twin_health())
        store.add(twin_nccl())
        return write_report(store, folder / "report.html")


def test_report_html_has_verdict_twin_marks_expectations_and_no_empty_mfu(report: Path
                                                                           ) -> None:
    text = report.read_text()
    banner = re.search(r'<div class="banner (\w+)" id="verdict">(.*?)</div>', text, re.S)
    assert banner, "no verdict banner"
    assert banner[1] == "FAIL"  # the failing GPU node of train-a
    assert text.index('id="verdict"') < text.index("<h2>")  # at the top
    # latest of each kind and cluster: train-a's nccl (busbw drop: WARN), collectives, fsdp,
    # health (FAIL); train-b's fsdp; demo's fsdp, health (WARN) and nccl
    assert "Overall: FAIL" in banner[2]
    assert "latest run of each kind and cluster: 5 PASS, 2 WARN, 1 FAIL" in banner[2]
    assert "3 of them on the local twin" in banner[2]
    shown = html.unescape(re.sub(r"<[^>]+>", "", banner[2]))
    assert "FAIL: health on train-a / p5.48xlarge — gpu-st-p5-2 gpu_count: FAIL 7 of 8 GPUs " \
        "visible" in shown
    assert "WARN: nccl-tests on train-a / p5.48xlarge — all_reduce: WARN: busbw" in shown
    assert text.count('class="twin"') >= 4  # summary, interconnect, training, health
    assert "no MFU for demo / c5.4xlarge: no peak for this device" in text
    # the demo runs have no MFU: their training plot is tokens/s alone, not an empty panel
    assert 'alt="tokens per second per GPU and MFU over time"' in text  # train-a/b have MFU
    # each busbw plot names the catalog figure it was judged against
    assert re.search(r'alt="all_reduce busbw [^"]*judged against catalog 487.1 GB/s at &gt;= '
                     r'16 GiB \(S8a\)"', text)
    points = [int(p) for p in re.findall(r'data-points="(\d+)"', text)]
    assert points and all(p > 0 for p in points)


def test_report_in_chromium_at_1280_px(report: Path, tmp_path: Path) -> None:
    binary = chromium()
    if binary is None:
        pytest.skip("chromium not installed (apt-get install -y chromium); report not rendered")
    shot = tmp_path / "report.png"
    run = run_chromium(binary, tmp_path, "--window-size=1280,5200", f"--screenshot={shot}",
                       report.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    assert png_size(shot.read_bytes()) == (1280, 5200)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report-1280.png")

    probe = tmp_path / "probe.html"
    text = report.read_text().replace(CSP, CSP + "; script-src 'unsafe-inline'")
    probe.write_text(text.replace("<head>", "<head>" + PROBE, 1))
    run = run_chromium(binary, tmp_path, "--window-size=1280,900", "--dump-dom",
                       probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="pctk-probe">(.*?)</pre>', run.stdout, re.S)
    assert found, "the probe did not run: page load did not finish"
    page = json.loads(html.unescape(found[1]))
    assert page["scrollWidth"] <= 1280, f"horizontal overflow: {page['scrollWidth']} px"
    assert page["banner"] and page["banner"].startswith("Overall: FAIL")
    assert page["bannerTop"] < 200  # seen without scrolling
    assert len(page["images"]) >= 6
    for image in page["images"]:
        assert image["width"] > 0 and image["height"] > 0 and image["points"] > 0, image
    # node names on one line: every node header is one text line high
    heights = page["nodeHeaderHeights"]
    assert heights and max(heights) < 2 * min(heights), heights
