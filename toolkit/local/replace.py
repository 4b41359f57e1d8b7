"""Static node replacement, as ParallelCluster's clustermgtd replaces an unhealthy static node.

clustermgtd sets the node DOWN with ``Static node maintenance: unhealthy node is being
replaced`` (Slurm requeues its jobs at once), terminates the instance and launches another
that takes the node's name. On the twin: the node goes DOWN with that reason, its slurmd and
the processes of its jobs are killed by pid (the instance is terminated: a requeued job's first
run does not go on beside its second), a new slurmd starts after the boot delay and the node
returns to service.
"""

from __future__ import annotations

import time
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.local import power
from toolkit.slurm import error_line, node_states, slurmd_start_times, update_nodes

REASON = "Static node maintenance: unhealthy node is being replaced"
UNEXPECTED_REBOOT = "Node unexpectedly rebooted"
SETTLE_S = 2.0  # seconds after a new slurmd's start before the node is resumed


def replace(state_dir: Path, node: str) -> None:
    cfg = power.load_config(state_dir)
    nodes = cfg.get("nodes") or {}
    if node not in nodes:
        raise PctkError(f"no node {node!r} on this twin", "see `pctk local status`")
    if "-st-" not in node:
        raise PctkError(f"{node} is a dynamic node: ParallelCluster replaces static nodes",
                        "a dynamic node is powered down after ScaledownIdletime instead")
    env = power.env_of(cfg)
    r = update_nodes([node], env=env, State="DOWN", Reason=REASON)
    if r.returncode != 0:
        raise PctkError(f"scontrol could not set {node} down: {error_line(r)}",
                        "is the twin running? (`pctk local status`)")
    power.event(state_dir, node, "replacing", REASON)
    power.crash_node(state_dir, node)
    power.spawn_detached(state_dir, "relaunch", [node], env)


def relaunch(state_dir: Path, nodes: list[str], env: dict[str, str]) -> None:
    """The new instance boots, its slurmd registers, the node returns to service."""
    cfg = power.load_config(state_dir)
    time.sleep(float(cfg.get("boot_delay", power.DEFAULT_BOOT_DELAY)))
    conf = Path(str(cfg.get("slurm_conf") or state_dir / "etc" / "slurm.conf"))
    started = float(int(time.time()))  # SlurmdStartTime has whole seconds
    for n in nodes:
        p = power.start_slurmd(state_dir, n, env, conf, booted=True)
        power.event(state_dir, n, "relaunched", f"slurmd pid {p.pid}")
    # A node an operator set DOWN does not return by itself (ReturnToService=1): resume it,
    # but only once its new slurmd has registered, and not in the second it started.
    # A RESUME of a DOWN node asks the node to register again; slurmctld takes the boot time
    # as (its clock - the uptime the node reports), whole seconds apart, so it can come out a
    # second later than the first registration's. When that is after the node's last
    # response (set by the RESUME), the node is IDLE with a boot slurmctld did not ask for
    # and it goes DOWN "Node unexpectedly rebooted" for good. Both races need a host slow at
    # the wrong moment; a loaded test host shows each.
    deadline = time.monotonic() + 60
    waiting = list(nodes)
    resumed: dict[str, int] = {}
    while waiting and time.monotonic() < deadline:
        seen = slurmd_start_times(waiting, env=env)
        fresh = [n for n in waiting
                 if seen.get(n, 0.0) >= started and time.time() >= seen[n] + SETTLE_S]
        if fresh and update_nodes(fresh, env=env, State="RESUME").returncode == 0:
            waiting = [n for n in waiting if n not in fresh]
            resumed.update({n: 1 for n in fresh})
            continue
        time.sleep(0.5)
    for n in waiting:
        power.event(state_dir, n, "resume failed", "its new slurmd did not register in 60 s")
    _keep_resumed(state_dir, resumed, env)


def _keep_resumed(state_dir: Path, resumed: dict[str, int], env: dict[str, str]) -> None:
    """The boot was ours: a node slurmctld still sets DOWN "Node unexpectedly rebooted" while
    it takes the node back is resumed again (3 resumes in all at most). Watched until it has
    answered (no ``*``) for 3 s, within 20 s."""
    deadline = time.monotonic() + 20
    answered: dict[str, float] = {}
    while resumed and time.monotonic() < deadline:
        time.sleep(1)
        states = node_states(env=env)
        for n in list(resumed):
            state, reason = states.get(n, ("", ""))
            if state.startswith("down") and reason == UNEXPECTED_REBOOT:
                answered.pop(n, None)
                if resumed[n] >= 3:
                    power.event(state_dir, n, "resume failed", f"still DOWN: {reason}")
                    del resumed[n]
                    continue
                resumed[n] += 1
                update_nodes([n], env=env, State="RESUME")
                power.event(state_dir, n, "resumed again", f"slurmctld said: {reason}")
            elif state and not state.endswith("*") and not state.startswith("down"):
                if time.monotonic() - answered.setdefault(n, time.monotonic()) >= 3:
                    del resumed[n]
            else:
                answered.pop(n, None)
