"""How many thread-block clusters of a wgmma or direct kernel the H200 runs at once (the driver's
cuOccupancyMaxActiveClusters), next to what its grid needs: a cluster kernel whose grid needs
more clusters than fit runs a second, mostly empty wave.

    python3 scripts/cluster_occupancy.py [--type q4_K] [--family wgmma|direct|direct_q8]

(The driver answers 0 for a kernel without clusters, so every case here has them.)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = [  # (what, params): the cluster kernels run 21 measured
    ("MCAST 2 128x256", {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "MCAST": 2}),
    ("MCAST 4 128x256", {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "MCAST": 4}),
    ("MCAST 2 128x128", {"AREG": 1, "BM": 128, "BN": 128, "STAGES": 4, "RAW": 3, "XLOAD": 2, "MCAST": 2}),
    ("CLUSTER 2 128x16", {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "CLUSTER": 2}),
    ("CLUSTER 4 128x16", {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "CLUSTER": 4}),
]
_ONE_LAUNCH = {"PDL": 2, "RING": 2, "XAHEAD": 0, "MINSUM": 1, "XFUSE": 1}
DIRECT_CASES = [  # mmq_direct's K-split clusters (1, CLUSTER, 1): 32 row tiles x CLUSTER CTAs at M = 4096, T = 16
    ("CLUSTER 7 8 warps x2", {**_ONE_LAUNCH, "WARPS": 8, "MIN_BLOCKS": 2, "XSHARED": 8, "CLUSTER": 7}),
    ("CLUSTER 8 8 warps x2", {**_ONE_LAUNCH, "WARPS": 8, "MIN_BLOCKS": 2, "XSHARED": 7, "CLUSTER": 8}),
    ("CLUSTER 8 16 warps x1", {**_ONE_LAUNCH, "WARPS": 16, "MIN_BLOCKS": 1, "RING": 3, "XSHARED": 7, "CLUSTER": 8}),
]

_CLUSTERQ = {"PDL": 0, "RING": 2, "SBMAJOR": 1, "XSHARED": 8}
DIRECT_Q8_CASES = [  # mmq_direct_q8's CLUSTERQ clusters (CLUSTERQ, 1, 1) along M: 32 row CTAs x 8 K splits at 4096x14336
    ("CLUSTERQ 8 8 warps x2", {**_CLUSTERQ, "WARPS": 8, "MIN_BLOCKS": 2, "CLUSTERQ": 8}),
    ("CLUSTERQ 4 8 warps x2", {**_CLUSTERQ, "WARPS": 8, "MIN_BLOCKS": 2, "CLUSTERQ": 4}),
    ("CLUSTERQ 2 8 warps x2", {**_CLUSTERQ, "WARPS": 8, "MIN_BLOCKS": 2, "CLUSTERQ": 2}),
    ("CLUSTERQ 8 16 warps x1", {**_CLUSTERQ, "WARPS": 16, "MIN_BLOCKS": 1, "CLUSTERQ": 8}),
]
FAMILIES = ("wgmma", "direct", "direct_q8")


def cases(family: str):
    """(the family's launcher, its cases, a case's cluster dims, the CTAs of its grid at 4096 rows)."""
    from kernels import mmq_direct, mmq_direct_q8, mmq_wgmma

    if family == "wgmma":
        return mmq_wgmma.FAMILY, CASES, lambda p: (1, p["MCAST"], p["CLUSTER"]), lambda p: 128
    if family == "direct":
        return mmq_direct.FAMILY, DIRECT_CASES, lambda p: (1, p["CLUSTER"], 1), lambda p: 4096 // p["BM"] * p["CLUSTER"]
    return (mmq_direct_q8.FAMILY, DIRECT_Q8_CASES, lambda p: (p["CLUSTERQ"], 1, 1),
            lambda p: 4096 // p["BM"] * 8)  # 8 K splits: a full wave of 264 at 4096x14336, T = 16 (the launcher
                                            # takes 7 for CLUSTERQ, 90 % of the slots: run 100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--type", default="q4_K")
    ap.add_argument("--family", choices=FAMILIES, default="wgmma")
    args = ap.parse_args()
    from kernels.device import open_device

    device = open_device("cuda")
    sms = device.info["sm_count"]
    family, family_cases, cluster_dims, grid_ctas_of = cases(args.family)
    for what, params in family_cases:
        variant = family.build(params, args.type, device)
        p, handle = variant.params, variant.impl.handle
        dims = cluster_dims(p)
        cluster = math.prod(dims)
        fn = device.dependent_kernel(handle["compiled"], family.kernel_name, handle["smem"])
        fit = fn.max_active_clusters(dims, (handle["threads"], 1, 1), handle["smem"])
        grid_ctas = grid_ctas_of(p)
        print(json.dumps({"kernel": what, "cluster_size": cluster, "smem": handle["smem"],
                          "max_active_clusters": fit, "ctas_at_once": fit * cluster, "sms": sms,
                          "full_wave_clusters": sms // cluster, "grid_ctas": grid_ctas,
                          "waves_for_grid": math.ceil(grid_ctas / cluster / max(fit, 1))}))
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))
