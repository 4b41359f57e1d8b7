"""The one door to submitit's internals, checked against the installed submitit on import.

:class:`~toolkit.submit.executor.ClusterExecutor` and the watcher
(:mod:`toolkit.submit.watcher`) subclass submitit's Slurm classes and override or call members
submitit does not promise to keep (the leading underscore): the submission command, the job id
parser, array submission in chunks, the poll command and the watcher's bookkeeping. They take
submitit from this module alone, and importing it compares each such member with the shape
pctk was written against (``TESTED_WITH``). A submitit release that removes, renames or
re-shapes one stops pctk at once with one line naming the release and the member, instead of
submitting jobs wrong or waiting forever.

After reading a new submitit's change to a member, update :data:`EXPECTED` and the code that
uses it together, and move the pin in pyproject.toml and constraints.txt.
"""

from __future__ import annotations

import inspect
import typing as tp

import submitit
from submitit.core import core, utils
from submitit.slurm import slurm as _slurm
from submitit.slurm.slurm import SlurmExecutor, SlurmInfoWatcher, SlurmJob

from toolkit.errors import PctkError

__all__ = ["EXPECTED", "TESTED_WITH", "SlurmExecutor", "SlurmInfoWatcher", "SlurmJob",
           "check_submitit", "core", "make_sbatch_string", "utils"]

TESTED_WITH = "1.5.4"

_SBATCH_STRING = (
    "(command, folder, job_name=, partition=, time=, nodes=, ntasks_per_node=, cpus_per_task=, "
    "cpus_per_gpu=, num_gpus=, gpus_per_node=, gpus_per_task=, qos=, setup=, teardown=, mem=, "
    "mem_per_gpu=, mem_per_cpu=, signal_delay_s=, comment=, constraint=, exclude=, account=, "
    "gres=, mail_type=, mail_user=, nodelist=, dependency=, exclusive=, array_parallelism=, "
    "wckey=, stderr_to_stdout=, map_count=, additional_parameters=, srun_args=, use_srun=)")

# member -> its shape as pctk uses it: "(parameters)" with "=" after those with a default,
# prefixed "staticmethod " where it is one; "property", "attribute" or "reads a, b" otherwise
EXPECTED: dict[str, str] = {
    # ClusterExecutor overrides these four
    "SlurmExecutor._internal_process_submissions": "(self, delayed_submissions)",
    "SlurmExecutor._make_submission_command": "(self, submission_file_path)",
    "SlurmExecutor._get_job_id_from_submission_command": "staticmethod (string)",
    "SlurmExecutor._make_submission_file_text": "(self, command, uid)",
    # ... and calls these to submit an array in chunks and to clone itself
    "SlurmExecutor.__init__": "(self, folder, max_num_timeout=, max_pickle_size_gb=, python=)",
    "SlurmExecutor._submit_command": "(self, command)",
    "SlurmExecutor._throttle": "(self)",
    "SlurmExecutor._submitit_command_str": "property",
    "_make_sbatch_string": _SBATCH_STRING,
    "utils.JobPaths.get_first_id_independent_folder": "staticmethod (folder)",
    "utils.JobPaths.move_temporary_file": "(self, tmp_path, name, keep_as_symlink=)",
    "utils.DelayedSubmission.set_timeout": "(self, timeout_min, max_num_timeout)",
    "utils.DelayedSubmission.dump": "(self, filepath)",
    # PctkWatcher overrides these and keeps the base's bookkeeping up to date
    "SlurmInfoWatcher.__init__": "(self, delay_s=)",
    "SlurmInfoWatcher._make_command": "(self)",
    "SlurmInfoWatcher.update": "(self)",
    "SlurmInfoWatcher.is_done": "(self, job_id, mode=)",
    "SlurmInfoWatcher.read_info": "(self, string)",
    "SlurmInfoWatcher instance": "attributes _finished, _info_dict, _last_status_check, "
                                 "_num_calls, _output, _registered",
    # PctkSlurmJob replaces the class-wide watcher and shortens the wait for a result file
    "SlurmJob.watcher": "attribute",
    "SlurmJob._get_outcome_and_result": "(self)",
    "core.Job._get_outcome_and_result": "reads _results_timeout_s",
}

_ROOTS: dict[str, tp.Any] = {"SlurmExecutor": SlurmExecutor, "SlurmInfoWatcher": SlurmInfoWatcher,
                             "SlurmJob": SlurmJob, "utils": utils, "core": core}
_WATCHER_ATTRS = ("_finished", "_info_dict", "_last_status_check", "_num_calls", "_output",
                  "_registered")


def _signature_shape(fn: tp.Callable[..., tp.Any]) -> str:
    params = []
    for p in inspect.signature(fn).parameters.values():
        stars = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        params.append(stars + p.name + ("=" if p.default is not p.empty else ""))
    return "(" + ", ".join(params) + ")"


def _resolve(member: str) -> tp.Any:
    """The object a dotted member name stands for, looked up without invoking descriptors."""
    if member == "_make_sbatch_string":
        return inspect.getattr_static(_slurm, member)
    head, *rest = member.split(".")
    owner = _ROOTS[head]
    for part in rest[:-1]:
        owner = getattr(owner, part)
    return inspect.getattr_static(owner, rest[-1]) if rest else owner


def actual_shape(member: str) -> str:
    """What the installed submitit has where :data:`EXPECTED` names ``member``."""
    expected = EXPECTED[member]
    if member == "SlurmInfoWatcher instance":
        present = set(vars(SlurmInfoWatcher(delay_s=60)))
        return "attributes " + ", ".join(a for a in _WATCHER_ATTRS if a in present)
    found = _resolve(member)
    if expected.startswith("reads "):
        names = [n.strip() for n in expected.removeprefix("reads ").split(",")]
        code = getattr(found, "__code__", None)
        used = code.co_names if code is not None else ()
        return "reads " + ", ".join(n for n in names if n in used)
    if expected in ("property", "attribute"):
        return "property" if isinstance(found, property) else "attribute"
    if isinstance(found, staticmethod):
        return "staticmethod " + _signature_shape(found.__func__)
    if isinstance(found, property):
        return "property"
    return _signature_shape(found)


def problems() -> list[str]:
    """Each member whose shape differs from :data:`EXPECTED`, as "member: what is there"."""
    found = []
    for member, expected in EXPECTED.items():
        try:
            actual = actual_shape(member)
        except AttributeError:
            found.append(f"{member} is missing")
            continue
        if actual != expected:
            found.append(f"{member} is {actual}, pctk expects {expected}")
    return found


def check_submitit() -> None:
    """Raise a one-line :class:`PctkError` if a member pctk relies on has changed."""
    wrong = problems()
    if wrong:
        version = getattr(submitit, "__version__", "unknown")
        raise PctkError(
            f"submitit {version} differs from the {TESTED_WITH} pctk was written against: "
            + "; ".join(wrong),
            f"pip install submitit=={TESTED_WITH} (see toolkit/submit/submitit_private.py)")


check_submitit()
make_sbatch_string: tp.Callable[..., str] = _slurm._make_sbatch_string
