"""The one result record every benchmark and health run writes (schema ``pctk.result/v1``).

Node-side module: standard library only. A record is a JSON object::

    {
      "schema": "pctk.result/v1",
      "id": "<uuid4 hex>",
      "kind": "nccl-tests" | "collectives" | "fsdp" | "health" | "storage" | "slow-nodes" |
              "scaling" | "inference" | "serving",
      "created": "2026-12-02T12:00:00Z",
      "cluster": {"name": str|null, "instance_type": str|null, "nodes": int|null,
                  "hosts": [str], "partition": str|null, "job_id": str|null,
                  "twin": bool},   # true on pctk's local twin (emulated nodes, one host)
      "software": {"torch": ..., "nccl": ..., "aws_ofi_nccl": ..., "efa": ..., "libfabric": ...,
                   "driver": ..., "cuda": ..., "python": ...},   # null where unknown
      "params": {...},      # what was asked for (kind-specific: KIND_FIELDS has what
      "metrics": {...},     # what was measured    readers rely on, checked at the store)
      "verdict": {"status": "PASS"|"WARN"|"FAIL"|"UNKNOWN", "reasons": [str]},
      "raw_logs": [str]     # paths of raw logs kept beside the record (relative to it)
    }

Records are written atomically (temporary file + rename) so a reader never sees half of one.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import socket
import stat
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import slurmnode

SCHEMA = "pctk.result/v1"
KINDS = ("nccl-tests", "collectives", "fsdp", "health", "storage", "slow-nodes", "scaling",
         "inference", "serving")
STATUSES = ("PASS", "WARN", "FAIL", "UNKNOWN")


class RecordError(ValueError):
    """A file that is not a valid pctk result record."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.(?:\d*x?large|metal(?:-\d+xl)?)$")


def _cluster_name(config: dict[str, str]) -> str | None:
    return os.environ.get("SLURM_CLUSTER_NAME") or config.get("ClusterName") or None


def _on_twin(config: dict[str, str]) -> bool:
    """The local twin runs slurmctld at a loopback address (every daemon on one host); a
    real cluster's controller must be reachable from other hosts, so never is."""
    hosts = [v for k, v in config.items() if k.startswith(("SlurmctldHost", "ControlAddr"))]
    return any(re.search(r"\((?:127\.\d+\.\d+\.\d+|::1|localhost)\)", h) for h in hosts)


def _instance_type() -> str | None:
    """``PCTK_INSTANCE_TYPE``, else the instance type among this node's Slurm features
    (ParallelCluster, and the twin, list it there: ``static,p5.48xlarge,p5,efa,gpu``)."""
    if itype := os.environ.get("PCTK_INSTANCE_TYPE"):
        return itype
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        return None
    return next((f for f in slurmnode.node_features(node) if _INSTANCE_TYPE.match(f)), None)


def cluster_from_env() -> dict[str, Any]:
    """What the Slurm environment says about where this runs (empty fields outside Slurm)."""
    env = os.environ
    nodes = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    config = slurmnode.show_config()
    return {
        "name": _cluster_name(config),
        "instance_type": _instance_type(),
        "nodes": int(nodes) if nodes and nodes.isdigit() else None,
        "hosts": [],
        "partition": env.get("SLURM_JOB_PARTITION"),
        "job_id": env.get("SLURM_JOB_ID"),
        "twin": _on_twin(config),
    }


def software_versions() -> dict[str, str | None]:
    """Versions of the software stack that decide performance; None where not found."""
    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": None,
        "cuda": None,
        "nccl": None,
        "aws_ofi_nccl": os.environ.get("PCTK_AWS_OFI_NCCL_VERSION"),
        "efa": None,
        "libfabric": None,
        "driver": None,
        "host": socket.gethostname(),
    }
    try:
        import torch

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            nccl = torch.cuda.nccl.version()
            versions["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:  # torch absent or broken: the record still gets written
        pass
    efa_version = Path("/opt/amazon/efa_installed_packages")
    if efa_version.exists():
        for line in efa_version.read_text(errors="replace").splitlines():
            if "EFA installer version" in line:
                versions["efa"] = line.split(":", 1)[-1].strip()
    driver = Path("/proc/driver/nvidia/version")
    if driver.exists():
        text = driver.read_text(errors="replace")
        for token in text.split():
            if token.count(".") >= 1 and token.replace(".", "").isdigit():
                versions["driver"] = token
                break
    return versions


def new_record(
    kind: str,
    *,
    params: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    status: str = "UNKNOWN",
    reasons: list[str] | None = None,
    cluster: dict[str, Any] | None = None,
    software: dict[str, Any] | None = None,
    raw_logs: list[str] | None = None,
    describe_this_machine: bool = True,
) -> dict[str, Any]:
    """A record; ``describe_this_machine=False`` for a record of a run elsewhere (a parsed
    log): no Slurm environment or scontrol queries, ``cluster`` and ``software`` as given."""
    if kind not in KINDS:
        raise RecordError(f"unknown record kind {kind!r}; expected one of {', '.join(KINDS)}")
    if status not in STATUSES:
        raise RecordError(f"unknown status {status!r}; expected one of {', '.join(STATUSES)}")
    base_cluster: dict[str, Any] = cluster_from_env() if describe_this_machine else {
        "name": None, "instance_type": None, "nodes": None, "hosts": [], "partition": None,
        "job_id": None}
    base_cluster.update(cluster or {})
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "kind": kind,
        "created": _now(),
        "cluster": base_cluster,
        "software": software if software is not None else software_versions(),
        "params": params or {},
        "metrics": metrics or {},
        "verdict": {"status": status, "reasons": list(reasons or [])},
        "raw_logs": list(raw_logs or []),
    }


# Limits that keep one record from poisoning every reader of the store.
MAX_RECORD_BYTES = 16 << 20  # serialized compactly; a 1,000-node health sweep is about 4 MB
MAX_FILE_BYTES = 4 * MAX_RECORD_BYTES  # a record file is indented (compact if that is larger)
MAX_DEPTH = 32  # containers inside containers; records use fewer than 10
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1  # SQLite INTEGER, and exact enough as a float
YEAR_RANGE = (1970, 2200)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_CLUSTER_TEXT = ("name", "instance_type", "partition", "job_id")


def _show(value: Any, width: int = 40) -> str:
    """A short, one-line, printable repr of a hostile value for an error message."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _check_scalar(value: Any, where: str) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise RecordError(f"{where}: integer out of the 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise RecordError(f"{where}: {value!r} is not a finite number")
    elif isinstance(value, str):
        _check_text(value, where)
    else:
        raise RecordError(f"{where}: a {type(value).__name__} is not a JSON value")


def _check_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(f"{where}: text is not valid UTF-8 (lone surrogate)") from None


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def _child(where: str, key: str | int) -> str:
    """The path of a value for messages: ``metrics.rows[3]``, odd keys quoted, kept short."""
    if isinstance(key, int):
        step = f"[{key}]"
    else:
        step = f".{key}" if _PLAIN_KEY.match(key) else f"[{_show(key, 20)}]"
    return (where + step) if len(where) < 60 else where


def check_values(rec: Any) -> None:
    """Every value a JSON value readers can use: nesting at most MAX_DEPTH deep, string
    keys, UTF-8 text, 64-bit integers, finite floats. Iterative, so any depth is safe."""
    stack: list[tuple[Any, str, int]] = [(rec, "record", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise RecordError(f"{where}: nested more than {MAX_DEPTH} levels deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(value, dict):
                    if not isinstance(key, str):
                        raise RecordError(f"{where}: key {_show(key)} is not text")
                    _check_text(key, f"{where} key")
                    stack.append((item, _child(where, key), depth + 1))
                else:
                    stack.append((item, _child(where, key), depth + 1))
        else:
            _check_scalar(value, where)


def check_created(text: str) -> _dt.datetime:
    """The record's time as an aware UTC datetime, in YEAR_RANGE."""
    try:
        when = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        when = when.astimezone(_dt.UTC)
    except (ValueError, OverflowError):
        raise RecordError(f"created {_show(text)} is not an ISO 8601 time") from None
    if not YEAR_RANGE[0] <= when.year <= YEAR_RANGE[1]:
        raise RecordError(f"created {_show(text)} is outside the years "
                          f"{YEAR_RANGE[0]}-{YEAR_RANGE[1]}")
    return when


def _check_envelope_fields(rec: dict[str, Any]) -> None:
    if not _ID.match(rec["id"]):
        raise RecordError(f"id {_show(rec['id'])} is not 1-128 letters, digits or ._:-")
    check_created(rec["created"])
    cluster = rec["cluster"]
    for key in _CLUSTER_TEXT:
        if not isinstance(cluster.get(key), str | None):
            raise RecordError(f"cluster.{key} is not text or null")
    nodes = cluster.get("nodes")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int)
                              or not 0 <= nodes <= 1_000_000):
        raise RecordError(f"cluster.nodes {_show(nodes)} is not a node count")
    hosts = cluster.get("hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise RecordError("cluster.hosts is not a list of host names")
    reasons = rec["verdict"].get("reasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise RecordError("verdict.reasons is not a list of text")
    for name in rec["raw_logs"]:
        if not isinstance(name, str) or not name or "\0" in name or len(name) > 4096:
            raise RecordError(f"raw_logs entry {_show(name)} is not a file name")


def _plain_json_values(rec: Any, text_may_hold_surrogates: bool) -> bool:
    """True when :func:`check_values` surely accepts ``rec``, a value ``json.loads`` built;
    False means "check properly" (never "invalid").

    The same rules without building a path for every value, about ten times faster: JSON
    only yields dicts with text keys, lists, text, numbers, booleans and null, so what is
    left to look at is the depth, the integers' range, the floats (``1e400`` parses as
    infinity) and, only when the text could carry one, a lone surrogate.
    """
    stack: list[tuple[Any, int]] = [(rec, 0)]
    pop, push, isfinite = stack.pop, stack.append, math.isfinite
    while stack:
        value, depth = pop()
        if depth > MAX_DEPTH:
            return False
        if type(value) is dict:
            if text_may_hold_surrogates:
                for key in value:
                    if type(key) is not str or not _encodes(key):
                        return False
            items = value.values()
        else:
            items = value
        for item in items:
            kind = type(item)
            if kind is float:
                if not isfinite(item):
                    return False
            elif kind is int:
                if not INT_MIN <= item <= INT_MAX:
                    return False
            elif kind is dict or kind is list:
                push((item, depth + 1))
            elif kind is str:
                if text_may_hold_surrogates and not _encodes(item):
                    return False
            elif kind is not bool and item is not None:
                return False
    return True


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- what readers rely on, kind by kind ---------------------------------------------------
# Readers of the store compute with these fields: `pctk diagnose` builds the model's shape from
# params.model_args, `pctk plan` takes a checkpoint rate from metrics.checkpoint_saves, `pctk
# report` sorts a scaling study's sizes by node count. So a record is refused at the store's
# door when one of them is there but of the wrong type or out of range, instead of every
# reader guarding every use. Absent or null passes (older records, a figure a run did not
# measure) unless required; fields a table does not name are free. The bounds are physical,
# not judgements: 1e308 GB/s is a broken writer, not a fast file system.

MAX_GB_PER_S = 1e6  # a p5.48xlarge node has 400 GB/s of EFA, an H200 about 4,800 of HBM
MAX_PER_S = 1e12  # tokens, requests, I/Os or files per second
MAX_SECONDS = 1e9  # about 30 years
MAX_COUNT = 10**9  # ranks, nodes, steps, batch sizes, model dimensions


@dataclass(frozen=True)
class Num:
    """A number, never a bool, from ``low`` to ``high``; ``whole``: an integer."""

    low: float
    high: float
    whole: bool = False
    unit: str = ""

    def expected(self) -> str:
        what = "a whole number" if self.whole else "a number"
        return f"{what} from {self.low:g} to {self.high:g}" + (f" {self.unit}" if self.unit else "")


@dataclass(frozen=True)
class Text:
    pass


@dataclass(frozen=True)
class ListOf:
    item: Spec


@dataclass(frozen=True)
class Obj:
    """An object: ``fields`` by name, ``others`` for every other key (a map keyed by name,
    such as node -> figure), ``required`` must be there and not null."""

    fields: Mapping[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    others: Spec | None = None


Spec = Num | Text | ListOf | Obj

TEXT, TEXTS = Text(), ListOf(Text())
COUNT, POSITIVE = Num(0, MAX_COUNT, whole=True), Num(1, MAX_COUNT, whole=True)
BYTES = Num(0, INT_MAX, whole=True, unit="bytes")
SECONDS = Num(0, MAX_SECONDS, unit="seconds")
GB_PER_S = Num(0, MAX_GB_PER_S, unit="GB/s")  # 0: a save too quick for the clock
MB_PER_S = Num(0, MAX_GB_PER_S * 1000, unit="MB/s")
PER_S = Num(0, MAX_PER_S, unit="per second")
TFLOPS = Num(0, 1e6, unit="TFLOP/s")
FRACTION = Num(0, 1)
RATIO = Num(0, 1e6)  # measured over predicted, over a median: may exceed 1
MFU = Num(0, 100)  # a fraction, or percent from writers that report it (34.0)

MODEL_DIMS = ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size")
CHECKPOINT = Obj({"step": COUNT, "seconds": SECONDS, "bytes": BYTES, "gb_per_s": GB_PER_S},
                 required=("seconds", "gb_per_s"))
FSDP = Obj({
    "params": Obj({
        "model": TEXT, "workload": TEXT, "param_dtype": TEXT, "device_name": TEXT,
        "model_args": Obj({**dict.fromkeys(MODEL_DIMS, POSITIVE), "max_seq_len": POSITIVE},
                          required=MODEL_DIMS),
        **dict.fromkeys(("world_size", "nodes", "ranks_per_node", "local_batch_size",
                         "global_batch_size", "seq_len"), POSITIVE),
        "steps": COUNT, "timing_warmup_steps": COUNT}),
    "metrics": Obj({
        "tokens_per_s_per_gpu": PER_S, "tflops_per_gpu": TFLOPS, "peak_tflops": TFLOPS,
        "mfu": MFU, "measured_steps": COUNT, "peak_memory_gib": Num(0, 1e6, unit="GiB"),
        **dict.fromkeys(("step_time_mean_s", "step_time_p50_s", "step_time_p90_s"), SECONDS),
        "checkpoint_saves": ListOf(CHECKPOINT), "checkpoint_load": CHECKPOINT,
        "stragglers": Obj({"verdict": TEXT, "slowest_node": TEXT, "slowest_rank": COUNT,
                           "local_s": SECONDS, "median_local_s": SECONDS,
                           "local_vs_median": RATIO,
                           "lateness_s": Num(-MAX_SECONDS, MAX_SECONDS, unit="seconds")}),
        "breakdown": Obj({
            "timed_steps": COUNT, "parts": TEXTS, "clock": TEXT,
            "mean_over_ranks": Obj(required=("step", "compute"), others=SECONDS),
            "per_rank": ListOf(Obj({"rank": COUNT, "node": TEXT, "link_recv_gb_per_s": GB_PER_S},
                                   required=("node",), others=SECONDS)),
        }, required=("timed_steps", "parts", "mean_over_ranks")),
        "sft": Obj({"real_tokens_per_s_per_gpu": PER_S, "real_mfu": MFU,
                    "padding_fraction_packed": FRACTION, "padding_fraction_unpacked": FRACTION}),
        "rl": Obj({"bound_by": TEXT, "phase_mean_s": Obj(others=SECONDS),
                   "phase_fraction": Obj(others=FRACTION),
                   "generation_tokens_per_s_per_gpu": PER_S,
                   "training_tokens_per_s_per_gpu": PER_S, "weight_sync_gb_per_s": GB_PER_S,
                   "clip_fraction_mean": FRACTION,
                   "learning": Obj({"first": FRACTION, "last": FRACTION,
                                    "rise": Num(-1, 1), "summary": TEXT})}),
    }),
})
# busbw only: nccl-tests prints a one-rank in-place "algbw" of 1.8e6 GB/s (no data moves)
COLLECTIVE_ROW = Obj({"size_bytes": BYTES, **dict.fromkeys(
    ("out_of_place", "in_place"), Obj({"busbw_gbps": GB_PER_S}))})
COLLECTIVES = Obj({"metrics": Obj({"collectives": ListOf(Obj({
    "collective": TEXT, "nranks": POSITIVE, "avg_busbw_gbps": GB_PER_S,
    "rows": ListOf(COLLECTIVE_ROW)}))})})
THROUGHPUT = Obj({"mb_per_s": MB_PER_S, "iops": PER_S, "per_s": PER_S, "block": TEXT})
STORAGE_PHASES = ("seq_write", "seq_read", "seq_write_shared", "seq_read_shared", "ckpt_write",
                  "ckpt_read", "rand_read", "meta_create", "meta_stat", "meta_remove")
SCALING_SIZE = Obj({
    "nodes": POSITIVE, "world_size": POSITIVE, "step_s": SECONDS, "efficiency": RATIO,
    "tokens_per_s_per_gpu": PER_S, "record_id": TEXT, "status": TEXT,
    "breakdown_s": Obj(others=SECONDS),
    "predicted": Obj({"efficiency_no_overlap": RATIO, "efficiency_overlap": RATIO,
                      "busbw_gb_per_s": GB_PER_S, "busbw_source": TEXT}),
    "diagnosis": Obj({"bottleneck": TEXT, "node": TEXT, "evidence": TEXTS, "advice": TEXTS}),
}, required=("nodes", "world_size", "step_s"))
LATENCY = Obj(dict.fromkeys(("p50", "p90", "p99"), SECONDS))

KIND_FIELDS: dict[str, Obj] = {
    "fsdp": FSDP,
    "nccl-tests": COLLECTIVES,
    "collectives": COLLECTIVES,
    "storage": Obj({"params": Obj({"nodes": POSITIVE, "target": TEXT, "block_seq": TEXT}),
                    "metrics": Obj({**dict.fromkeys(STORAGE_PHASES, THROUGHPUT),
                                    "expected_mb_per_s": MB_PER_S})}),
    "scaling": Obj({"params": Obj({"nodes": ListOf(POSITIVE), "records": TEXTS, "model": TEXT,
                                   "mode": TEXT}),
                    "metrics": Obj({"sizes": ListOf(SCALING_SIZE), "bottleneck": TEXT,
                                    "node": TEXT, "summary": TEXT, "evidence": TEXTS,
                                    "advice": TEXTS, "prediction_gaps": TEXTS})}),
    "inference": Obj({"metrics": Obj({
        "decode": ListOf(Obj({"batch": POSITIVE, "tokens_per_s": PER_S, "tpot_s": SECONDS})),
        "prefill": ListOf(Obj({"prompt_len": POSITIVE, "tokens_per_s": PER_S,
                               "ttft_s": SECONDS})),
        "roofline": Obj({"decode": ListOf(Obj({"batch": POSITIVE, "fraction": RATIO,
                                               "bound_tokens_per_s": PER_S}))}),
        "test_time": Obj({"usd_per_million_output_tokens": Num(0, 1e12, unit="USD"),
                          "tokens_per_s": PER_S})})}),
    "serving": Obj({"metrics": Obj({"levels": ListOf(Obj({
        "concurrency": POSITIVE,
        **dict.fromkeys(("requests_per_s", "output_tokens_per_s", "goodput_requests_per_s"),
                        PER_S),
        **dict.fromkeys(("ttft_s", "tpot_s", "itl_s", "e2e_s"), LATENCY)},
        required=("concurrency",)))})}),
    "health": Obj({"metrics": Obj({"nodes": Obj(others=Obj(others=None))})}),
    "slow-nodes": Obj({"metrics": Obj({"median_gbps": GB_PER_S, "blamed": TEXTS,
                                       "drained": TEXTS, "rounds": COUNT, "wall_s": SECONDS})}),
}
# Fields a reader computes with together: (kind, when this is there, these must be too).
NEEDED_WITH = (
    ("fsdp", "metrics.breakdown", ("params.model_args", "params.world_size",
                                   "params.ranks_per_node")),  # diagnose: FSDP's traffic
)


Where = tuple[str | int, ...]  # keys from the record down; made text only for a message


def _where(keys: Where) -> str:
    text = ""
    for key in keys:
        text = _child(text, key)
    return text.lstrip(".")


def _check_spec(value: Any, spec: Spec, keys: Where) -> None:
    """RecordError naming the first value at ``keys`` (or inside it) that ``spec`` refuses;
    recursion follows the spec, which is a few levels deep, never the record."""
    if value is None:
        return
    if isinstance(spec, Num):  # a bool is an int to Python, no number to a reader
        if isinstance(value, bool) or not isinstance(value, int if spec.whole else int | float):
            raise RecordError(f"{_where(keys)}: {_show(value)} is not {spec.expected()}")
        if not spec.low <= value <= spec.high:
            raise RecordError(f"{_where(keys)}: {_show(value)} is out of range, expected "
                              f"{spec.expected()}")
    elif isinstance(spec, Text):
        if not isinstance(value, str):
            raise RecordError(f"{_where(keys)}: {_show(value)} is not text")
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise RecordError(f"{_where(keys)}: {_show(value)} is not a list")
        for index, item in enumerate(value):
            _check_spec(item, spec.item, (*keys, index))
    else:
        if not isinstance(value, dict):
            raise RecordError(f"{_where(keys)}: {_show(value)} is not an object")
        for key in spec.required:
            if value.get(key) is None:
                raise RecordError(f"{_where((*keys, key))}: missing, readers need it")
        for key, item in value.items():
            if (inner := spec.fields.get(key, spec.others)) is not None:
                _check_spec(item, inner, (*keys, key))


def _at(rec: dict[str, Any], dotted: str) -> Any:
    value: Any = rec
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def check_fields(rec: dict[str, Any]) -> None:
    """The fields readers rely on in a record of its kind (:data:`KIND_FIELDS`): right type,
    sane range, present where a reader needs them together (:data:`NEEDED_WITH`)."""
    kind = rec["kind"]
    if kind in KIND_FIELDS:
        _check_spec(rec, KIND_FIELDS[kind], ())
    for needs_kind, present, needed in NEEDED_WITH:
        if kind == needs_kind and _at(rec, present) is not None:
            for name in needed:
                if _at(rec, name) is None:
                    raise RecordError(f"{name}: missing, and a {kind} record with {present} "
                                      "needs it")


def validate_record(rec: Any, _values_checked: bool = False, *,
                    fields: bool = True) -> dict[str, Any]:
    """Check a record before it is stored or read; return it.

    The envelope (fields, kinds, statuses, cluster types, a sane ``created``), every value
    (see :func:`check_values`, :data:`MAX_RECORD_BYTES`) and, with ``fields``, what readers
    rely on in the kind's params and metrics (:func:`check_fields`): the store's door,
    passed by ``ResultStore.add``, every record read from the store and every record file
    read (:func:`read_record`). :func:`write_record` checks all but the fields.
    ``_values_checked``: :func:`_loads_record` has shown that the values and the size pass.
    """
    if not isinstance(rec, dict):
        raise RecordError("a result record is a JSON object")
    if not _values_checked:
        check_values(rec)
    if rec.get("schema") != SCHEMA:
        raise RecordError(f"schema is {_show(rec.get('schema'))}, expected {SCHEMA!r}")
    for key, typ in (("id", str), ("kind", str), ("created", str), ("cluster", dict),
                     ("software", dict), ("params", dict), ("metrics", dict),
                     ("verdict", dict), ("raw_logs", list)):
        if not isinstance(rec.get(key), typ):
            raise RecordError(f"field {key!r} missing or not a {typ.__name__}")
    if rec["kind"] not in KINDS:
        raise RecordError(f"unknown kind {_show(rec['kind'])}")
    if rec["verdict"].get("status") not in STATUSES:
        raise RecordError(f"unknown verdict status {_show(rec['verdict'].get('status'))}")
    _check_envelope_fields(rec)
    if fields:
        check_fields(rec)
    if _values_checked:
        return rec
    size = len(dumps_record(rec))
    if size > MAX_RECORD_BYTES:
        raise RecordError(f"record is {size} bytes, more than the limit of {MAX_RECORD_BYTES}")
    return rec


def finite_or_null(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None: JSON has no NaN, and null is what
    a record says for a figure that was not measured (a percentile of no steps)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def dumps_record(rec: dict[str, Any], indent: int | None = None) -> str:
    return json.dumps(rec, indent=indent, sort_keys=True, allow_nan=False)


def loads_record(text: str | bytes, source: str | None = None) -> dict[str, Any]:
    """Parse and validate record JSON from a file or the store. ``NaN``/``Infinity``, which
    older writers emitted for unmeasured figures, read as null. Errors name ``source``."""
    try:
        return _loads_record(text)
    except RecordError as exc:
        raise RecordError(f"{source}: {exc}" if source else str(exc)) from None


def _loads_record(text: str | bytes) -> dict[str, Any]:
    try:
        data = json.loads(text, parse_constant=lambda _name: None)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError:
        raise RecordError("not UTF-8 text") from None
    except RecursionError:
        raise RecordError(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # an integer longer than Python converts (4300 digits)
        raise RecordError("a number too long to read") from None
    # Readers of the store decode every record they show, so the common case takes the fast
    # path. A lone surrogate can only come from a \u escape or non-ASCII input. Size: what
    # JSON text parses to dumps to at most 6 characters per UTF-8 byte of the text (a raw
    # DEL becomes \u007f, "1e15" becomes 1000000000000000.0, "," becomes ", "), so text of
    # at most an eighth of the limit cannot dump past it.
    ascii_only = text.isascii()
    escapes = "\\u" in text if isinstance(text, str) else b"\\u" in text
    size = len(text) if ascii_only or isinstance(text, bytes) else 4 * len(text)
    fast = (size <= MAX_RECORD_BYTES // 8 and isinstance(data, dict)
            and _plain_json_values(data, text_may_hold_surrogates=not ascii_only or escapes))
    return validate_record(data, _values_checked=fast)


def write_record(path: str | os.PathLike[str], rec: dict[str, Any]) -> Path:
    """Validate and write atomically (non-finite floats as null); returns the path.

    A run's fields are written even where readers would refuse them (``fields=False``): the
    file is the measurement, nothing is lost, and ``pctk results add`` names what is wrong.
    """
    rec = validate_record(finite_or_null(rec), fields=False)
    text = dumps_record(rec, indent=2)
    if len(text) > MAX_FILE_BYTES:  # ASCII (json escapes the rest), so characters are bytes
        text = dumps_record(rec)
    return atomic_write_text(path, text + "\n")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a file whole or not at all (a temporary file beside it, then a rename): a
    reader, or a writer stopped by a signal half-way, never leaves a torn file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; OSError or RecordError else.

    Opened non-blocking, so a FIFO is refused instead of waiting for a writer.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError(f"{path}: not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise RecordError(f"{path}: larger than {limit} bytes")
    return data


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a record file (RecordError for a bad one, OSError if unreadable)."""
    return loads_record(read_bounded(path, MAX_FILE_BYTES), source=str(path))
