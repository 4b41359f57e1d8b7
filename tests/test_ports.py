"""Ports for ranks started on this host without a job id: outside the kernel's ephemeral
range (where an outgoing connection may take a probed port before the rank binds it) and
outside the ranges a caller names."""

from __future__ import annotations

import socket

from benchmarks.distenv import ephemeral_ports, local_rendezvous_port
from tests.ports import _TAKEN, rendezvous_port


def test_ports_lie_outside_the_ephemeral_range_and_the_avoided_ones() -> None:
    eph = ephemeral_ports()
    for _ in range(50):
        port = local_rendezvous_port()
        assert port not in eph and 1024 <= port < 65536
        port = rendezvous_port()
        assert port not in eph and not any(port in r for r in _TAKEN)
        with socket.socket() as s:  # free when handed out
            s.bind(("127.0.0.1", port))
