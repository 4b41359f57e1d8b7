"""``pctk catalog``: look up an instance type; refresh the types the bundled catalog lacks from
the EC2 API (DescribeInstanceTypes) into the state root, where AWS credentials exist.

What refresh stores is only what DescribeInstanceTypes answers (vCPUs, memory, network, EFA,
GPUs); it has no prices and no peak FLOPs, so a refreshed type's price stays unknown and a GPU
is kept only when the catalog knows its model. The bundled, sourced catalog always wins over
a refreshed entry of the same name.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Annotated, Any

import typer

from toolkit import catalog
from toolkit.cliout import JsonOption, emit_json
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text

app = typer.Typer(help="The instance catalog: look up a type; refresh unknown types from the "
                       "EC2 API.", no_args_is_help=True)

# DescribeInstanceTypes' GPU names -> the catalog's accelerator models
GPU_MODELS = {("A100", 40960): "A100-40GB", ("A100", 81920): "A100-80GB", "H100": "H100",
              "H200": "H200", "B200": "B200", "A10G": "A10G", "L4": "L4", "L40S": "L40S"}


def _gpu_model(name: str, mib: int) -> str | None:
    model = GPU_MODELS.get((name, mib)) or GPU_MODELS.get(name)
    return model if isinstance(model, str) else None


def _network_gbps(net: dict[str, Any]) -> float | None:
    """Baseline Gbps: the network cards' baseline sum, else the "25 Gigabit" label."""
    cards = net.get("NetworkCards") or []
    baseline = [c.get("BaselineBandwidthInGbps") for c in cards]
    if baseline and all(isinstance(b, int | float) for b in baseline):
        return float(sum(baseline))
    m = re.search(r"([0-9.]+) Gigabit", str(net.get("NetworkPerformance", "")))
    return float(m.group(1)) if m else None


def entry_from_api(info: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """One DescribeInstanceTypes ``InstanceTypes[]`` item as a catalog entry, or None and why."""
    name = info["InstanceType"]
    if info.get("NeuronInfo") or info.get("InferenceAcceleratorInfo"):
        return None, f"{name}: Neuron/Inferentia devices are not read from the API"
    net = info.get("NetworkInfo") or {}
    gbps = _network_gbps(net)
    if gbps is None:
        return None, f"{name}: no network bandwidth in the answer"
    entry: dict[str, Any] = {
        "vcpus": int(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": info["MemoryInfo"]["SizeInMiB"] / 1024,
        "network_gbps": gbps,
        "efa_supported": bool(net.get("EfaSupported")),
        "efa_interfaces": int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
        if net.get("EfaSupported") else 0,
        "arch": ((info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or [None])[0],
    }
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        gpu = gpus[0]
        mib = int((gpu.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
        model = _gpu_model(str(gpu.get("Name")), mib)
        if model is None:
            return None, f"{name}: GPU {gpu.get('Name')} is not a model the catalog knows"
        entry["accelerator"] = {"model": model, "count": sum(int(g["Count"]) for g in gpus),
                                "memory_mib": mib}
    return entry, ""


def refresh(client: Any, region: str, types: list[str] | None = None) -> dict[str, Any]:
    """Read DescribeInstanceTypes (every page) and store the types the bundled catalog lacks.

    ``client``: a boto3 EC2 client. Returns what was stored and what was skipped."""
    kwargs: dict[str, Any] = {"InstanceTypes": types} if types else {}
    stored: dict[str, Any] = {}
    skipped: list[str] = []
    seen = 0
    for page in client.get_paginator("describe_instance_types").paginate(**kwargs):
        for info in page.get("InstanceTypes", []):
            seen += 1
            name = info["InstanceType"]
            if name in {i.name for i in catalog.all_instances()}:
                continue  # the bundled, sourced entry wins
            entry, why = entry_from_api(info)
            if entry is None:
                skipped.append(why)
            else:
                stored[name] = entry
    doc = {"source": "EC2 DescribeInstanceTypes", "region": region,
           "fetched": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "instance_types": dict(sorted(stored.items()))}
    path = catalog.refreshed_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return {"path": str(path), "region": region, "read": seen, "stored": len(stored),
            "skipped": skipped}


def _ec2_client(region: str) -> Any:
    try:
        import boto3
        from botocore.exceptions import BotoCoreError
    except ImportError as exc:  # pragma: no cover - boto3 comes with aws-parallelcluster
        raise PctkError("boto3 is not installed", "pip install boto3") from exc
    try:
        session = boto3.session.Session(region_name=region)
        if session.get_credentials() is None:
            raise PctkError("no AWS credentials: cannot read the EC2 API",
                            "configure credentials (aws configure, AWS_PROFILE, an instance "
                            "role); the bundled catalog works without them")
        return session.client("ec2")
    except BotoCoreError as exc:
        raise PctkError(f"cannot reach the EC2 API: {exc}") from None


@app.command("refresh")
def refresh_command(
    region: Annotated[str, typer.Option("--region", help="Region to ask.")] = "us-east-1",
    types: Annotated[list[str] | None, typer.Option(
        "--type", help="Only this instance type (repeatable); default: every type.")] = None,
    as_json: bool = JsonOption,
) -> None:
    """Read DescribeInstanceTypes into the state root: types the bundled catalog lacks get
    vCPUs, memory, network, EFA and GPUs (no price). Needs AWS credentials."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = _ec2_client(region)
    try:
        result = refresh(client, region, types)
    except (ClientError, BotoCoreError) as exc:
        raise PctkError(f"DescribeInstanceTypes failed: {exc}") from None
    if as_json:
        emit_json(result)
        return
    typer.echo(f"read {result['read']} instance types from {region}; stored "
               f"{result['stored']} the bundled catalog lacks in {result['path']}")
    for why in result["skipped"]:
        typer.echo(f"skipped {why}")


def figures(inst: catalog.InstanceType) -> list[tuple[str, Any, str]]:
    """(figure, value, value as shown) of every fact of ``inst``, in the catalog's field
    names (``accelerator.peak_bf16_tflops``), so each meets its source under the same key.
    Figures the catalog does not hold (no FP8 peak, no stated bandwidth) are left out."""
    out: list[tuple[str, Any, str]] = [
        ("vcpus", inst.vcpus, f"{inst.vcpus}"),
        ("memory_gib", inst.memory_gib, f"{inst.memory_gib:g} GiB"),
        ("network_gbps", inst.network_gbps, f"{inst.network_gbps:g} Gbit/s"),
        ("efa_supported", inst.efa_supported, "yes" if inst.efa_supported else "no"),
        ("efa_interfaces", inst.efa_interfaces, f"{inst.efa_interfaces}"),
        ("arch", inst.arch, inst.arch or "not stated"),
    ]
    acc = inst.accelerator
    if acc is not None:
        each = "GPU" if acc.kind == "gpu" else "device"

        def per_node(value: float, unit: str) -> str:
            total = value * acc.count
            node = f"{total:,.0f}" if total >= 100 else f"{total:.3g}"
            return f"{value:g} {unit} per {each} ({node} per node)"

        out += [("accelerator.count", acc.count, f"{acc.count} x {acc.model}"),
                ("accelerator.memory_mib", acc.memory_mib,
                 f"{acc.memory_mib:,} MiB ({acc.memory_gib:g} GiB) per {each}"),
                ("accelerator.peak_bf16_tflops", acc.peak_bf16_tflops,
                 per_node(acc.peak_bf16_tflops, "TFLOP/s dense bf16"))]
        if acc.peak_fp8_tflops is not None:
            out.append(("accelerator.peak_fp8_tflops", acc.peak_fp8_tflops,
                        per_node(acc.peak_fp8_tflops, "TFLOP/s dense fp8")))
        if acc.mem_bw_tbps is not None:
            out.append(("accelerator.mem_bw_tbps", acc.mem_bw_tbps,
                        per_node(acc.mem_bw_tbps, "TB/s memory bandwidth")))
    if inst.interconnect is not None:
        out.append(("interconnect", inst.interconnect, inst.interconnect))
    price = (f"${inst.price_usd_per_hour:g}/h ({inst.price_region}, {inst.price_date})"
             if inst.price_usd_per_hour is not None else "unknown")
    out.append(("price_usd_per_hour", inst.price_usd_per_hour, price))
    return out


@app.command("show")
def show_command(
    instance_type: Annotated[str, typer.Argument(metavar="TYPE")],
    as_json: bool = JsonOption,
) -> None:
    """One instance type's facts, each with its value and where it comes from."""
    inst = catalog.get(instance_type)
    srcs = catalog.sources()
    shown = figures(inst)
    if as_json:
        emit_json({
            "name": inst.name, "vcpus": inst.vcpus, "memory_gib": inst.memory_gib,
            "network_gbps": inst.network_gbps, "efa_supported": inst.efa_supported,
            "efa_interfaces": inst.efa_interfaces, "arch": inst.arch,
            "accelerator": (f"{inst.accelerator.count} x {inst.accelerator.model}"
                            if inst.accelerator else None),
            "price_usd_per_hour": inst.price_usd_per_hour, "price_region": inst.price_region,
            "price_date": inst.price_date, "sources": inst.sources,
            "unconfirmed": list(inst.unconfirmed), "notes": list(inst.notes),
            "figures": {name: {"value": value, "shown": text,
                               "sources": inst.sources.get(name, []),
                               "unconfirmed": name in inst.unconfirmed}
                        for name, value, text in shown}})
        return
    typer.echo(f"name: {inst.name}")
    for name, _value, text in shown:
        mark = " (unconfirmed)" if name in inst.unconfirmed else ""
        typer.echo(f"{name}: {text}{mark}")
        keys = inst.sources.get(name)
        if name == "price_usd_per_hour" and inst.price_usd_per_hour is None:
            continue
        typer.echo("  source: " + ("; ".join(srcs.get(k, k) for k in keys) if keys
                                   else "none stated in the catalog"))
    for figure, keys in sorted(inst.sources.items()):  # sourced facts not listed above
        if figure not in {name for name, _v, _t in shown}:
            typer.echo(f"source of {figure}: " + "; ".join(srcs.get(k, k) for k in keys))
    for note in inst.notes:
        typer.echo(f"note: {note}")
