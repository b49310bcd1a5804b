"""SASS instruction counts of an MMQ kernel's main loop, off the GPU (nvcc + cuobjdump only), to
compare configurations and compile-time options as issue slots per tensor-core instruction
(`kernels.nvcc.sass_main_loop`: the unrolled compute part after the loop's last barrier is exact
per super-block; the unpack/staging part is its static size, loops counted once).

    python3 scripts/sass_loop.py q6_K '{"BM":128,"BN":128,"WARPS_M":4,"WARPS_N":4,"STAGES":2,"RESCALE":1}' [--ops]
    python3 scripts/sass_loop.py --compare RESCALE=0,1 [--types ...] [--tiles JSON list]
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import families, nvcc  # noqa: E402

LARGE_T_TILES = [  # mmq_base's large-T tiles: the heuristic's, and run 4's best per type (docs/sweeps)
    {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2},
    {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 1},
    {"BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "MIN_BLOCKS": 2},
]


def report(qtype: str, params: dict, family_name: str = "mmq_base", show_ops: bool = False) -> dict:
    family = families.get(family_name)
    compiled = family.compile_only(params, qtype)
    s = compiled.summary([family.kernel_name])
    unpack, compute = nvcc.sass_main_loop(compiled.sass, family.kernel_name)
    imma = compute["IMMA"]
    row = {"qtype": qtype, "params": params, "registers": s["registers"],
           "spill_bytes": s["spill_store_bytes"] + s["spill_load_bytes"], "imma": imma,
           "compute": sum(compute.values()), "unpack_static": sum(unpack.values()),
           # q6_K issues two k16 IMMA per 32-k group: per k32 group its rate compares with the others'
           "compute_per_k32": round(sum(compute.values()) / (imma / 2 if qtype == "q6_K" else imma), 2)}
    if show_ops:
        row["compute_ops"] = dict(compute.most_common())
        row["unpack_ops"] = dict(unpack.most_common())
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("qtype", nargs="?")
    ap.add_argument("params", nargs="?", help="JSON dict of compile-time parameters")
    ap.add_argument("--family", default="mmq_base")
    ap.add_argument("--ops", action="store_true", help="also the opcode histogram of each part")
    ap.add_argument("--compare", help="KEY=v0,v1,...: a table of every type x tile x value")
    ap.add_argument("--types", default="q4_K,q5_K,q6_K,q8_0")
    ap.add_argument("--tiles", help="JSON list of parameter dicts (default: the large-T tiles)")
    args = ap.parse_args()
    if not args.compare:
        if not (args.qtype and args.params):
            ap.error("qtype and params, or --compare")
        print(json.dumps(report(args.qtype, json.loads(args.params), args.family, args.ops)))
        return 0
    key, values = args.compare.split("=")
    tiles = json.loads(args.tiles) if args.tiles else LARGE_T_TILES
    print("| type | tile | " + " | ".join(f"{key}={v}: compute/k32, regs, spill B" for v in values.split(",")) + " |")
    print("|---|---|" + "---|" * len(values.split(",")))
    for qtype in args.types.split(","):
        for tile in tiles:
            cells = []
            for v in values.split(","):
                r = report(qtype, {**tile, key: int(v)}, args.family)
                cells.append(f"{r['compute_per_k32']} ({r['compute']}), {r['registers']}, {r['spill_bytes']}")
            print(f"| {qtype} | {json.dumps(tile, separators=(',', ':'))} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
