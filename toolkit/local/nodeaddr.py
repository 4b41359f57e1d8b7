"""Make every process of a twin node speak from that node's own loopback address.

All twin nodes share one network namespace, where a socket that connects without binding
gets the source 127.0.0.1 whatever node it belongs to. Slurm and gloo tell their peers the
address a connection came from (srun's reply address, gloo's listening side), and shaping
one node's traffic needs its packets to carry its address. A tiny ``LD_PRELOAD`` library
binds each unbound IPv4 socket that connects to 127.0.0.0/8 to ``$PCTK_NODE_ADDR`` first,
as a socket on a real node starts from that node's address. It is set in each slurmd's
environment (slurmstepd inherits it) and exported to every task by the twin's TaskProlog.
Built at ``pctk local up`` with the system C compiler; without one, nodes share 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from toolkit.errors import PctkError

SOURCE = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    const char *own = getenv("PCTK_NODE_ADDR");
    if (own && addr && addr->sa_family == AF_INET
        && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *dst = (const struct sockaddr_in *)addr;
        struct sockaddr_in cur;
        socklen_t cl = sizeof cur;
        if ((ntohl(dst->sin_addr.s_addr) >> 24) == 127
            && getsockname(fd, (struct sockaddr *)&cur, &cl) == 0
            && cur.sin_family == AF_INET && cur.sin_port == 0 && cur.sin_addr.s_addr == 0) {
            struct sockaddr_in src = {0};
            src.sin_family = AF_INET;
            if (inet_pton(AF_INET, own, &src.sin_addr) == 1)
                bind(fd, (struct sockaddr *)&src, sizeof src);
        }
    }
    return real(fd, addr, len);
}
"""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build(lib_dir: Path) -> Path:
    """Compile the library into ``lib_dir`` (once per source version); returns its path."""
    tag = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
    out = lib_dir / f"pctk-bindaddr-{tag}.so"
    if out.exists():
        return out
    cc = compiler()
    if cc is None:
        raise PctkError("no C compiler to build the node address library",
                        "apt-get install -y gcc, or start the twin as non-root (nodes then "
                        "share 127.0.0.1)")
    lib_dir.mkdir(parents=True, exist_ok=True)
    src = lib_dir / f"pctk-bindaddr-{tag}.c"
    src.write_text(SOURCE)
    tmp = out.with_suffix(".so.tmp")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(src), "-ldl"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise PctkError(f"building {out.name} failed: {r.stderr.strip()[:200]}")
    tmp.replace(out)
    return out
