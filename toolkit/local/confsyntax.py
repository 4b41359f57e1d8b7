"""What user input may become in the files the twin's daemons read: one check per syntax.

The twin writes slurm.conf, gres.conf, slurmdbd.conf, its /etc/hosts block, shell programs
that slurmctld and slurmd run (as root when root runs the twin) and SQL for MariaDB. Paths,
config file names, queue and compute resource names, instance types and a config's
CustomSlurmSettings all come from the user. In slurm.conf a newline starts a new setting, a
blank ends a value (on a node or partition line the next word is another attribute), ``#``
starts a comment, a trailing ``\\`` joins the next line, ``%n`` and ``[1-4]`` expand: any of
them in a value can set what the user never wrote (``MailProg=``, run as root) or break the
file. So every such value passes one of these helpers first:

* :func:`comment` escapes whatever cannot stay on one comment line (it never refuses);
* :func:`slurm_value`, :func:`slurm_path`, :func:`slurm_name` refuse, with one line, a value
  that cannot be written as one word Slurm reads back unchanged (refusing beats quoting:
  Slurm's parser has no escape for a quote inside quotes).

Shell programs quote with :func:`shlex.quote`; SQL takes only values pctk made itself (hex).
"""

from __future__ import annotations

import re

from toolkit.errors import PctkError

# a slurm.conf value: printable, no blank, no quote, no comment sign, no backslash
_VALUE = re.compile(r"[^\s\"'#\\]+")
# a path written into slurm.conf, gres.conf, slurmdbd.conf, AuthInfo, LD_PRELOAD, a hosts
# comment: no ',' '=' ':' (list and key separators), no '%' (Slurm expands %n, %h), no '[' ']'
# (host ranges in gres.conf File=), no blank or control character
_PATH = re.compile(r"/[A-Za-z0-9._/+@~-]*")
# queue, compute resource and node names (node names are host names in /etc/hosts too)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
# instance types (features): p5.48xlarge, p6-b200.48xlarge, u-6tb1.metal
_INSTANCE_TYPE = re.compile(r"[a-z0-9][a-z0-9-]*\.[a-z0-9-]+")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\$?")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def shown(text: str, width: int = 120) -> str:
    """A value in an error message: quoted, control characters escaped, cut at ``width``."""
    out = comment(text)
    return "'" + (out if len(out) <= width else out[: width - 3] + "...") + "'"


def comment(text: str) -> str:
    """Text that stays on one comment line: every non-printable character (newline, carriage
    return, tab, NEL, line separator...) as its Python escape, and a trailing backslash
    (which would join the next line in Slurm's files) as ``\\x5c``."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out[:-1] + "\\x5c" if out.endswith("\\") else out


def _refuse(what: str, value: str, why: str, hint: str) -> PctkError:
    return PctkError(f"{what} {shown(value)} cannot be written into the twin's Slurm files: "
                     f"{why}", hint)


def slurm_value(value: str, what: str) -> str:
    """A value for ``Key=value`` in slurm.conf: one printable word without quotes, ``#``
    or backslash."""
    if not value or not _VALUE.fullmatch(value) or not value.isprintable():
        raise _refuse(what, value, "a value must be one word without blanks, quotes, '#', "
                      "'\\' or control characters", "write it as Slurm's own files need")
    return value


def slurm_key(key: str, what: str) -> str:
    if not _KEY.fullmatch(key):
        raise _refuse(what, key, "not a slurm.conf parameter name",
                      "use the parameter's name, letters and digits only")
    return key


def slurm_path(path: str, what: str) -> str:
    """An absolute path for slurm.conf and the files beside it."""
    if not _PATH.fullmatch(path):
        raise _refuse(what, path, "only letters, digits and . _ / + @ ~ - are safe in the "
                      "paths of Slurm's files (blanks, quotes, '#', '%', ',', '=', ':', "
                      "brackets and control characters are not)",
                      "choose a folder with a plain name (--state-dir, PCTK_TWIN_DIR or "
                      "PCTK_HOME)")
    return path


def slurm_name(name: str, what: str) -> str:
    """A queue, compute resource or node name: a Slurm name and a host name at once."""
    if not _NAME.fullmatch(name):
        raise _refuse(what, name, "names must be letters, digits and '-', starting with a "
                      "letter", "rename it in the cluster config (ParallelCluster's rule too)")
    return name


def instance_type(name: str, what: str) -> str:
    if not _INSTANCE_TYPE.fullmatch(name):
        raise _refuse(what, name, "not an EC2 instance type (family.size)",
                      "write it as EC2 names it, e.g. p5.48xlarge")
    return name


def host_name(name: str, what: str) -> str:
    if not _HOST.fullmatch(name):
        raise _refuse(what, name, "not a plain host name", "give this host a plain name")
    return name


def user_name(name: str, what: str) -> str:
    if not _USER.fullmatch(name):
        raise _refuse(what, name, "not a plain account name", "run pctk as a plain account")
    return name
