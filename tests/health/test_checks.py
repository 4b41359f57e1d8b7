"""Node-side checks and driver helpers without Slurm: parsers, statuses, faults on files."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from benchmarks.health.__main__ import main as node_main
from benchmarks.health.context import NodeContext, build_context, load_thresholds
from benchmarks.health.efa import check_efa, efa_domains
from benchmarks.health.gpu_devices import check_gpu_devices
from benchmarks.health.gpu_nvml import model_matches
from benchmarks.health.gres import node_gpu_files
from benchmarks.health.perf import dcgm_failures, parse_nccl_tests_busbw
from benchmarks.health.runner import drain_reason
from benchmarks.health.status import nagios_code
from benchmarks.health.storage import check_storage
from benchmarks.health.tools import Tools
from benchmarks.health.xid import parse_xids
from toolkit.health.expect import build_expectations, instance_expectations
from toolkit.health.inventory import HealthInputError, parse_sinfo, select_nodes

FI_INFO_EFA = "".join(
    f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-{kind}\n    version: 120.10\n"
    f"    type: FI_EP_{'RDM' if kind == 'rdm' else 'DGRAM'}\n    protocol: FI_PROTO_EFA\n"
    for i in range(4) for kind in ("rdm", "dgrm"))


def _ctx(tmp_path: Path, **kw) -> NodeContext:
    base = dict(node="n1", instance_type="p5.48xlarge",
                expect=instance_expectations("p5.48xlarge"), thresholds=load_thresholds(),
                mounts=[], tools=Tools([], "n1"), slurm_conf=str(tmp_path / "slurm.conf"))
    base.update(kw)
    return NodeContext(**base)


def _stand_in(folder: Path, name: str, script: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)


def test_nagios_codes_follow_the_worst_status():
    assert nagios_code(["OK", "SKIP"]) == 0
    assert nagios_code(["OK", "WARN"]) == 1
    assert nagios_code(["WARN", "FAIL", "OK"]) == 2
    assert nagios_code(["SKIP", "SKIP"]) == 3
    assert nagios_code([]) == 3


def test_drain_reason_names_the_first_failing_check():
    checks = {"node": {"status": "OK"}, "efa": {"status": "FAIL", "message": "0 of 32"},
              "storage": {"status": "FAIL", "message": "x"}}
    assert drain_reason(checks) == "pctk: efa: 0 of 32"
    assert drain_reason({"node": {"status": "WARN"}}) is None


def test_gres_conf_lines_for_this_node_with_includes(tmp_path):
    (tmp_path / "pc_gres.conf").write_text(
        "NodeName=gpu-st-p5-[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n"
        "NodeName=gpu-st-p4-1 Name=gpu Type=a100 File=/dev/nvidia[0-3]\n")
    conf = tmp_path / "gres.conf"
    conf.write_text("AutoDetect=off  # comment\ninclude pc_gres.conf\n")
    assert node_gpu_files(conf, "gpu-st-p5-2") == [f"/dev/nvidia{i}" for i in range(8)]
    assert node_gpu_files(conf, "gpu-st-p4-1") == [f"/dev/nvidia{i}" for i in range(4)]
    assert node_gpu_files(conf, "cpu-dy-c5-1") == []
    assert node_gpu_files(tmp_path / "absent.conf", "x") is None


def test_gpu_devices_fail_when_a_device_file_is_missing(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(8):
        os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (tmp_path / "gres.conf").write_text(f"NodeName=n1 Name=gpu File={dev}/nvidia[0-7]\n")
    ctx = _ctx(tmp_path)
    assert check_gpu_devices(ctx).status == "OK"
    (dev / "nvidia5").unlink()
    r = check_gpu_devices(ctx)
    assert r.status == "FAIL" and "1 of 8" in r.message and "nvidia5" in r.message
    # a regular file is not a device
    (dev / "nvidia5").write_text("")
    assert check_gpu_devices(ctx).status == "FAIL"


def test_gpu_devices_skip_on_a_cpu_node(tmp_path):
    ctx = _ctx(tmp_path, instance_type="c5.4xlarge", expect=instance_expectations("c5.4xlarge"))
    assert check_gpu_devices(ctx).status == "SKIP"


def test_efa_counts_devices_and_fails_without_the_provider(tmp_path):
    assert efa_domains(FI_INFO_EFA) == [f"rdmap{i}s0" for i in range(4)]
    good = tmp_path / "good"
    _stand_in(good, "fi_info", f"cat <<'X'\n{FI_INFO_EFA}X\n")
    r = check_efa(_ctx(tmp_path, tools=Tools([str(good)], "n1"),
                       expect={"efa_interfaces": 4}))
    assert (r.status, r.value, r.expected) == ("OK", 4, 4)
    r = check_efa(_ctx(tmp_path, tools=Tools([str(good)], "n1")))
    assert r.status == "FAIL" and r.message == "4 of 32 EFA devices"
    bad = tmp_path / "bad"
    _stand_in(bad, "fi_info", 'if [ "$1" = "-p" ]; then echo "fi_getinfo: -61 (No data '
              'available)" >&2; exit 1; fi\necho "tcp:"; echo "shm:"\n')
    r = check_efa(_ctx(tmp_path, tools=Tools([str(bad)], "n1")))
    assert r.status == "FAIL" and "no efa provider" in r.message and "tcp" in r.message


def test_efa_skips_without_fi_info_or_without_efa_on_the_type(tmp_path):
    empty = Tools([], "n1")
    empty.path = str(tmp_path)  # nothing to find
    assert check_efa(_ctx(tmp_path, tools=empty)).status == "SKIP"
    assert check_efa(_ctx(tmp_path, expect={"efa_interfaces": 0})).status == "SKIP"


def test_storage_faults_are_fail_with_the_path(tmp_path):
    good = tmp_path / "n1"
    good.mkdir()
    ok = check_storage(_ctx(tmp_path, mounts=[str(tmp_path / "%n")]))
    assert ok.status == "OK" and ok.value[0]["path"] == str(good)
    (tmp_path / "file").write_text("")
    r = check_storage(_ctx(tmp_path, mounts=[str(tmp_path / "file")]))
    assert r.status == "FAIL" and "not a folder" in r.message
    r = check_storage(_ctx(tmp_path, mounts=[str(tmp_path / "absent")]))
    assert r.status == "FAIL" and "missing" in r.message


def test_parsers_for_xid_nccl_tests_and_dcgm():
    log = ("[ 10.1] NVRM: Xid (PCI:0000:53:00): 79, pid=123, GPU has fallen off the bus.\n"
           "[ 11.0] NVRM: Xid (PCI:0000:64:00): 13, Graphics Exception\n")
    assert parse_xids(log) == [("PCI:0000:53:00", 79), ("PCI:0000:64:00", 13)]
    out = ("#  size  count type redop root  time algbw busbw #wrong  time algbw busbw #wrong\n"
           "  1073741824  268435456  float  sum  -1  5000  214.7  375.8  0  4990  215.1  376.5  0\n"
           "  2147483648  536870912  float  sum  -1  9000  238.6  417.5  0  9010  238.3  417.1  0\n"
           "# Avg bus bandwidth    : 396.7\n")
    assert parse_nccl_tests_busbw(out) == [(1073741824, 375.8), (2147483648, 417.5)]
    old = "   1048576  262144  float  sum  95.1  11.03  19.30  1e-06  94.9  11.05  19.34  1e-06\n"
    assert parse_nccl_tests_busbw(old) == [(1048576, 19.30)]
    report = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "Memory", "results": [{"gpu_id": "0", "status": "Fail"}]},
        {"name": "PCIe", "results": [{"status": "Warn"}]},
        {"name": "Software", "results": [{"status": "Pass"}]}]}]}}
    assert dcgm_failures(report) == (["Memory"], ["PCIe"])


def test_model_names_match_nvml_names():
    assert model_matches("H100", "NVIDIA H100 80GB HBM3")
    assert model_matches("A100-40GB", "NVIDIA A100-SXM4-40GB")
    assert not model_matches("A100-80GB", "NVIDIA A100-SXM4-40GB")
    assert not model_matches("H200", "NVIDIA H100 80GB HBM3")


def test_expectations_come_from_the_catalog():
    p5 = instance_expectations("p5.48xlarge")
    assert (p5["gpu_count"], p5["gpu_model"], p5["efa_interfaces"]) == (8, "H100", 32)
    # the node check does not pin NCCL's algorithm: the Ring figure, not NVLS's 480
    assert (p5["nccl_all_reduce_busbw_gbps"], p5["nccl_algo"]) == (370.0, "Ring")
    assert p5["gpu_memory_mib"] == 81920
    c5 = instance_expectations("c5.4xlarge")
    assert (c5["gpu_count"], c5["efa_interfaces"]) == (0, 0)
    spec = build_expectations(["p5.48xlarge"], nodes={"a": "p5.48xlarge"}, mounts=["/x"])
    assert list(spec["instance_types"]) == ["p5.48xlarge"] and spec["mounts"] == ["/x"]


def test_node_cli_writes_one_report_and_exits_with_nagios_codes(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps(build_expectations(["c5.4xlarge"], nodes={"n1": "c5.4xlarge"},
                                                    mounts=[str(tmp_path)])))
    out = tmp_path / "out"
    rc = node_main(["--node", "n1", "--expect", str(expect), "--out-dir", str(out),
                    "--checks", "gpu_devices,storage,disk"])
    report = json.loads((out / "n1.json").read_text())
    assert report["instance_type"] == "c5.4xlarge"
    assert [report["checks"][c]["status"] for c in ("gpu_devices", "storage")] == ["SKIP", "OK"]
    assert rc in (0, 1)  # disk space of this machine decides
    assert node_main(["--node", "n1", "--checks", "bogus"]) == 3


def test_node_cli_that_cannot_write_its_report_says_so_and_is_unknown(tmp_path, monkeypatch,
                                                                       capsys):
    from tests.health.faults import make_read_only, undo_read_only

    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    how = make_read_only(out)  # root ignores mode bits
    try:
        rc = node_main(["--node", "n1", "--mount", str(mnt), "--out-dir", str(out),
                        "--checks", "gpu_devices,storage"])
    finally:
        undo_read_only(out, how)
    captured = capsys.readouterr()
    assert rc == 3  # the folder is at fault, not this node
    assert captured.err.strip().startswith(f"pctk health: cannot write the report to {out}")
    assert json.loads(captured.out)["checks"]["storage"]["status"] == "OK"  # in the job output
    assert not list(out.iterdir())


SINFO = """\
gpu-st-p5-1|gpu*|idle|none|static,p5.48xlarge,p5,efa,gpu|gpu:h100:8|
gpu-st-p5-2|gpu*|idle+drain|pctk: efa: 0 of 32 EFA devices|static,p5.48xlarge,p5,efa,gpu|gpu:h100:8|
gpu-st-p5-3|gpu*|down+not_responding|Not responding|static,p5.48xlarge,p5,efa,gpu|gpu:h100:8|
cpu-dy-c5-1|cpu|idle+cloud+powered_down|none|dynamic,c5.4xlarge,c5|(null)|
"""


def test_sinfo_parsing_and_node_states():
    nodes = parse_sinfo(SINFO)
    assert nodes["gpu-st-p5-1"].responsive and not nodes["gpu-st-p5-1"].drained
    assert nodes["gpu-st-p5-1"].gpu_count == 8
    assert nodes["gpu-st-p5-1"].instance_type == "p5.48xlarge"
    assert nodes["gpu-st-p5-2"].drained_by_pctk and nodes["gpu-st-p5-2"].responsive
    assert not nodes["gpu-st-p5-3"].responsive and nodes["gpu-st-p5-3"].reason == "Not responding"
    assert nodes["cpu-dy-c5-1"].powered_down and nodes["cpu-dy-c5-1"].gpu_count == 0


def test_selection_errors_list_the_real_names():
    nodes = parse_sinfo(SINFO)
    assert [n.name for n in select_nodes(nodes, "gpu-st-p5-[1-2]")] == ["gpu-st-p5-1",
                                                                       "gpu-st-p5-2"]
    assert len(select_nodes(nodes, partition="gpu")) == 3
    with pytest.raises(HealthInputError, match=r"unknown partition 'gpx'.*here: gpu, cpu"):
        select_nodes(nodes, partition="gpx")
    with pytest.raises(HealthInputError, match=r"unknown node: gpu-st-p5-9.*nodes here: cpu-dy"):
        select_nodes(nodes, "gpu-st-p5-9")
    with pytest.raises(HealthInputError) as err:
        select_nodes(nodes, "cpu-dy-c5-1", partition="gpu")
    assert err.value.exit_code == 3


def test_health_run_bad_partition_is_one_line_and_nagios_unknown(capsys, monkeypatch, tmp_path):
    from toolkit.cli import main

    stand_in = tmp_path / "bin"
    _stand_in(stand_in, "sinfo", f"cat <<'X'\n{SINFO}X\n")
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "run", "--partition", "nope"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pctk: error: unknown partition 'nope'; fix: partitions here: gpu, cpu"]


@pytest.mark.skipif(sys.platform != "linux", reason="statvfs paths")
def test_build_context_reads_munge_socket_and_node_map(tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nAuthInfo=socket=/run/x/munge.sock\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    expect = tmp_path / "e.json"
    expect.write_text(json.dumps(build_expectations(["p5.48xlarge"],
                                                    nodes={"a": "p5.48xlarge"})))
    ctx = build_context(node="a", expect_file=str(expect))
    assert ctx.munge_socket == "/run/x/munge.sock"
    assert ctx.instance_type == "p5.48xlarge" and ctx.expect["gpu_count"] == 8
    assert ctx.mounts == ["/fsx", "/home"]
