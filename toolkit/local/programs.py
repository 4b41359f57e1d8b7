"""The programs slurmctld runs for the twin's power saving (ResumeProgram, SuspendProgram,
ResumeFailProgram: ``<state>/bin/pctk-resume`` and ``pctk-suspend`` run
``python -m toolkit.local.programs VERB STATE_DIR HOSTLIST``), and the detached helpers they
leave behind (``boot``, ``recover``, ``relaunch``). Each verb is a few lines over the modules
that do the work: :mod:`toolkit.local.power` (a node's slurmd, events, the power settings),
:mod:`toolkit.local.capacity` (ICE faults), :mod:`toolkit.local.replace` (static node
replacement). Nothing imports this module.
"""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit.local import capacity, power, replace
from toolkit.slurm import expand_hostlist


def resume(state_dir: Path, hostlist: str) -> None:
    cfg = power.load_config(state_dir)
    env = power.env_of(cfg)
    nodes = expand_hostlist(hostlist, env=env)
    resources = {n: str((cfg.get("nodes") or {}).get(n, "")) for n in nodes}
    failed = capacity.fail_launches(state_dir, resources, env)
    booting = [n for n in nodes if n not in failed]
    for n in booting:
        power.event(state_dir, n, "power-up", f"booting for {cfg.get('boot_delay', 0)} s")
    if booting:
        power.spawn_detached(state_dir, "boot", booting, env)


def suspend(state_dir: Path, hostlist: str) -> None:
    env = power.env_of(power.load_config(state_dir))
    power.power_down(state_dir, expand_hostlist(hostlist, env=env))


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: python -m toolkit.local.programs resume|suspend|boot|recover STATE_DIR ARGS",
              file=sys.stderr)
        return 2
    verb, state_dir = argv[0], Path(argv[1])
    try:
        if verb == "resume":
            resume(state_dir, argv[2])
        elif verb == "suspend":
            suspend(state_dir, argv[2])
        elif verb == "boot":
            power.boot(state_dir, argv[2:])
        elif verb == "recover":
            try:
                capacity.recover(state_dir, argv[2:], power.env_of(power.load_config(state_dir)))
            finally:
                power.forget_self(state_dir)
        elif verb == "relaunch":
            try:
                replace.relaunch(state_dir, argv[2:], power.env_of(power.load_config(state_dir)))
            finally:
                power.forget_self(state_dir)
        else:
            print(f"unknown verb {verb}", file=sys.stderr)
            return 2
    except Exception as e:  # the log is all slurmctld's programs leave behind
        power.event(state_dir, ",".join(argv[2:])[:200], f"{verb} failed", repr(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
