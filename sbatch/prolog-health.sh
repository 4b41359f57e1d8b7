#!/bin/bash
# pctk health as a Slurm prolog/epilog: the quick node checks (no NCCL, no DCGM; well under
# 5 s on a p5) before or after every job. A failing node drains itself with the reason
# "pctk: <check>: <message>" and, in the prolog, exits 1 so Slurm requeues the job elsewhere.
# Warnings are logged only. `pctk health run --resume-healthy` later returns fixed nodes.
#
# Install on AWS ParallelCluster (>= 3.6 runs every file in /opt/slurm/etc/scripts/prolog.d/
# and epilog.d/ and does not let CustomSlurmSettings set Prolog/Epilog; /opt/slurm is shared
# from the head node to the compute nodes), from a HeadNode OnNodeConfigured custom action:
#   install -d /opt/slurm/etc/pctk
#   cp -r <pctk checkout>/benchmarks /opt/slurm/etc/pctk/          # stdlib-only node side
#   pctk health expectations --mount /fsx --mount /home --out /opt/slurm/etc/pctk/health-expect.json
#   install -m 0755 <pctk checkout>/sbatch/prolog-health.sh /opt/slurm/etc/scripts/prolog.d/90_pctk_health.sh
#   ln -sf /opt/slurm/etc/scripts/prolog.d/90_pctk_health.sh /opt/slurm/etc/scripts/epilog.d/90_pctk_health.sh
# On a plain Slurm (or ParallelCluster before 3.6): Prolog=/path/prolog-health.sh and
# Epilog=/path/prolog-health.sh in slurm.conf (CustomSlurmSettings), then `scontrol reconfigure`.
#
# Slurm runs prologs as root with no PATH and a time limit (PrologEpilogTimeout); keep this
# script short and fully qualified.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/slurm/bin:/opt/amazon/efa/bin
PCTK_HOME="${PCTK_HEALTH_HOME:-/opt/slurm/etc/pctk}"
EXPECT="${PCTK_HEALTH_EXPECT:-$PCTK_HOME/health-expect.json}"
PYTHON="${PCTK_HEALTH_PYTHON:-python3}"
LIMIT="${PCTK_HEALTH_TIMEOUT:-20}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
# SLURM_SCRIPT_CONTEXT is prolog_slurmd or epilog_slurmd (Slurm >= 20.11)
CONTEXT="${SLURM_SCRIPT_CONTEXT:-prolog_slurmd}"

args=(-m benchmarks.health --level quick --format text --node "$NODE")
[ -r "$EXPECT" ] && args+=(--expect "$EXPECT")

out=$(cd "$PCTK_HOME" && PYTHONPATH="$PCTK_HOME" timeout "$LIMIT" "$PYTHON" "${args[@]}" \
      --drain-on-fail 2>&1)
rc=$?
logger -t pctk-health "$CONTEXT job ${SLURM_JOB_ID:-?} rc=$rc: $(echo "$out" | grep -E '^ +(FAIL|WARN)' | tr -s ' ' | paste -sd ';')" 2>/dev/null

case $rc in
  0|1) exit 0 ;;                    # OK or WARNING: let the job run
  2)   # CRITICAL: the node drained itself; in the prolog, fail so the job is requeued
       [ "$CONTEXT" = "epilog_slurmd" ] && exit 0
       exit 1 ;;
  124)                              # the checks hung (a stuck mount?): take the node out
       scontrol update NodeName="$NODE" State=DRAIN \
           Reason="pctk: prolog: checks did not finish in ${LIMIT}s" 2>/dev/null
       exit 1 ;;
  *)   exit 0 ;;                    # UNKNOWN (our own trouble): never block jobs for it
esac
