"""The EFA/NCCL environment pctk sets for jobs on EFA instances, with why each is there.

One list, read by the submission layer, the nccl-tests runner and the sbatch scripts'
documentation, so the same job gets the same network settings however it is launched.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    why: str


# the network: for every job on an EFA instance, nccl-tests included
EFA_ENV: tuple[EnvVar, ...] = (
    EnvVar("FI_PROVIDER", "efa",
           "use libfabric's EFA provider; fail loudly instead of silently falling back to TCP"),
    EnvVar("FI_EFA_USE_HUGE_PAGE", "0",
           "huge-page bounce buffers break fork() (data-loader workers); the speed cost is small"),
    EnvVar("NCCL_SOCKET_IFNAME", "^docker,lo,veth",
           "NCCL's bootstrap and socket traffic on the instance's ENI, not loopback or bridges"),
)
# for PyTorch jobs
TORCH_ENV: tuple[EnvVar, ...] = (
    EnvVar("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1",
           "a hung or failed collective aborts the job (so Slurm can requeue it) instead of "
           "blocking until the time limit"),
)
# Not set on purpose: FI_EFA_USE_DEVICE_RDMA=1 is unnecessary with libfabric >= 1.18 and
# aws-ofi-nccl >= 1.7 (detected automatically), and NCCL_PROTO/NCCL_ALGO overrides hide
# regressions that the benchmarks are meant to show.

# when the network path must be proven (benchmarks, --nccl-debug)
DEBUG_ENV: tuple[EnvVar, ...] = (
    EnvVar("NCCL_DEBUG", "INFO",
           "prints the network path (NET/OFI with the efa provider, or NET/Socket when EFA is "
           "not used): needed to prove a benchmark ran over EFA"),
    EnvVar("NCCL_DEBUG_SUBSYS", "INIT,NET",
           "INIT carries the transport choice, NET the plugin and provider lines; the rest is "
           "noise"),
)


def efa_env(efa: bool, *, debug: bool = False, torch: bool = True) -> dict[str, str]:
    """The variables for a job: network ones on EFA instances, PyTorch ones unless
    ``torch=False`` (nccl-tests), NCCL's debug output with ``debug``."""
    groups = [*(EFA_ENV if efa else ()), *(TORCH_ENV if efa and torch else ()),
              *(DEBUG_ENV if debug else ())]
    return {v.name: v.value for v in groups}


def describe() -> list[tuple[str, str, str]]:
    return [(v.name, v.value, v.why) for v in (*EFA_ENV, *TORCH_ENV, *DEBUG_ENV)]
