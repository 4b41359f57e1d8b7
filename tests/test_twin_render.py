"""The twin's rendered Slurm files, against golden files, for fixed ports and paths.

Regenerate after an intended change with: python tests/regen_golden.py (never from a test).
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from toolkit.config.model import load_topology
from toolkit.local.plan import Ports, build_plan
from toolkit.local.render import render_gres_conf, render_slurm_conf, render_slurmdbd_conf
from toolkit.paths import list_presets, preset_path

GOLDEN = Path(__file__).parent / "golden"
FIXED = {
    "ports": Ports(6817, 6819, 3306, 6900),
    "hostname": "headnode",
    "host": (2, 24000),
    "user": "slurm",
    # the host name resolves to 127.0.0.1: the daemons bind there alone
    "host_address": "127.0.0.1",
    # each node on its own address (the twin's default where it runs as root)
    "node_addresses": True,
}


def _plan(preset: str, nodes: int | None = None):
    topo = load_topology(preset_path(preset))
    # a stable config path in the golden file, wherever the repo is checked out
    # (the config's own settings kept: JobExclusiveAllocation, SlurmSettings...)
    topo = dataclasses.replace(topo, source=f"cluster-configs/{preset}.yaml")
    return build_plan(topo, Path("/var/lib/pctk/twin"), FIXED["ports"], nodes_per_resource=nodes,
                      hostname=FIXED["hostname"], host=FIXED["host"], user=FIXED["user"],
                      host_address=FIXED["host_address"],
                      node_addresses=FIXED["node_addresses"])


RENDERED = {
    "p5-training.slurm.conf": lambda: render_slurm_conf(_plan("p5-training")),
    "p5-training.gres.conf": lambda: render_gres_conf(_plan("p5-training")),
    "p5-training.slurmdbd.conf": lambda: render_slurmdbd_conf(_plan("p5-training"), "secret"),
}


def golden_files() -> dict[Path, str]:
    """What tests/regen_golden.py writes: each golden file and its rendering now."""
    return {GOLDEN / name: render() for name, render in RENDERED.items()}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_file_matches_golden(name: str) -> None:
    path = GOLDEN / name
    assert path.exists(), f"golden file {path} missing: run python tests/regen_golden.py"
    assert RENDERED[name]() == path.read_text()


def test_p5_plan_mirrors_parallelcluster_names_and_gpus():
    plan = _plan("p5-training")
    assert dict(plan.partitions) == {
        "gpu": tuple(f"gpu-st-p5-{i}" for i in range(1, 5)),
        "cpu": tuple(f"cpu-dy-c5-{i}" for i in range(1, 9)),  # the config's MaxCount
    }
    gpu = plan.nodes[0]
    assert gpu.gres == "gpu:h100:8" and gpu.gpu_count == 8
    assert gpu.cpus == 8  # one task per GPU fits even on a 2-core host
    cpu = next(n for n in plan.nodes if n.partition == "cpu")
    assert cpu.gres is None and cpu.cpus == 2
    assert len({n.port for n in plan.nodes}) == len(plan.nodes)


def test_nodes_cap_keeps_static_nodes_first():
    plan = _plan("p5-training", nodes=2)
    assert [n.name for n in plan.nodes] == ["gpu-st-p5-1", "gpu-st-p5-2",
                                           "cpu-dy-c5-1", "cpu-dy-c5-2"]
    assert "capped: gpu/p5 has 2 of its 4 nodes (--nodes 2)" in plan.notes


@pytest.mark.parametrize("preset", list_presets())
def test_every_preset_can_be_mirrored(preset):
    topo = load_topology(preset_path(preset))
    plan = _plan(preset, nodes=2)
    assert [p for p, _ in plan.partitions] == [q.name for q in topo.queues]
    conf = render_slurm_conf(plan)
    for q in topo.queues:
        assert f"PartitionName={q.name} " in conf
    for n in plan.nodes:
        assert n.name.startswith(f"{n.partition}-st-") or n.name.startswith(f"{n.partition}-dy-")


def _custom_config(tmp_path, settings: str) -> Path:
    cfg = tmp_path / "custom.yaml"
    cfg.write_text(
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmSettings:\n"
        f"    CustomSlurmSettings:\n{settings}"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 0, MaxCount: 2}\n"
    )
    return cfg


def test_custom_slurm_settings_are_mirrored_except_what_the_twin_manages(tmp_path):
    cfg = _custom_config(tmp_path, "      - MaxArraySize: 10\n      - SlurmctldPort: 1\n"
                                   "      - AuthInfo: socket=/x\n")
    plan = build_plan(load_topology(cfg), Path("/var/lib/pctk/twin"), FIXED["ports"],
                      hostname="h", host=(2, 4096), user="slurm", host_address="127.0.0.1")
    conf = render_slurm_conf(plan)
    assert "\nMaxArraySize=10\n" in conf
    assert "SlurmctldPort=1\n" not in conf and "AuthInfo=socket=/x" not in conf
    assert sum("managed by the twin" in n for n in plan.notes) == 2


@pytest.mark.parametrize("bad", ["      - MaxArraySize: \"10\\nSlurmUser=evil\"\n",
                                 "      - {Bad Key: 1}\n", "      - MaxArraySize: [1, 2]\n"])
def test_custom_slurm_settings_cannot_inject_lines(tmp_path, bad):
    from toolkit.errors import PctkError

    with pytest.raises(PctkError, match="CustomSlurmSettings"):
        load_topology(_custom_config(tmp_path, bad))


def test_daemons_bind_loopback_only_when_the_host_name_resolves_there():
    plan = _plan("p5-training")
    assert plan.loopback_only
    assert ("\nCommunicationParameters=NoAddrCache,NoInAddrAny,NoCtldInAddrAny\n"
            in render_slurm_conf(plan))
    dbd = render_slurmdbd_conf(plan, "secret")
    assert "\nDbdAddr=127.0.0.1\nCommunicationParameters=NoInAddrAny\n" in dbd


# 127.0.1.1 (Debian's entry for the host name) is loopback too, but a step's tasks reach
# srun from 127.0.0.1, so srun listening on 127.0.1.1 alone would hang every step
@pytest.mark.parametrize("resolved", ["10.0.3.7", "127.0.1.1", ""])
def test_any_other_host_address_binds_all_and_says_why(resolved):
    topo = load_topology(preset_path("p5-training"))
    plan = build_plan(topo, Path("/var/lib/pctk/twin"), FIXED["ports"], hostname="h",
                      host=(2, 4096), user="slurm", host_address=resolved)
    assert not plan.loopback_only
    # ParallelCluster's NoAddrCache alone: no bind to the host name's address
    assert "\nCommunicationParameters=NoAddrCache\n" in render_slurm_conf(plan)
    assert "CommunicationParameters" not in render_slurmdbd_conf(plan, "x")
    assert any("listen on every interface" in n and "127.0.0.1 in /etc/hosts" in n
               for n in plan.notes)


def test_communication_parameters_are_managed_by_the_twin(tmp_path):
    cfg = _custom_config(tmp_path, "      - CommunicationParameters: block_null_hash\n")
    plan = build_plan(load_topology(cfg), Path("/var/lib/pctk/twin"), FIXED["ports"],
                      hostname="h", host=(2, 4096), user="slurm", host_address="127.0.0.1")
    assert "block_null_hash" not in render_slurm_conf(plan)


def _settings(conf: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in conf.splitlines():
        if line and not line.startswith("#") and "=" in line and " " not in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def test_parallelcluster_settings_are_rendered_except_the_listed_deviations():
    from toolkit.local import pcslurm

    plan = _plan("p5-training")
    conf = _settings(render_slurm_conf(plan))
    deviating = pcslurm.deviating_keys(plan.loopback_only)
    for key, value in pcslurm.PARALLELCLUSTER_FIXED:
        if key in deviating:
            assert conf[key] != value, f"{key} is listed as a deviation but is not one"
        else:
            assert conf[key] == value, f"{key}: {conf.get(key)} is not ParallelCluster's {value}"
    # every deviation carries its reason, and docs/twin.md lists every setting it changes
    twin_doc = (Path(__file__).parents[1] / "docs" / "twin.md").read_text()
    for d in pcslurm.DEVIATIONS:
        assert d.reason and d.twin and d.parallelcluster
        for key in d.keys:
            assert f"`{key}`" in twin_doc, f"docs/twin.md does not list the deviation {key}"
    # the stated factor, and the loopback fix combined with ParallelCluster's NoAddrCache
    assert conf["SlurmdTimeout"] == str(180 // pcslurm.TIME_FACTOR)
    assert conf["KillWait"] == str(30 // pcslurm.TIME_FACTOR)
    # ParallelCluster's scheduler flag kept, Slurm's 3 s batching delay scaled down to none
    assert conf["SchedulerParameters"] == "nohold_on_prolog_fail,batch_sched_delay=0"
    assert conf["CommunicationParameters"] == "NoAddrCache,NoInAddrAny,NoCtldInAddrAny"
    assert conf["MessageTimeout"] == "60" and conf["MinJobAge"] == "300"


def test_slurm_settings_of_the_config_shape_the_file(tmp_path):
    cfg = tmp_path / "mem.yaml"
    cfg.write_text(
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmSettings:\n"
        "    ScaledownIdletime: 3\n"
        "    EnableMemoryBasedScheduling: true\n"
        "    QueueUpdateStrategy: TERMINATE\n"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 3}\n"
        "DevSettings:\n  Timeouts:\n    ComputeNodeBootstrapTimeout: 600\n"
    )
    plan = build_plan(load_topology(cfg), Path("/var/lib/pctk/twin"), FIXED["ports"],
                      hostname="h", host=(2, 4096), user="slurm", host_address="127.0.0.1")
    assert plan.slurm.scaledown_idletime == 3 and plan.slurm.suspend_time == 30
    assert plan.slurm.resume_timeout == 100
    text = render_slurm_conf(plan)
    conf = _settings(text)
    assert conf["SelectTypeParameters"] == "CR_CPU_Memory"
    assert "QueueUpdateStrategy=TERMINATE" in text


def test_a_bad_scaledown_idletime_is_one_line(tmp_path):
    from toolkit.errors import PctkError

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("Scheduling:\n  Scheduler: slurm\n  SlurmSettings: {ScaledownIdletime: 0}\n"
                   "  SlurmQueues:\n    - Name: q\n      ComputeResources:\n"
                   "        - {Name: c5, InstanceType: c5.4xlarge, MaxCount: 1}\n")
    with pytest.raises(PctkError, match="ScaledownIdletime"):
        build_plan(load_topology(cfg), Path("/x"), FIXED["ports"], hostname="h",
                   host=(2, 4096), user="u", host_address="127.0.0.1")


def test_each_node_gets_its_own_address_and_host_name():
    plan = _plan("p5-training")
    addrs = [n.addr for n in plan.nodes]
    assert len(set(addrs)) == len(addrs) and "127.0.0.1" not in addrs
    conf = render_slurm_conf(plan)
    for n in plan.nodes:
        assert all(a.startswith("127.0.") for a in addrs)
        assert f"NodeName={n.name} NodeHostname={n.host} NodeAddr={n.addr} Port={n.port} " in conf
    # the loopback-only binding stays: NoInAddrAny makes each slurmd bind its host name's address
    assert "CommunicationParameters=NoAddrCache,NoInAddrAny,NoCtldInAddrAny" in conf


def test_without_own_addresses_every_node_shares_loopback_and_says_so():
    topo = load_topology(preset_path("p5-training"))
    plan = build_plan(topo, Path("/x"), FIXED["ports"], hostname="h", host=(2, 4096),
                      user="slurm", host_address="127.0.0.1", node_addresses=False)
    assert {n.addr for n in plan.nodes} == {"127.0.0.1"}
    assert "NodeHostname=h NodeAddr=127.0.0.1" in render_slurm_conf(plan)
    assert any("slow-net` is unavailable" in n for n in plan.notes)


# ---- queue and compute-resource settings, each as ParallelCluster renders it
# Expected lines are ParallelCluster's own (aws-parallelcluster-cookbook, test/unit/slurm/
# test_slurm_config_generator/*/expected_outputs): the twin's line must carry the same
# attributes, except what the twin sets itself (pcslurm.DEVIATIONS: NodeHostname, NodeAddr,
# Port, CPUs, RealMemory) and the NodeSet that ParallelCluster names instead of the nodes.
TWIN_ONLY = {"NodeHostname", "NodeAddr", "Port", "CPUs", "RealMemory", "Nodes", "NodeName",
             "PartitionName"}


def _queues_config(tmp_path, queues: str) -> Path:
    cfg = tmp_path / "queues.yaml"
    cfg.write_text("Scheduling:\n  Scheduler: slurm\n  SlurmQueues:\n" + queues)
    return cfg


def _render(tmp_path, queues: str, host=(2, 4096)) -> str:
    plan = build_plan(load_topology(_queues_config(tmp_path, queues)), Path("/x"),
                      FIXED["ports"], hostname="h", host=host, user="slurm",
                      host_address="127.0.0.1", node_addresses=False)
    return render_slurm_conf(plan)


def _attrs(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split())


def _line(conf: str, head: str) -> str:
    found = [ln for ln in conf.splitlines() if ln.startswith(head + " ")]
    assert found, f"no line {head} in\n{conf}"
    return found[0]


def _same_as_parallelcluster(twin_line: str, pc_line: str) -> None:
    twin = {k: v for k, v in _attrs(twin_line).items() if k not in TWIN_ONLY}
    pc = {k: v for k, v in _attrs(pc_line).items() if k not in TWIN_ONLY}
    assert twin == pc, f"twin:            {twin_line}\nParallelCluster: {pc_line}"


def _queue(name: str, extra: str = "", cr: str = "{Name: cr-1, InstanceType: c5.4xlarge, "
           "MinCount: 0, MaxCount: 2}") -> str:
    return f"    - Name: {name}\n{extra}      ComputeResources:\n        - {cr}\n"


@pytest.mark.parametrize("setting, pc_line", [
    # test_generate_slurm_config_with_job_exc_alloc: queue_jls_{enabled,disabled,default}
    ("      JobExclusiveAllocation: true\n", "PartitionName=q Nodes=q_nodes MaxTime=INFINITE "
                                             "State=UP Default=YES OverSubscribe=EXCLUSIVE"),
    ("      JobExclusiveAllocation: false\n", "PartitionName=q Nodes=q_nodes MaxTime=INFINITE "
                                              "State=UP Default=YES"),
    ("", "PartitionName=q Nodes=q_nodes MaxTime=INFINITE State=UP Default=YES"),
])
def test_job_exclusive_allocation_as_parallelcluster_renders_it(tmp_path, setting, pc_line):
    _same_as_parallelcluster(_line(_render(tmp_path, _queue("q", setting)), "PartitionName=q"),
                             pc_line)


def test_only_the_first_queue_is_the_default_partition(tmp_path):
    conf = _render(tmp_path, _queue("first") + _queue("second"))
    _same_as_parallelcluster(_line(conf, "PartitionName=first"),
                             "PartitionName=first Nodes=first_nodes MaxTime=INFINITE State=UP "
                             "Default=YES")
    # test_generate_slurm_config_with_custom_settings: a queue after the first
    _same_as_parallelcluster(_line(conf, "PartitionName=second"),
                             "PartitionName=second Nodes=second_nodes MaxTime=INFINITE State=UP")


def test_queue_custom_slurm_settings_as_parallelcluster_renders_them(tmp_path):
    custom = ("      CustomSlurmSettings:\n        CustomEfaParam: unique_efa_value\n"
              "        OtherEfaParam: second_efa_value\n")
    conf = _render(tmp_path, _queue("first") + _queue("efa", custom))
    _same_as_parallelcluster(_line(conf, "PartitionName=efa"),
                             "PartitionName=efa Nodes=efa_nodes MaxTime=INFINITE State=UP "
                             "CustomEfaParam=unique_efa_value OtherEfaParam=second_efa_value")


def test_compute_resource_settings_as_parallelcluster_renders_them(tmp_path):
    # test_generate_slurm_config_with_custom_settings, queue efa (Efa, DisableSMT, custom,
    # priorities, MinCount/MaxCount); CPUs are ParallelCluster's on a host with cores to spare
    cr = ("{Name: efa-c5n, InstanceType: p5.48xlarge, MinCount: 1, MaxCount: 5, "
          "DisableSimultaneousMultithreading: true, Efa: {Enabled: true}, "
          "StaticNodePriority: 1, DynamicNodePriority: 1000, CustomSlurmSettings: "
          "{CustomEfaComputeParam: unique_efa_compute_value, "
          "OtherEfaComputeParam: second_efa_compute_value}}")
    conf = _render(tmp_path, _queue("efa", cr=cr), host=(256, 1 << 20))
    custom = ("CustomEfaComputeParam=unique_efa_compute_value "
              "OtherEfaComputeParam=second_efa_compute_value")
    gres = "Gres=gpu:h100:8"
    _same_as_parallelcluster(
        _line(conf, "NodeName=efa-st-efa-c5n-1"),
        f"NodeName=efa-st-efa-c5n-[1-1] CPUs=96 RealMemory=1 State=CLOUD "
        f"Feature=static,p5.48xlarge,efa-c5n,efa,gpu Weight=1 {gres} {custom}")
    for i in range(1, 5):
        _same_as_parallelcluster(
            _line(conf, f"NodeName=efa-dy-efa-c5n-{i}"),
            f"NodeName=efa-dy-efa-c5n-[1-4] CPUs=96 RealMemory=1 State=CLOUD "
            f"Feature=dynamic,p5.48xlarge,efa-c5n,efa,gpu Weight=1000 {gres} {custom}")
    assert "NodeName=efa-dy-efa-c5n-5 " not in conf  # MaxCount 5 = 1 static + 4 dynamic
    # DisableSimultaneousMultithreading: 192 vCPUs / 2 threads per core
    assert _attrs(_line(conf, "NodeName=efa-st-efa-c5n-1"))["CPUs"] == "96"


def test_node_priorities_are_the_nodes_weights(tmp_path):
    cr = ("{Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 2, "
          "StaticNodePriority: 7, DynamicNodePriority: 20}")
    conf = _render(tmp_path, _queue("q", cr=cr))
    assert _attrs(_line(conf, "NodeName=q-st-c5-1"))["Weight"] == "7"
    assert _attrs(_line(conf, "NodeName=q-dy-c5-1"))["Weight"] == "20"


def test_several_instance_types_name_no_instance_type_feature(tmp_path):
    # test_generating_slurm_config_flexible_instance_types, queue1: cr1 has three types
    cr = ("{Name: cr1, Instances: [{InstanceType: c5.4xlarge}, {InstanceType: c5.9xlarge}], "
          "MinCount: 1, MaxCount: 2}")
    conf = _render(tmp_path, _queue("queue1", cr=cr))
    _same_as_parallelcluster(_line(conf, "NodeName=queue1-st-cr1-1"),
                             "NodeName=queue1-st-cr1-[1-2] CPUs=16 RealMemory=40857 "
                             "State=CLOUD Feature=static,cr1 Weight=1")
    # one type in Instances: named, as queue1's cr2
    one = "{Name: cr2, Instances: [{InstanceType: c5.4xlarge}], MinCount: 0, MaxCount: 1}"
    _same_as_parallelcluster(_line(_render(tmp_path, _queue("queue1", cr=one)),
                                   "NodeName=queue1-dy-cr2-1"),
                             "NodeName=queue1-dy-cr2-[1-10] CPUs=16 RealMemory=40857 "
                             "State=CLOUD Feature=dynamic,c5.4xlarge,cr2 Weight=1000")


def test_every_queue_setting_listed_has_a_test_here():
    from toolkit.local import pcslurm

    text = Path(__file__).read_text()
    for s in pcslurm.QUEUE_SETTINGS:
        leaf = s.path.rsplit(".", 1)[-1].split("/")[0].removeprefix("SlurmQueues")
        assert leaf in text, f"{s.path} has no test in {__file__}"


def test_custom_settings_of_twin_managed_attributes_are_not_applied(tmp_path):
    q = _queue("q", "      CustomSlurmSettings: {Nodes: ALL, MaxNodes: 4}\n",
               cr="{Name: c5, InstanceType: c5.4xlarge, MaxCount: 1, "
                  "CustomSlurmSettings: {Port: 1, CoreSpecCount: 1}}")
    plan = build_plan(load_topology(_queues_config(tmp_path, q)), Path("/x"), FIXED["ports"],
                      hostname="h", host=(2, 4096), user="slurm", host_address="127.0.0.1")
    conf = render_slurm_conf(plan)
    assert _attrs(_line(conf, "PartitionName=q"))["MaxNodes"] == "4"
    assert "Nodes=ALL" not in conf and "Port=1 " not in conf
    assert _attrs(_line(conf, "NodeName=q-dy-c5-1"))["CoreSpecCount"] == "1"
    assert sum("managed by the twin; not applied" in n for n in plan.notes) == 2


@pytest.mark.parametrize("custom", ["{MaxNodes: 4 State=DOWN}", "{MaxNodes: \"4\\nX=1\"}",
                                    "{Bad Key: 1}", "[MaxNodes]"])
def test_queue_custom_settings_cannot_add_attributes_or_lines(tmp_path, custom):
    from toolkit.errors import PctkError

    q = _queue("q", f"      CustomSlurmSettings: {custom}\n")
    with pytest.raises(PctkError, match="CustomSlurmSettings"):
        _render(tmp_path, q)


def test_min_count_above_max_count_is_said_when_forced(tmp_path):
    q = _queue("q", cr="{Name: c5, InstanceType: c5.4xlarge, MinCount: 4, MaxCount: 2}")
    plan = build_plan(load_topology(_queues_config(tmp_path, q)), Path("/x"), FIXED["ports"],
                      hostname="h", host=(2, 4096), user="slurm", host_address="127.0.0.1")
    assert [n.name for n in plan.nodes] == ["q-st-c5-1", "q-st-c5-2"]
    assert "q/c5: MinCount 4 is above MaxCount 2 (ParallelCluster refuses it): 2 static nodes" \
        in plan.notes


def test_first_job_id_follows_the_release_and_pctk_twin_first_job_id(monkeypatch):
    from toolkit.errors import PctkError
    from toolkit.local.plan import RELEASE_FIRST_JOB_ID, first_job_id

    def first(plan) -> list[str]:
        return [ln for ln in render_slurm_conf(plan).splitlines() if ln.startswith("FirstJobId")]

    monkeypatch.delenv("PCTK_TWIN_FIRST_JOB_ID", raising=False)
    assert first_job_id("") == 0 and first(_plan("p5-training")) == []
    assert first_job_id("24.11") == RELEASE_FIRST_JOB_ID
    monkeypatch.setenv("PCTK_TWIN_FIRST_JOB_ID", "501")
    assert first_job_id("") == first_job_id("24.11") == 501
    plan = dataclasses.replace(_plan("p5-training"), first_job_id=first_job_id(""))
    assert first(plan) == ["FirstJobId=501"]
    for bad in ("0", "-3", "1e3", "12 ", "٣", "", str(0x3FFFFFF + 1)):
        monkeypatch.setenv("PCTK_TWIN_FIRST_JOB_ID", bad)
        with pytest.raises(PctkError, match="PCTK_TWIN_FIRST_JOB_ID"):
            first_job_id("")


def test_daemon_ports_stay_out_of_the_jobs_rendezvous_ports(monkeypatch):
    """Jobs listen on 20000 + id mod 12000 (batch scripts) and 20000 + (7 id + step) mod 12000
    (benchmarks/distenv.py) on every address: no twin daemon may sit in that range, and the
    range stays below the kernel's ephemeral ports (32768 up), which an outgoing connection
    may hold as its source port while a rank binds."""
    import socket

    from benchmarks.distenv import default_master_port
    from toolkit.local.plan import PORT_BLOCKS, choose_ports
    from toolkit.submit.jobspec import RDZV_PORT_SHELL

    job_ports = set()
    for job in (1, 972, 2857, 6001, 10001, 11999, 12000, 19999, 67108863):
        job_ports.add(int(subprocess.run(["bash", "-c", f"echo {RDZV_PORT_SHELL}"],
                                         env={"SLURM_JOB_ID": str(job)}, capture_output=True,
                                         text=True, check=True).stdout))
        for step in (0, 1, 7):
            monkeypatch.setenv("SLURM_JOB_ID", str(job))
            monkeypatch.setenv("SLURM_STEP_ID", str(step))
            job_ports.add(default_master_port())
    assert min(job_ports) == 20000 and max(job_ports) == 31999
    assert max(job_ports) < 32768  # Linux's default ip_local_port_range starts there
    for block in PORT_BLOCKS:
        for base in block:
            assert not set(range(base, base + 200)) & set(range(20000, 32000)), base
    monkeypatch.delenv("PCTK_TWIN_PORT_BASE", raising=False)
    first = choose_ports(8)
    assert 10000 <= first.slurmctld < 20000
    # a taken port pushes the twin to the next free block, still outside the jobs' range
    with socket.socket() as s:
        # as the daemons bind: a port another twin left in TIME_WAIT is still free to them
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", first.slurmctld))
        s.listen()
        other = choose_ports(8)
    assert other.slurmctld != first.slurmctld
    assert not 20000 <= other.slurmctld < 32000


def test_pctk_twin_port_base_is_a_port_with_room_for_the_block(monkeypatch):
    from toolkit.errors import PctkError
    from toolkit.local.plan import port_base

    monkeypatch.delenv("PCTK_TWIN_PORT_BASE", raising=False)
    assert port_base(8) is None
    monkeypatch.setenv("PCTK_TWIN_PORT_BASE", "41000")
    assert port_base(8) == 41000
    monkeypatch.setenv("PCTK_TWIN_PORT_BASE", "65523")  # 11 ports: 65523-65533
    assert port_base(8) == 65523
    for bad in ("", "abc", "4e4", " 41000", "٤١٠٠٠", "1023", "65524", "70000"):
        monkeypatch.setenv("PCTK_TWIN_PORT_BASE", bad)
        with pytest.raises(PctkError, match="PCTK_TWIN_PORT_BASE"):
            port_base(8)
