"""Make every process of a twin node speak from that node's own loopback address.

All twin nodes share one network namespace, where a socket that connects without binding
gets the source 127.0.0.1 whatever node it belongs to. Slurm and gloo tell their peers the
address a connection came from (srun's reply address, gloo's listening side), and shaping
one node's traffic needs its packets to carry its address. A tiny ``LD_PRELOAD`` library
binds each unbound IPv4 socket that connects to 127.0.0.0/8 to ``$PCTK_NODE_ADDR`` first,
as a socket on a real node starts from that node's address. It is set in each slurmd's
environment (slurmstepd inherits it) and exported to every task by the twin's TaskProlog.
Built at ``pctk local up`` with the system C compiler; without one, nodes share 127.0.0.1.

It also answers name lookups (getaddrinfo, gethostbyname, gethostbyname2 and their ``_r``
forms) for the names in ``$PCTK_TWIN_HOSTS``, the twin's own hosts file: twins in other
state folders have the same node names at other addresses in ``/etc/hosts``, and a job must
reach its own twin's nodes (see :mod:`toolkit.local.hosts`). Other names go to libc as usual.
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
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* the address of NAME in $PCTK_TWIN_HOSTS (a hosts file), into OUT; 0 when not listed */
static int twin_address(const char *name, char *out, size_t outlen) {
    const char *path = getenv("PCTK_TWIN_HOSTS");
    if (!path || !*path || !name || !*name)
        return 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *save = NULL;
        char *addr = strtok_r(line, " \t\r\n", &save);
        char *tok;
        while (addr && (tok = strtok_r(NULL, " \t\r\n", &save))) {
            if (strcasecmp(tok, name) == 0 && strlen(addr) < outlen) {
                strcpy(out, addr);
                found = 1;
                break;
            }
        }
    }
    fclose(f);
    return found;
}

#define NEXT(name) static __typeof__(name) *real; if (!real) real = dlsym(RTLD_NEXT, #name)

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    NEXT(getaddrinfo);
    char addr[INET6_ADDRSTRLEN];
    return real(twin_address(node, addr, sizeof addr) ? addr : node, service, hints, res);
}

/* the entry of a name found in the twin's file keeps that name as its h_name */
static struct hostent *named(struct hostent *h, const char *name) {
    static __thread char copy[256];
    if (h && strlen(name) < sizeof copy) {
        strcpy(copy, name);
        h->h_name = copy;
    }
    return h;
}

struct hostent *gethostbyname(const char *name) {
    NEXT(gethostbyname);
    char addr[INET6_ADDRSTRLEN];
    if (twin_address(name, addr, sizeof addr))
        return named(real(addr), name);
    return real(name);
}

struct hostent *gethostbyname2(const char *name, int af) {
    NEXT(gethostbyname2);
    char addr[INET6_ADDRSTRLEN];
    if (twin_address(name, addr, sizeof addr))
        return named(real(addr, af), name);
    return real(name, af);
}

int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                    struct hostent **result, int *h_errnop) {
    NEXT(gethostbyname_r);
    char addr[INET6_ADDRSTRLEN];
    return real(twin_address(name, addr, sizeof addr) ? addr : name, ret, buf, buflen, result,
                h_errnop);
}

int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
                     struct hostent **result, int *h_errnop) {
    NEXT(gethostbyname2_r);
    char addr[INET6_ADDRSTRLEN];
    return real(twin_address(name, addr, sizeof addr) ? addr : name, af, ret, buf, buflen,
                result, h_errnop);
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
