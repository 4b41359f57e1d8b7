"""``python -m benchmarks.health``: check this node, print/write one JSON report.

Exit code follows Nagios: 0 OK, 1 WARNING, 2 CRITICAL (a check failed), 3 UNKNOWN (nothing
could be checked or bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from benchmarks import slurmnode
from benchmarks.health.context import build_context
from benchmarks.health.runner import CHECK_NAMES, LEVELS, drain_reason, run_checks
from benchmarks.health.status import NAGIOS_CRITICAL, NAGIOS_UNKNOWN, nagios_code


def write_json_atomic(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.health", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", choices=LEVELS, default="quick")
    ap.add_argument("--checks", default="", help=f"comma list, a subset of {','.join(CHECK_NAMES)}")
    ap.add_argument("--expect", help="expectations JSON (pctk health expectations)")
    ap.add_argument("--instance-type", help="this node's EC2 instance type")
    ap.add_argument("--node", help="node name (default: SLURMD_NODENAME, else the host name)")
    ap.add_argument("--mount", action="append", default=None,
                    help="shared mount to probe (repeat; %%n = node name); default /fsx, /home")
    ap.add_argument("--tool-path", action="append", default=[],
                    help="folder searched first for tools (repeat; %%n = node name)")
    ap.add_argument("--munge-socket", help="munged socket (default: slurm.conf AuthInfo)")
    ap.add_argument("--dcgm-level", type=int, choices=(1, 2, 3), default=1)
    ap.add_argument("--out-dir", help="write <out-dir>/<node>.json (atomically)")
    ap.add_argument("--format", choices=("json", "text"), default="json")
    ap.add_argument("--drain-on-fail", action="store_true",
                    help="prolog/epilog use: drain this node via scontrol when a check fails")
    return ap.parse_args(argv)


def _text(report: dict) -> str:
    lines = [f"{report['node']} ({report['instance_type'] or 'unknown type'}):"]
    for name, r in report["checks"].items():
        lines.append(f"  {r['status']:<4} {name:<13} {r['message']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        ctx = build_context(node=args.node, expect_file=args.expect,
                            instance_type=args.instance_type, mounts=args.mount,
                            tool_path=args.tool_path, munge_socket=args.munge_socket,
                            dcgm_level=args.dcgm_level)
        only = [c.strip() for c in args.checks.split(",") if c.strip()]
        report = run_checks(ctx, args.level, only)
    except (OSError, ValueError) as exc:
        print(f"pctk health: {exc}", file=sys.stderr)
        return NAGIOS_UNKNOWN
    print(_text(report) if args.format == "text" else json.dumps(report),
          flush=True)
    written = _write_report(args.out_dir, ctx.node, report)
    reason = drain_reason(report["checks"])
    if args.drain_on_fail and reason and not slurmnode.drain(ctx.node, reason, timeout=10,
                                                               path=ctx.tools.path):
        print(f"pctk health: could not drain {ctx.node}", file=sys.stderr)
    code = nagios_code([r["status"] for r in report["checks"].values()])
    return code if written or code == NAGIOS_CRITICAL else NAGIOS_UNKNOWN


def _write_report(out_dir: str | None, node: str, report: dict) -> bool:
    """Write ``<out_dir>/<node>.json``; False (said on stderr) when the folder refuses it:
    the folder, not this node, is at fault, and the report is still in the job output."""
    if not out_dir:
        return True
    try:
        write_json_atomic(Path(out_dir) / f"{node}.json", report)
    except OSError as exc:
        print(f"pctk health: cannot write the report to {out_dir}: {exc}", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
