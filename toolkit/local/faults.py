"""Degrade one twin node on purpose: a slow link (``tc``) or a slow CPU (cgroup cpu quota).

Real clusters lose whole-job speed to one bad node; the twin can hold one so the slow-node
sweep and the straggler report are tested against real mechanisms on real processes:

- ``slow-net NODE --rate R``: an ``htb`` class of rate R on ``lo`` with a ``u32`` filter on
  the node's own destination address (each twin node has one, see ``plan.node_address``).
  Only packets *to* that address are shaped; unclassified traffic bypasses htb unshaped, so
  every other node (and every other twin) keeps full speed. ``netem``/``flower`` are not
  used: many sandboxed kernels lack them (the error lists what the kernel offers).
- ``slow-storage NODE --rate R --path P``: the node's slurmd (and the jobs it starts) goes
  into its own block-I/O cgroup that limits reads and writes to the disk holding P to R bytes
  per second (cgroup v1 ``blkio.throttle.*_bps_device`` or cgroup v2 ``io.max``). cgroup v1
  throttles only I/O the process issues itself (direct I/O, and the writes an ``fsync``
  flushes; checkpoints fsync their files), not page-cache writeback: that is enough to make a
  checkpoint save slow, as an overloaded shared file system does.
- ``slow-cpu NODE --cpus F``: the node's slurmd goes into its own cpu cgroup with a CFS quota
  of F CPUs. The twin runs ``proctrack/linuxproc`` (no Slurm cgroups), so every slurmstepd
  and job task the slurmd forks from then on is born in that cgroup and shares the quota;
  processes of jobs already running are moved in too. cgroup v1 ``cpu.cfs_quota_us`` or
  cgroup v2 ``cpu.max``, whichever the host has.

State lives in ``faults.json`` in the twin's folder, keyed by kind (one fault per kind);
``clear`` (and ``pctk local down``) undoes every fault recorded there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit.errors import PctkError
from toolkit.local import capacity, faultfile, power, procs, state

KINDS = ("slow-net", "slow-cpu", "slow-storage")
CGROUP_ROOT = Path(os.environ.get("PCTK_CGROUP_ROOT", "/sys/fs/cgroup"))
DEV = "lo"
_RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$", re.IGNORECASE)
# a short period spreads the quota evenly (1 ms, the smallest quota, is then 0.05 CPU)
CFS_PERIOD_US = 20_000


def active(state_dir: Path) -> dict[str, dict[str, Any]]:
    """The faults recorded for this twin, keyed by kind."""
    data = faultfile.read(state_dir)
    return {k: v for k, v in data.items() if k in KINDS and isinstance(v, dict)}


def _save(state_dir: Path, faults: dict[str, dict[str, Any]]) -> None:
    """Write this module's kinds; other kinds in the file (armed ICE faults) stay."""
    with faultfile.faults(state_dir) as data:
        for kind in KINDS:
            data.pop(kind, None)
        data.update(faults)


# ---------------------------------------------------------------- twin facts
def node_addresses(state_dir: Path) -> dict[str, str]:
    """Node name -> its address (:func:`toolkit.local.power.node_addresses`, the one source)."""
    out = power.node_addresses(state_dir)
    if not out:
        raise PctkError(f"no twin configuration in {state_dir}", "start it with `pctk local up`")
    return out


def _slurmd_pid(state_dir: Path, node: str) -> int:
    # the slurmd the twin (static nodes) or its power programs (dynamic nodes) started
    if (rec := power.recorded_slurmd(state_dir, node)) is not None and procs.is_running(rec):
        return rec.pid
    st = state.load(state_dir)
    for p in st.procs if st else []:
        if p.name == f"slurmd:{node}" and Path(f"/proc/{p.pid}").exists():
            return p.pid
    raise PctkError(f"the slurmd of {node} is not running",
                    "start the twin (`pctk local up`); a powered-down dynamic node (idle~) "
                    "runs once a job needs it")


def _check_node(state_dir: Path, node: str) -> str:
    addrs = node_addresses(state_dir)
    if node not in addrs:
        raise PctkError(f"{node} is not a node of the twin in {state_dir}",
                        f"nodes: {', '.join(sorted(addrs)) or 'none'}")
    return addrs[node]


# ---------------------------------------------------------------- tc
_held: list[bool] = []


@contextlib.contextmanager
def _tc_lock() -> Iterator[None]:
    """lo's qdisc tree is shared by every twin on the machine: change it one at a time.

    Re-entrant within this process (an error message probes what the kernel offers)."""
    if _held:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "pctk-tc.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held.append(True)
        try:
            yield
        finally:
            _held.clear()
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        r = subprocess.run(["tc", *args], capture_output=True, text=True, timeout=15)
    except FileNotFoundError:
        raise PctkError("tc not found", "apt-get install -y iproute2 (or `make deps`)") from None
    if check and r.returncode != 0:
        said = ((r.stderr or r.stdout).strip().splitlines() or ["failed"])[0][:160]
        raise PctkError(f"tc {' '.join(args)}: {said}",
                        "shaping needs root and a kernel with htb and u32: "
                        f"{tc_support_line()}")
    return r


def tc_support() -> dict[str, bool]:
    with _tc_lock():
        return _probe_tc()


def _probe_tc() -> dict[str, bool]:
    """Which qdiscs and filters this kernel offers, probed on ``lo`` without touching traffic.

    Probes hang under a scratch htb class that no packet is sent to (the u32/flower probes
    match 127.255.255.254, an address nothing uses), and are removed again; lo's own traffic
    passes the root htb unclassified, as with no qdisc at all.
    """
    kinds: dict[str, bool] = {}
    made_root = "qdisc htb 1: root" not in _tc("qdisc", "show", "dev", DEV, check=False).stdout
    if made_root and _tc("qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb",
                         check=False).returncode != 0:
        return {"htb": False}
    kinds["htb"] = True
    scratch = "1:fffe"
    _tc("class", "add", "dev", DEV, "parent", "1:", "classid", scratch, "htb", "rate", "1mbit",
        check=False)
    for kind in ("netem", "tbf", "prio", "fq_codel"):
        extra = ["rate", "1mbit", "burst", "32k", "latency", "50ms"] if kind == "tbf" else []
        r = _tc("qdisc", "add", "dev", DEV, "parent", scratch, "handle", "fffe:", kind, *extra,
                check=False)
        kinds[kind] = r.returncode == 0
        _tc("qdisc", "del", "dev", DEV, "parent", scratch, check=False)
    for filt, match in (("u32", ["match", "ip", "dst", "127.255.255.254/32"]),
                        ("flower", ["dst_ip", "127.255.255.254"])):
        r = _tc("filter", "add", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", "65534",
                filt, *match, "flowid", scratch, check=False)
        kinds[filt] = r.returncode == 0
        _tc("filter", "del", "dev", DEV, "parent", "1:", "prio", "65534", check=False)
    _tc("class", "del", "dev", DEV, "classid", scratch, check=False)
    if made_root and not _tc("class", "show", "dev", DEV, check=False).stdout.strip():
        _tc("qdisc", "del", "dev", DEV, "root", check=False)
    return kinds


def tc_support_line() -> str:
    try:
        s = tc_support()
    except PctkError:
        return "tc is missing"
    have = [k for k, v in s.items() if v]
    lack = [k for k, v in s.items() if not v]
    return f"this kernel offers {', '.join(have) or 'none'}; lacks {', '.join(lack) or 'none'}"


def _ensure_root_htb() -> None:
    shown = _tc("qdisc", "show", "dev", DEV).stdout
    if "qdisc htb 1: root" in shown:
        return
    if "root" in shown and "noqueue" not in shown:
        raise PctkError(f"{DEV} already has a root qdisc not made by pctk: {shown.strip()[:120]}",
                        f"remove it: tc qdisc del dev {DEV} root")
    # no `default`: unclassified traffic goes straight through htb, unshaped
    r = _tc("qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb", check=False)
    if r.returncode != 0:
        raise PctkError(f"cannot add an htb qdisc on {DEV}: {r.stderr.strip()[:160]}",
                        f"slow-net needs root, htb and u32 filters; {tc_support_line()}")


def _minor(addr: str) -> int:
    """htb class minor (and filter prio) from the address: unique per running twin node."""
    c, d = (int(x) for x in addr.split(".")[2:])
    return min(0xFFFD, max(2, (c << 8) | d))  # 0xfffe: tc_support's scratch class


def shape(addr: str, rate: str) -> dict[str, Any]:
    with _tc_lock():
        return _shape(addr, rate)


def _shape(addr: str, rate: str) -> dict[str, Any]:
    minor = _minor(addr)
    _ensure_root_htb()
    classid = f"1:{minor:x}"
    _tc("class", "add", "dev", DEV, "parent", "1:", "classid", classid, "htb", "rate", rate,
        "ceil", rate)
    r = _tc("filter", "add", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", str(minor),
            "u32", "match", "ip", "dst", f"{addr}/32", "flowid", classid, check=False)
    if r.returncode != 0:
        _tc("class", "del", "dev", DEV, "classid", classid, check=False)
        raise PctkError(f"cannot add a u32 filter on {DEV}: {r.stderr.strip()[:160]}",
                        f"slow-net needs a u32 filter; {tc_support_line()}")
    return {"addr": addr, "rate": rate, "classid": classid, "prio": minor, "dev": DEV}


def unshape(fault: dict[str, Any]) -> None:
    with _tc_lock():
        _unshape(fault)


def _unshape(fault: dict[str, Any]) -> None:
    dev = str(fault.get("dev", DEV))
    _tc("filter", "del", "dev", dev, "parent", "1:", "prio", str(fault["prio"]), check=False)
    _tc("class", "del", "dev", dev, "classid", str(fault["classid"]), check=False)
    # the root htb goes when no class is left (another twin may still shape its own node)
    if not _tc("class", "show", "dev", dev, check=False).stdout.strip():
        _tc("qdisc", "del", "dev", dev, "root", check=False)


# ---------------------------------------------------------------- cgroups
def cgroup_layout() -> tuple[str, Path]:
    """("v1", <cpu controller mount>) or ("v2", <unified root>); PctkError when neither."""
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        return "v1", v1
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2", CGROUP_ROOT
    raise PctkError(f"no cgroup cpu controller under {CGROUP_ROOT}",
                    "slow-cpu needs cgroup v1 `cpu` (cfs quota) or cgroup v2 `cpu.max`")


def _node_pids(slurmd_pid: int, node: str) -> list[int]:
    """The node's slurmd and everything it started, with the jobs running on the node.

    slurmstepd daemonizes (its parent is init, not the slurmd), so a running job is found by
    its processes' environment, the twin's SLURM_CONF and the node's SLURMD_NODENAME (two twins
    may name a node alike); their slurmstepd, the parent, goes too, so that the job's later
    steps are born in the group."""
    children: dict[int, list[int]] = {}
    comm: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split(" (", 1)[1].rsplit(")", 1)
        comm[int(d.name)] = name
        children.setdefault(int(rest.split()[1]), []).append(int(d.name))
    roots = [slurmd_pid]
    try:
        argv = Path(f"/proc/{slurmd_pid}/cmdline").read_bytes().split(b"\0")
        conf = argv[argv.index(b"-f") + 1]
    except (OSError, ValueError, IndexError):
        conf = b""
    want = {b"SLURM_CONF=" + conf, b"SLURMD_NODENAME=" + node.encode()}
    for parent, kids in children.items() if conf else ():
        for pid in kids:
            try:
                env = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
            except OSError:
                continue
            if want <= env:
                roots.append(parent if comm.get(parent) == "slurmstepd" else pid)
    out: set[int] = set()
    todo = roots
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, []))
    return sorted(out)


_move = faultfile.move_pids


def throttle(state_dir: Path, node: str, cpus: float) -> dict[str, Any]:
    version, base = cgroup_layout()
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"pctk-{state_dir.name}-{node}")
    group = base / name
    try:
        group.mkdir(exist_ok=True)
        quota = int(cpus * CFS_PERIOD_US)
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text(f"{CFS_PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        else:
            (group / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}\n")
    except OSError as exc:
        raise PctkError(f"cannot set a cpu quota in {group}: {exc.strerror}",
                        "slow-cpu needs root and a writable cgroup cpu controller") from None
    # the slurmd, the jobs already running on the node (slurmstepd daemonizes: they are not
    # its descendants, _node_pids finds them) and what it forks later, born in the group
    _move(group / "cgroup.procs", _node_pids(_slurmd_pid(state_dir, node), node))
    return {"cgroup": str(group), "version": version, "cpus": cpus, "quota_us": quota,
            "period_us": CFS_PERIOD_US}


def unthrottle(fault: dict[str, Any]) -> None:
    group = Path(str(fault["cgroup"]))
    parent = group.parent
    try:
        pids = [int(x) for x in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return
    _move(parent / "cgroup.procs", pids)
    with contextlib.suppress(OSError):  # a process raced in: the next clear removes it
        group.rmdir()


# ---------------------------------------------------------------- block I/O
_IO_RATE = re.compile(r"^(\d+)(k|m|g)?b?$", re.IGNORECASE)


def parse_io_rate(text: str) -> int:
    """``1m``, ``512k``, ``2mb``, ``1048576`` -> bytes per second (powers of 1024)."""
    m = _IO_RATE.match(text.strip())
    if not m or int(m.group(1)) < 1:
        raise PctkError(f"--rate {text!r} is not a byte rate",
                        "use bytes per second, e.g. 1m, 512k or 1048576")
    return int(m.group(1)) << {"k": 10, "m": 20, "g": 30}.get((m.group(2) or "").lower(), 0)


def block_device(path: Path) -> str:
    """``major:minor`` of the whole disk holding ``path`` (a partition's parent)."""
    try:
        dev = path.stat().st_dev
    except OSError as exc:
        raise PctkError(f"cannot stat {path}: {exc.strerror}", "give an existing folder") \
            from None
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.major(dev) == 0 or not sys_dev.exists():
        raise PctkError(f"{path} is not on a block device (tmpfs, overlay or a network file "
                        "system)", "give a folder on a local disk with --path")
    if (sys_dev / "partition").exists():
        return (sys_dev.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


def io_throttle(state_dir: Path, node: str, rate: int, path: Path) -> dict[str, Any]:
    device = block_device(path)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"pctk-{state_dir.name}-{node}-io")
    v1 = CGROUP_ROOT / "blkio"
    try:
        if (v1 / "blkio.throttle.write_bps_device").exists():
            version, group = "v1", v1 / name
            group.mkdir(exist_ok=True)
            for what in ("read", "write"):
                (group / f"blkio.throttle.{what}_bps_device").write_text(f"{device} {rate}\n")
        elif "io" in (CGROUP_ROOT / "cgroup.controllers").read_text().split():
            version, group = "v2", CGROUP_ROOT / name
            group.mkdir(exist_ok=True)
            (group / "io.max").write_text(f"{device} rbps={rate} wbps={rate}\n")
        else:
            raise OSError(0, "no io controller")
    except OSError as exc:
        raise PctkError(f"cannot set a block I/O limit under {CGROUP_ROOT}: {exc.strerror}",
                        "slow-storage needs root and cgroup v1 blkio or cgroup v2 io") from None
    _move(group / "cgroup.procs", _node_pids(_slurmd_pid(state_dir, node), node))
    return {"cgroup": str(group), "version": version, "device": device, "path": str(path),
            "bytes_per_s": rate}


# ---------------------------------------------------------------- commands
def slow_net(state_dir: Path, node: str, rate: str) -> dict[str, Any]:
    if not _RATE.match(rate):
        raise PctkError(f"--rate {rate!r} is not a tc rate",
                        "use a number with bit, kbit, mbit, gbit or bps, kbps, mbps (bytes/s)")
    addr = _check_node(state_dir, node)
    if addr == "127.0.0.1":
        raise PctkError(f"{node} shares 127.0.0.1 with every node: its link cannot be shaped alone",
                        "start the twin as root (each node then gets its own address)")
    faults = active(state_dir)
    if "slow-net" in faults:
        unshape(faults.pop("slow-net"))
    fault = {"node": node, **shape(addr, rate)}
    faults["slow-net"] = fault
    _save(state_dir, faults)
    return fault


def slow_cpu(state_dir: Path, node: str, cpus: float) -> dict[str, Any]:
    if not 0.05 <= cpus <= 64:
        raise PctkError(f"--cpus {cpus} is out of range", "give a fraction of a CPU, 0.05-64")
    _check_node(state_dir, node)
    faults = active(state_dir)
    if "slow-cpu" in faults:
        unthrottle(faults.pop("slow-cpu"))
    fault = {"node": node, **throttle(state_dir, node, cpus)}
    faults["slow-cpu"] = fault
    _save(state_dir, faults)
    return fault


def slow_storage(state_dir: Path, node: str, rate: str, path: Path) -> dict[str, Any]:
    bps = parse_io_rate(rate)
    _check_node(state_dir, node)
    block_device(path.resolve())  # refused before an active fault is undone
    faults = active(state_dir)
    if "slow-storage" in faults:
        unthrottle(faults.pop("slow-storage"))
    fault = {"node": node, **io_throttle(state_dir, node, bps, path.resolve())}
    faults["slow-storage"] = fault
    _save(state_dir, faults)
    return fault


def clear(state_dir: Path) -> list[str]:
    """Undo every recorded fault; returns the kinds removed."""
    faults = active(state_dir)
    for kind, fault in faults.items():
        if kind == "slow-net":
            unshape(fault)
        elif kind in ("slow-cpu", "slow-storage"):
            unthrottle(fault)
    if faults or faultfile.exists(state_dir):
        _save(state_dir, {})
    return sorted([*faults, *(["ice"] if capacity.clear(state_dir) else [])])
