"""Capacity faults: `pctk local fault ice QUEUE/CR` makes the next power-up of that compute
resource fail as an insufficient-capacity launch does on ParallelCluster.

There, ``slurm_resume`` sets the nodes it could not launch DOWN with the reason
``(Code:InsufficientInstanceCapacity)Failure when resuming nodes`` (Slurm requeues their
jobs), clustermgtd disables the compute resource's other powered-down nodes with
``(Code:InsufficientInstanceCapacity)Temporarily disabling node due to insufficient
capacity`` (``down~``) and, after ``insufficient_capacity_timeout`` (600 s; the twin divides it
by TIME_FACTOR), powers them all down again (``idle~``) so the next job may try. The twin's
ResumeProgram (:mod:`toolkit.local.programs`) asks :func:`fail_launches` before booting.

Faults live in ``<state>/faults.json`` (:mod:`toolkit.local.faultfile`), one key per fault
kind (``ice`` here).
"""

from __future__ import annotations

import time
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.local import pcslurm, power
from toolkit.local.faultfile import faults
from toolkit.slurm import node_states, update_nodes

KIND = "ice"
CODE = "InsufficientInstanceCapacity"
FAILED_REASON = f"(Code:{CODE})Failure when resuming nodes"
DISABLED_REASON = f"(Code:{CODE})Temporarily disabling node due to insufficient capacity"
# ParallelCluster's insufficient_capacity_timeout (clustermgtd), on the twin's clock
DEFAULT_TIMEOUT = 600 / pcslurm.TIME_FACTOR


def arm(state_dir: Path, resource: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """The next power-up of ``QUEUE/CR`` fails with InsufficientInstanceCapacity."""
    known = set((power.load_config(state_dir).get("nodes") or {}).values())
    if resource not in known:
        raise PctkError(f"no compute resource {resource!r} on this twin",
                        f"give QUEUE/COMPUTE_RESOURCE, one of: {', '.join(sorted(known))}")
    if timeout <= 0:
        raise PctkError(f"--timeout must be positive (got {timeout:g})")
    with faults(state_dir) as data:
        ice = data.setdefault(KIND, {})
        ice[resource] = {"timeout": timeout, "armed": time.time()}


def clear(state_dir: Path) -> list[str]:
    """Disarm every ICE fault not yet triggered; returns the compute resources."""
    with faults(state_dir) as data:
        ice = data.pop(KIND, {}) or {}
    return sorted(ice)


def armed(state_dir: Path) -> list[str]:
    with faults(state_dir) as data:
        return sorted(data.get(KIND) or {})


def fail_launches(state_dir: Path, resources: dict[str, str], env: dict[str, str]) -> set[str]:
    """The nodes of this power-up that an armed ICE fault makes fail (the fault is used up)."""
    with faults(state_dir) as data:
        ice = data.get(KIND) or {}
        hit = {cr: ice.pop(cr) for cr in set(resources.values()) if cr in ice}
        if not ice:
            data.pop(KIND, None)
    if not hit:
        return set()
    failed = {n for n, cr in resources.items() if cr in hit}
    update_nodes(sorted(failed), env=env, State="DOWN", Reason=FAILED_REASON)
    all_nodes = power.load_config(state_dir).get("nodes") or {}
    states = node_states(env=env)
    idle_off = sorted(n for n, cr in all_nodes.items() if cr in hit and n not in failed
                      and states.get(n, ("", ""))[0].endswith("~"))
    if idle_off:
        update_nodes(idle_off, env=env, State="DOWN", Reason=DISABLED_REASON)
    for n in sorted(failed):
        power.event(state_dir, n, "power-up failed", FAILED_REASON)
    timeout = max(float(h.get("timeout", DEFAULT_TIMEOUT)) for h in hit.values())
    power.spawn_detached(state_dir, "recover", [str(timeout), *sorted(failed), *idle_off], env)
    return failed


def recover(state_dir: Path, args: list[str], env: dict[str, str]) -> None:
    """After the timeout: the nodes go back to powered down (``idle~``), as clustermgtd does."""
    timeout, nodes = float(args[0]), args[1:]
    time.sleep(timeout)
    if nodes:
        update_nodes(nodes, env=env, State="POWER_DOWN_FORCE")
        for n in nodes:
            power.event(state_dir, n, "capacity back", "powered down, may launch again")
