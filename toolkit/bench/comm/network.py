"""Which network NCCL used, read from its ``NCCL_DEBUG=INFO`` lines.

Each rank prints ``Using network <name>`` once its communicator picks a transport: ``AWS
Libfabric``/``Libfabric`` (the aws-ofi-nccl plugin), ``Socket`` (NCCL's TCP fallback) or
``IB``. aws-ofi-nccl also says which libfabric provider it chose (``NET/OFI Selected Provider
is efa``); a libfabric run on the ``tcp`` provider is not EFA either. Older NCCL versions
without the ``Using network`` line are judged from the ``NET/...`` initialisation lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolkit.bench.comm.model import Network

_USING = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([A-Za-z0-9_+-]+)")
_NET_INIT = re.compile(r"NCCL INFO (NET/(?:Socket|IB|OFI|AWS Libfabric))\b")


def _name_to_transport(name: str, providers: set[str]) -> str:
    low = name.lower()
    if "libfabric" in low or "ofi" in low:
        if not providers:
            return "ofi"
        if providers == {"efa"}:
            return "efa"
        return "ofi-" + "+".join(sorted(providers))
    if "socket" in low:
        return "socket"
    if low.startswith("ib"):
        return "ib"
    return low.replace(" ", "-")


class NetworkScanner:
    """Fed one line at a time; keeps only what the classification needs (bounded)."""

    def __init__(self) -> None:
        self.used: dict[str, str] = {}
        self.inits: dict[str, str] = {}
        self.providers: set[str] = set()

    def feed(self, line: str) -> None:
        if "NCCL INFO" not in line:
            return
        if "Using network" in line and (m := _USING.search(line)):
            self.used.setdefault(m.group(1), line.strip())
        elif "Selected" in line and (m := _PROVIDER.search(line)):
            self.providers.add(m.group(1).lower())
            self.inits.setdefault("provider:" + m.group(1), line.strip())
        elif "INFO NET/" in line and (m := _NET_INIT.search(line)):
            self.inits.setdefault(m.group(1), line.strip())

    def result(self) -> Network:
        used, inits, providers = self.used, self.inits, self.providers
        names = set(used) or {k.removeprefix("NET/") for k in inits if k.startswith("NET/")}
        if not names:
            return Network("efa" if providers == {"efa"} else "unknown",
                           list(inits.values())[:5])
        transports = {_name_to_transport(n, providers) for n in names}
        if len(transports) > 1 and transports != {"ofi", "efa"}:
            transport = "mixed"
        else:
            transport = "efa" if "efa" in transports else transports.pop()
        evidence = list(used.values()) + [v for k, v in inits.items()
                                          if k.startswith("provider:")]
        if not used:
            evidence += [v for k, v in inits.items() if not k.startswith("provider:")]
        return Network(transport, evidence[:6])


def detect_network(lines: Iterable[str]) -> Network:
    """Classify the transport as efa, socket, ib, ofi[-provider], mixed or unknown."""
    scanner = NetworkScanner()
    for line in lines:
        scanner.feed(line)
    return scanner.result()
