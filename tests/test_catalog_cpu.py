"""CPU instance families (head nodes, CPU queues): every size of the common families is in the
catalog with sourced figures, generated from one rule per family; unknown but well-formed
types are "facts unknown", never refused."""

from __future__ import annotations

import pytest

from toolkit import catalog

# the families ParallelCluster users put in CPU queues and head nodes, and their sizes
# (DescribeInstanceTypes via Karpenter's generated reference [S4e])
FAMILY_SIZES = {
    "c5": ["large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge",
           "24xlarge", "metal"],
    "c6i": ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
            "24xlarge", "32xlarge", "metal"],
    "c7i": ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
            "24xlarge", "48xlarge", "metal-24xl", "metal-48xl"],
    "m5": ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
           "24xlarge", "metal"],
    "m6i": ["large", "32xlarge", "metal"], "m7i": ["large", "48xlarge", "metal-48xl"],
    "r5": ["large", "24xlarge", "metal"], "r6i": ["large", "32xlarge"], "r7i": ["48xlarge"],
    "t3": ["nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"],
    "hpc6a": ["48xlarge"], "hpc6id": ["32xlarge"],
    "hpc7a": ["12xlarge", "24xlarge", "48xlarge", "96xlarge"],
    "hpc7g": ["4xlarge", "8xlarge", "16xlarge"],
    "c6a": ["48xlarge"], "c7a": ["medium", "metal-48xl"], "m6a": ["large"], "m7a": ["large"],
    "c6g": ["medium", "metal"], "c7g": ["16xlarge"], "m6g": ["large"], "m7g": ["metal"],
    "r6g": ["large"], "r7g": ["16xlarge"], "c5n": ["18xlarge"], "t3a": ["micro"],
}

# (type, vCPUs, GiB, Gbps baseline, EFA interfaces, $/h us-east-1 2026-07-20): each row read
# from Karpenter's generated DescribeInstanceTypes reference [S4e] and price file [S4a]
SAMPLES = [
    ("c5.2xlarge", 8, 16, 2.5, 0, 0.34),
    ("c5.9xlarge", 36, 72, 12, 0, 1.53),
    ("c5.metal", 96, 192, 25, 0, 4.08),
    ("c5n.18xlarge", 72, 192, 100, 1, 3.888),
    ("c6i.32xlarge", 128, 256, 50, 1, 5.44),
    ("c7i.metal-24xl", 96, 192, 37.5, 0, 4.7124),
    ("c7i.48xlarge", 192, 384, 50, 1, 8.568),
    ("m5.2xlarge", 8, 32, 2.5, 0, 0.384),
    ("m7i.48xlarge", 192, 768, 50, 1, 9.6768),
    ("r7i.large", 2, 16, 0.781, 0, 0.1323),
    ("r7a.large", 2, 16, 0.781, 0, 0.15215),
    ("c6g.metal", 64, 128, 25, 0, 2.3066),
    ("t3.nano", 2, 0.5, 0.032, 0, 0.0052),
    ("t3.medium", 2, 4, 0.256, 0, 0.0416),
    ("hpc7g.16xlarge", 64, 128, 200, 1, 1.6832),
    ("hpc7a.12xlarge", 24, 768, 300, 2, None),
    ("hpc6id.32xlarge", 64, 1024, 200, 2, None),
    ("c6in.32xlarge", 128, 256, 200, 2, 7.2576),
]


def test_common_cpu_families_are_cataloged() -> None:
    missing = [f"{fam}.{size}" for fam, sizes in FAMILY_SIZES.items() for size in sizes
               if catalog.find(f"{fam}.{size}") is None]
    assert not missing


@pytest.mark.parametrize(("name", "vcpus", "mem", "gbps", "efa", "price"), SAMPLES)
def test_cpu_samples(name: str, vcpus: int, mem: float, gbps: float, efa: int,
                     price: float | None) -> None:
    inst = catalog.get(name)
    assert inst.accelerator is None and inst.gpus == 0
    assert (inst.vcpus, inst.memory_gib, inst.network_gbps) == (vcpus, mem, gbps)
    assert (inst.efa_supported, inst.efa_interfaces) == (bool(efa), efa)
    assert inst.price_usd_per_hour == price


def test_unknown_prices_say_so() -> None:
    """hpc6a/hpc6id/hpc7a are absent from the us-east-1 on-demand price list: no number is
    made up; the price is unknown, marked unconfirmed, and a note says why."""
    for name in ("hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7a.96xlarge"):
        inst = catalog.get(name)
        assert inst.price_usd_per_hour is None and inst.price_date is None
        assert "price_usd_per_hour" in inst.unconfirmed
        assert any("price is unknown" in n for n in inst.notes)


def test_priced_types_carry_region_and_date() -> None:
    inst = catalog.get("m6i.xlarge")
    assert (inst.price_region, inst.price_date) == ("us-east-1", "2026-07-20")
    assert inst.sources["price_usd_per_hour"] == ["S4a"]
    assert inst.sources["vcpus"][0] == "S4e" and inst.arch == "x86_64"
    assert catalog.get("c7g.large").arch == "arm64"


def test_explicit_entries_win_over_the_family_rule() -> None:
    """c5.4xlarge keeps its curated 'up to 10 Gbps' entry (the family rule gives 5)."""
    assert catalog.get("c5.4xlarge").network_gbps == 10
    assert catalog.get("c5.2xlarge").family == "c5"


@pytest.mark.parametrize(("name", "ok"), [
    ("c8i.4xlarge", True), ("p6-b200.48xlarge", True), ("u7i-12tb.224xlarge", True),
    ("c7i.metal-48xl", True), ("t3.nano", True), ("m8g.medium", True),
    ("p5.48xlarg", False), ("p5.48xl", False), ("c5", False), ("c5.2xlarge.x", False),
    ("5c.large", False), ("", False),
])
def test_well_formed(name: str, ok: bool) -> None:
    assert catalog.well_formed(name) is ok
