"""Lever `direct`: the few-token q4_K GEMM with weights loaded straight into `mma.sync` fragments
(kernels/cuda/mmq_direct.cu). Each warp streams its weight rows from global memory into f16 A
fragments (the f16 path's dequant contract) and reads its activations straight from the f16
rows (or from the CTA's copy of them in shared memory): no producer, no CTA barrier past the first two
super-blocks, so the issue slots that bound the 16-token wgmma kernel
(perf log run 29: 197 warp instructions per 64-k step, 47 % of issue slots busy) go to the
dequant (runs 32-37: ~106 per 64-k step). Searched: warps per CTA, CTAs per SM the registers are capped for, whether
a chunk's activations are loaded a chunk ahead (16 registers), how the next weights are fetched
(RING: into registers a super-block ahead, or a per-warp cp.async ring of 2-8 super-blocks in
shared memory: run 32 found the register prefetch waiting on DRAM), whether the CTA stages its K range's
activations in shared memory once (XSHARED; run 36 found 44 % of the activation loads missing L1), whether the weight mins leave
the dequant for a rank-1 term on per-32 activation sums the pass writes (MINSUM: run 42 counted the HSUB2 of each weight pair as 64 of
the loop's 423 instructions), whether a split K's CTAs add their partial sums into the output themselves (ATOMIC: no
reduce launch), whether each biased weight pair is one LOP3 on the word (NIBLOP: 2 instructions fewer per word), whether the k16 steps are
wgmmas on the staged activations (WG: no activation loads, half the mma instructions; run 69), whether the GEMM converts its own f32 activations (XFUSE: one launch, no pass; run 74), whether a row tile's K splits are one thread-block cluster that sums them in shared memory (CLUSTER: no zeroed C, no reds), and whether the GEMM (PDL 1) and
its split-K reduce (PDL 2) are programmatic dependent launches. Its incumbent is the `wgmma`
champion of the regime; the dispatcher prefers it wherever it is promoted."""
from experiments.base import Lever
from kernels import mmq_direct

LEVER = Lever(
    name="direct",
    family="mmq_direct",
    backend="cuda",
    space={
        "WARPS": list(mmq_direct.WARP_COUNTS),
        "MIN_BLOCKS": [1, 2, 3, 4, 5, 6, 8],  # 5: 20 warps of 4 per CTA at 96 registers
        "PDL": [0, 1, 2],
        "XAHEAD": [0, 1, 2],  # activations loaded: as the chunk starts, a chunk ahead, each half two steps ahead
        "RING": [0, 2, 3, 4, 5, 6, 8],  # 0: register prefetch; else each warp's cp.async ring, super-blocks
        "L2PF": [0, 1, 2],  # the ring's copies with L2's 256-byte prefetch hint; 2: the warp's whole rows prefetched into L2 at start
        "MT": [1, 2],  # m16 tiles per warp (2: 32 rows share each activation fragment; with a RING)
        "XSHARED": [0, 2, 4, 5, 6, 7, 8],  # the CTA stages its K range's activations in shared memory (super-blocks; 5: 24 x 1 fills 132 SMs)
        "FIXUP": [0, 1],  # the split-K partial sums added by the last CTA of each tile, not a reduce launch
        "MINSUM": [0, 1],  # the weight mins as a rank-1 term on the pass's activation sums: one f16 op per weight pair
        "ATOMIC": [0, 1, 2],  # a split K's partial sums added into C by red.global.add (zeroed by the pass; 2: by the first split)
        "NIBLOP": [0, 1],  # with MINSUM: each biased weight pair by one LOP3 (the pass permutes the activations to match)
        "CARVEOUT": [0, 1],  # the pass and reduce take the GEMM's shared-memory carveout (no SM reconfiguration between them)
        "WG": [0, 1],  # with XSHARED, MINSUM, MT 1: each k16 step one wgmma m64n16k16 per 4 warps (A from registers)
        "XFUSE": [0, 1],  # with XSHARED: one launch, each CTA converts its own K range's f32 activations (no pass)
        "WTILE": [0, 1, 2],  # the weights uploaded in warp tiles: each ring slot one contiguous range (2: super-block major)
        "CLUSTER": [1, 7, 8],  # the K splits of a row tile as one thread-block cluster summing in shared memory (7, 8: T=16's)
    },
    fixed={"SPLITK": 0},
    defaults={**mmq_direct.DEFAULTS, **mmq_direct.heuristic_params(16)},
    suite="dense_tiny",
    types=mmq_direct.QTYPES,
    incumbent="wgmma",
    valid=lambda params, info, qtype: mmq_direct.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("HMMA",),
    description="q4_K weights straight from global memory into mma.sync f16 fragments, no producer warp (few tokens)",
)
