"""How many thread-block clusters of a wgmma kernel the H200 runs at once (the driver's
cuOccupancyMaxActiveClusters), next to what its grid needs: a cluster kernel whose grid needs
more clusters than fit runs a second, mostly empty wave.

    python3 scripts/cluster_occupancy.py [--type q4_K]

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--type", default="q4_K")
    args = ap.parse_args()
    from kernels import mmq_wgmma
    from kernels.device import open_device

    device = open_device("cuda")
    sms = device.info["sm_count"]
    for what, params in CASES:
        variant = mmq_wgmma.FAMILY.build(params, args.type, device)
        p, handle = variant.params, variant.impl.handle
        cluster = p["MCAST"] * p["CLUSTER"]
        fn = device.dependent_kernel(handle["compiled"], mmq_wgmma.FAMILY.kernel_name, handle["smem"])
        fit = fn.max_active_clusters((1, p["MCAST"], p["CLUSTER"]), (handle["threads"], 1, 1), handle["smem"])
        print(json.dumps({"kernel": what, "cluster_size": cluster, "smem": handle["smem"],
                          "max_active_clusters": fit, "ctas_at_once": fit * cluster, "sms": sms,
                          "full_wave_clusters": sms // cluster,
                          "waves_for_128_ctas": math.ceil(128 / cluster / max(fit, 1))}))
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))
