"""Launcher of the fused int8 MMQ family (kernels/cuda/mmq.cu).

One timed run is what a prefill pays: Q8_1-quantize the float32 activations (its own kernel),
the fused GEMM, and the split-K reduction when K is split. The compile-time parameters are
the macros of mmq.cu; `SPLITK` (0 = auto) is the only launch-time one.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import nvcc
from kernels.family import Problem, Variant, rotation_copies

MMQ_CU = Path(__file__).parent / "cuda" / "mmq.cu"

QTYPE_ID = {"q4_K": 0, "q5_K": 1, "q6_K": 2, "q8_0": 3}
# bytes per 256 k of a weight row, 16-byte chunks staged per row (q6_K: aligned window)
RAW_BYTES = {"q4_K": 144, "q5_K": 176, "q6_K": 210, "q8_0": 272}
RAW_CHUNKS = {"q4_K": 9, "q5_K": 11, "q6_K": 14, "q8_0": 17}
WEIGHT_PAD = 256  # bytes past the last row: the q6_K aligned window may read up to 14 beyond

# RESCALE (mmq_core.cuh): 0 = (d_x * sw) * float(I) per element, 1 = d_x * (sw * I) with the weight
# scale fused into the int -> float conversion (one FFMA): fewer instructions per IMMA, default 0 so
# the existing configurations' code is unchanged. Q6SUB (q6_K's unpack): 1 = q6 - 32 by a per-byte
# subtract that cannot borrow instead of the emulated saturating __vsubss4; no effect on other types.
DEFAULTS = {"BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 2, "CVT": 1, "MIN_BLOCKS": 1,
            "RESCALE": 0, "Q6SUB": 0, "SPLITK": 0}
COMPILE_KEYS = ("BM", "BN", "WARPS_M", "WARPS_N", "STAGES", "CVT", "MIN_BLOCKS", "RESCALE", "Q6SUB")


# types whose large-T tile takes the folded rescale (RESCALE=1): run 17 measured +5-7 % for them
# without spills; q4_K's tile spills 8 B with it, so it keeps the verified one
FOLDED_RESCALE = ("q5_K", "q6_K", "q8_0")


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:
    """A starting configuration per token count (and, at large T, type), used until a study
    promotes a champion (tiles: the q4_K 4096x14336 sweep of 2026-12-02; the rescale: run 17's
    sweep of all types at T=1024/4096, docs/perf-log.md)."""
    if T <= 32:
        return {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    if T <= 64:
        return {"BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 3}
    if T <= 256:
        return {"BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 2}
    large = {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2}
    return {**large, "RESCALE": 1} if qtype in FOLDED_RESCALE else large


def full_params(params: dict) -> dict:
    return {**DEFAULTS, **params}


def family_compile_params(params: dict) -> dict:
    """The parameters that change the compiled binary (SPLITK is chosen at launch)."""
    p = full_params(params)
    return {k: p[k] for k in COMPILE_KEYS}


def threads(params: dict) -> int:
    p = full_params(params)
    return 32 * p["WARPS_M"] * p["WARPS_N"]


def smem_bytes(params: dict, qtype: str) -> int:
    """Dynamic shared memory of one CTA; mirrors kSmemBytes in mmq.cu (checked on the GPU)."""
    p = full_params(params)
    bm, bn = p["BM"], p["BN"]
    stage = bm * RAW_CHUNKS[qtype] * 16 + bn * (256 + 32) + bn * 64
    return p["STAGES"] * stage + bm * 256 + bm * 64 + bn * 64


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    """None when the configuration can be built for the device, else the one-line reason."""
    p = full_params(params)
    if p["BM"] % (16 * p["WARPS_M"]):
        return f"BM={p['BM']} is not a multiple of 16*WARPS_M={16 * p['WARPS_M']}"
    if p["BN"] % (8 * p["WARPS_N"]):
        return f"BN={p['BN']} is not a multiple of 8*WARPS_N={8 * p['WARPS_N']}"
    if not 1 <= p["STAGES"] <= 4:
        return f"STAGES={p['STAGES']} outside 1..4"
    for key in ("RESCALE", "Q6SUB"):
        if p[key] not in (0, 1):
            return f"{key}={p[key]} is not 0 or 1"
    if threads(p) > 1024:
        return f"{threads(p)} threads per CTA > 1024"
    return smem_limit_reason(smem_bytes(p, qtype), device_info)


def smem_limit_reason(need: int, device_info: dict) -> str | None:
    """Why a CTA of `need` bytes of shared memory cannot launch here, or None (every family's last check)."""
    limit = device_info.get("smem_per_block_optin", 227 * 1024)
    return f"shared memory {need} B > device limit {limit} B" if need > limit else None


def check_shape(qtype: str, M: int, K: int, T: int) -> None:
    if qtype not in QTYPE_ID:
        raise ValueError(f"mmq: unsupported quant type {qtype!r} (have {', '.join(QTYPE_ID)})")
    if K % 256:
        raise ValueError(f"mmq: K={K} is not a multiple of 256 (one {qtype} super-block)")
    if M < 1 or T < 1:
        raise ValueError(f"mmq: need M >= 1 and T >= 1, got M={M}, T={T}")


def ctas_per_sm(n_threads: int, smem: int, device_info: dict, regs: int) -> int:
    """CTAs of `n_threads` threads, `smem` bytes and `regs` registers per thread that one SM
    holds at once (>= 1): registers are given out 8 per thread at a time, and an SM holds 32 CTAs at most."""
    regs = -(-max(1, regs) // 8) * 8
    return max(1, min(device_info.get("smem_per_sm", 228 * 1024) // (smem + 1024), 2048 // n_threads,
                      65536 // (regs * n_threads), 32))


def cta_slots(n_threads: int, smem: int, device_info: dict, regs: int) -> int:
    """CTAs the whole GPU holds at once: SMs x ctas_per_sm."""
    return device_info.get("sm_count", 132) * ctas_per_sm(n_threads, smem, device_info, regs)


def choose_splitk(params: dict, smem: int, M: int, T: int, K: int, device_info: dict, regs: int,
                  n_threads: int) -> int:
    """Split K when the (row tile x token tile) grid of CTAs (`smem` bytes each) cannot fill the GPU once.
    A kernel that splits K inside a thread-block cluster (CLUSTER > 1) splits it that many ways."""
    if params.get("CLUSTER", 1) > 1:
        return params["CLUSTER"]
    p = full_params(params)
    if p["SPLITK"]:
        return max(1, min(p["SPLITK"], K // 256))
    tiles = math.ceil(T / p["BN"]) * math.ceil(M / p["BM"])
    slots = cta_slots(n_threads, smem, device_info, regs)
    if tiles >= slots:
        return 1
    # fill at most one wave: a 1.2-wave grid costs two full rounds
    return max(1, min(slots // tiles, (K // 256) // 2, 16))


class MMQFamily:
    """The fused int8 family; subclasses (the f16 path) swap the .cu file, kernel names,
    shared-memory formula and the Bound that owns the activation format."""

    name = "mmq_base"
    backend = "cuda"
    parity = "int"
    cu_file = MMQ_CU
    kernel_name = "mmq_gemm"
    reduce_name = "mmq_splitk_reduce"
    smem_symbol = "mmq_smem_bytes"

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def make_bound(self, device, variant: Variant, handle: dict, problem: Problem):
        return MMQBound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        """Configurations a device call builds without a study (scripts/precompile.py compiles them)."""
        return [DEFAULTS, *(heuristic_params(t, q) for t in (1, 16, 32, 64, 128, 256, 512, 2048)
                            for q in QTYPE_ID)]  # every (T, type) branch

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {"QTYPE": QTYPE_ID[qtype], **{k: p[k] for k in COMPILE_KEYS}}

    def source(self, params: dict, qtype: str) -> str:
        return nvcc.render_source(self.cu_file, self.defines(params, qtype))

    def complete(self, params: dict) -> dict:
        """The full parameter set a variant records (defaults filled in, derived ones set)."""
        return full_params(params)

    def threads(self, params: dict) -> int:
        """Threads per CTA (the warp-specialized wgmma kernel adds a producer warpgroup)."""
        return threads(params)

    def target_arch(self, device_arch: str, params: dict | None = None) -> str:
        """The nvcc target of a configuration on a device: its own arch (the wgmma families, and a direct kernel
        with WG, ask for sm_90a)."""
        return device_arch

    def compile_only(self, params: dict, qtype: str, arch: str = "sm_90") -> nvcc.Compiled:
        p = self.complete(params)
        return nvcc.compile_cubin(self.source(p, qtype), arch=self.target_arch(arch, p))

    def build(self, params: dict, qtype: str, device) -> Variant:
        p = self.complete(params)
        reason = self.invalid(p, qtype, device.info)
        if reason:
            raise ValueError(f"{self.name}: {reason}")
        source = self.source(p, qtype)
        compiled = nvcc.compile_cubin(source, arch=self.target_arch(device.info.get("arch", "sm_90"), p))
        module = device.load(compiled)
        smem = self.smem(p, qtype)
        on_device = module.read_constant_int(self.smem_symbol)
        if on_device != smem:
            raise RuntimeError(f"{self.name}: smem formula {smem} != kernel's {on_device}")
        helpers = [self.reduce_name] if self.reduce_name else []  # None: the kernel reduces (or never splits)
        resources = compiled.summary([self.kernel_name, *helpers], dynamic_smem_bytes={self.kernel_name: smem})
        resources.update(device_arch=device.info["arch"], smem_limit_bytes=device.info.get("smem_per_block_optin"),
                         threads=self.threads(p))
        handle = {"module": module, "compiled": compiled, "smem": smem, "threads": self.threads(p),
                  "gemm": module.kernel(self.kernel_name, smem),
                  **({"reduce": module.kernel(self.reduce_name, 0)} if self.reduce_name else {})}
        return Variant(family=self.name, params=p, qtype=qtype, source=source,
                       resources=resources, impl=_Impl(self, device, handle))


class _Impl:
    def __init__(self, family: MMQFamily, device, handle: dict) -> None:
        self.family, self.device, self.handle = family, device, handle

    def prepare(self, variant: Variant, problem: Problem):
        return self.family.make_bound(self.device, variant, self.handle, problem)


class MMQBound:
    """Device buffers for one problem; run() = activation pass, GEMM, split-K reduction,
    rotating through input copies. Subclasses change the activation format through
    `alloc_activation` / `activation_pass` / `activation_args` (the f16 path does)."""

    def __init__(self, device, variant: Variant, handle: dict, problem: Problem) -> None:
        wl = problem.workload
        check_shape(variant.qtype, wl.M, wl.K, wl.T)
        self.device, self.handle, self.wl = device, handle, wl
        p = variant.params
        self.smem = handle["smem"]
        self.splitk = self.choose_split(p, variant.resources.get("registers", 128), handle["threads"])
        self.row_bytes = problem.w_packed.shape[1]
        w = np.concatenate([self.host_weights(problem.w_packed).reshape(-1), np.zeros(WEIGHT_PAD, np.uint8)])
        n = rotation_copies(device.info.get("l2_bytes"), w.nbytes + problem.x.nbytes)
        self.w = [device.to_device(w) for _ in range(n)]
        self.x = [device.to_device(self.host_activation(problem.x)) for _ in range(n)]
        self.scratch = self.alloc_activation(wl.T, wl.K)
        self.out = device.empty((wl.T, wl.M), np.float32)
        in_kernel = self.splits_summed_in_kernel(p)
        self.partial = device.empty((self.splitk, wl.T, wl.M), np.float32) if self.splitk > 1 and not in_kernel else None
        self.grid = (math.ceil(wl.T / p["BN"]), math.ceil(wl.M / p["BM"]), self.splitk)
        self.block = (handle["threads"], 1, 1)
        # (the wgmma family's may be programmatic dependent launches)
        self.gemm, self.reduce = handle["gemm"], handle.get("reduce")
        self.i = 0

    def choose_split(self, params: dict, registers: int, n_threads: int) -> int:
        """How many ways the GEMM splits K for this problem (a family with limits of its own narrows it)."""
        wl = self.wl
        return choose_splitk(params, self.smem, wl.M, wl.T, wl.K, self.device.info, registers, n_threads)

    def splits_summed_in_kernel(self, params: dict) -> bool:
        """Whether the GEMM adds a split K's partial sums into C itself (no partial buffer, no reduce): here the
        in-cluster split (CLUSTER > 1)."""
        return params.get("CLUSTER", 1) > 1

    def split_sum_args(self) -> tuple:
        """The GEMM's trailing arguments when its own last CTA per tile adds the split-K partial sums
        (then there is no reduce launch); none here."""
        return ()

    def extra_args(self) -> tuple:
        """More trailing GEMM arguments that leave the split-K reduce as it is (after split_sum_args')."""
        return ()

    def host_weights(self, w_packed: np.ndarray) -> np.ndarray:
        """The packed weights as the GEMM reads them (a family with a layout of its own reorders them once, here)."""
        return w_packed

    # ---- activation format: Q8_1 (q, d, s) from the standalone quantize kernel ----
    def host_activation(self, x: np.ndarray) -> np.ndarray:
        """The activation as it reaches the GPU (float32: each run() pays its conversion)."""
        return np.ascontiguousarray(x, np.float32)

    def alloc_activation(self, T: int, K: int) -> list:
        d = self.device
        return [d.empty((T, K), np.int8), d.empty((T, K // 32), np.float32), d.empty((T, K // 32), np.int32)]

    def activation_pass(self, x) -> None:
        from kernels import q8_1_gpu

        q8_1_gpu.quantize_into(self.device, x, *self.scratch, self.wl.T, self.wl.K)

    def activation_args(self) -> tuple:
        return tuple(buf.ptr for buf in self.scratch)

    def run(self) -> None:
        wl, i = self.wl, self.i
        self.i = (self.i + 1) % len(self.w)
        self.current = i
        self.activation_pass(self.x[i])
        dst = self.partial if self.partial is not None else self.out
        sum_args = self.split_sum_args()
        self.gemm.launch(self.grid, self.block,
                         (self.w[i].ptr, *self.activation_args(), dst.ptr,
                          np.int32(wl.M), np.int32(wl.T), np.int32(wl.K),
                          np.int64(self.row_bytes), *sum_args, *self.extra_args()), self.smem)
        if self.partial is not None and not sum_args:
            n = wl.T * wl.M
            self.reduce.launch((min(4096, math.ceil(n / 256)), 1, 1), (256, 1, 1),
                               (self.partial.ptr, self.out.ptr, np.int64(n), np.int32(self.splitk)), 0)

    def output(self) -> np.ndarray:
        self.device.synchronize()
        return self.out.get()

    def poison(self) -> None:
        self.device.fill_nan(self.out)
        if self.partial is not None:
            self.device.fill_nan(self.partial)

    def release(self) -> None:
        for buf in [*self.w, *self.x, *self.scratch, self.out, self.partial]:
            if buf is not None:
                buf.release()


FAMILY = MMQFamily()
