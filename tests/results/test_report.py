"""The HTML report: self-contained, and it renders in headless Chromium.

What the Chromium test checks: the unmodified report loads with no console message at all
(Chromium logs console output, CSP violations and uncaught errors as ``CONSOLE`` lines on
stderr with ``--enable-logging=stderr``; the report has no script, so any such line is a
fault); a copy with a probe script (and ``script-src 'unsafe-inline'`` added to its CSP)
reports every image's natural size after load through ``--dump-dom``. The screenshot is
kept in the test's tmp dir and copied to ``out/test-artifacts/report.png``.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from toolkit.results.report import CSP, write_report
from toolkit.results.store import ResultStore

from . import records

ARTIFACTS = Path(__file__).resolve().parents[2] / "out" / "test-artifacts"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"]
PROBE = """<script>
window.__faults = [];
addEventListener('error', e => __faults.push('error: ' + (e.message ||
  (e.target && e.target.outerHTML || '').slice(0, 120))), true);
document.addEventListener('securitypolicyviolation',
  e => __faults.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI));
addEventListener('load', () => {
  const pre = document.createElement('pre');
  pre.id = 'pctk-probe';
  pre.textContent = JSON.stringify({faults: __faults, images: Array.from(document.images,
    i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))});
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str | None:
    for name in (os.environ.get("PCTK_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "google-chrome-stable"):
        if name and (path := shutil.which(name)):
            return path
    return None


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    with ResultStore(folder / "results.db") as store:
        records.fill_store(store)
        return write_report(store, folder / "out" / "report.html")


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text()
    assert f'content="{CSP}"' in text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!data:)[a-z]+://""", text)
    sources = re.findall(r'<img src="([^"]+)"', text)
    # all_reduce, all_gather, reduce_scatter, training, loss; then one trend plot per series
    # with 2+ runs: all_reduce busbw; tokens/s, MFU and checkpoint GB/s on each of two clusters
    assert len(sources) == 12
    for uri in sources:
        prefix, payload = uri.split(",", 1)
        assert prefix == "data:image/png;base64"
        width, height = png_size(base64.b64decode(payload))
        assert width > 100 and height > 100
    for fact in ("train-a / p5.48xlarge", "train-b / p4d.24xlarge", "2.23.4",
                 'class="FAIL" title="7 of 8 GPUs visible', "-15.0%", "tokens_per_s_per_gpu"):
        assert fact in text, fact
    assert stat.S_IMODE(report.stat().st_mode) == 0o644
    assert [p.name for p in report.parent.iterdir()] == ["report.html"]


def test_empty_database_still_gives_a_report(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "empty.db") as store:
        text = write_report(store, tmp_path / "r.html").read_text()
    assert "no results in the database" in text and "<img" not in text


def run_chromium(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180, check=False)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    binary = chromium()
    if binary is None:
        pytest.skip("chromium not installed (apt-get install -y chromium); report not rendered")

    shot = tmp_path / "report.png"
    run = run_chromium(binary, tmp_path, "--window-size=1280,4200",
                       f"--screenshot={shot}", report.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    width, height = png_size(shot.read_bytes())
    assert (width, height) == (1280, 4200) and shot.stat().st_size > 50_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report.png")

    probe = tmp_path / "probe.html"
    text = report.read_text().replace(CSP, CSP + "; script-src 'unsafe-inline'")
    probe.write_text(text.replace("<head>", "<head>" + PROBE, 1))
    run = run_chromium(binary, tmp_path, "--dump-dom", probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    found = re.search(r'<pre id="pctk-probe">(.*?)</pre>', run.stdout, re.S)
    assert found, "the probe did not run: page load did not finish"
    result = json.loads(html.unescape(found[1]))
    assert result["faults"] == []
    assert len(result["images"]) == 12  # 5 of the latest runs, 7 trend plots
    for image in result["images"]:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
