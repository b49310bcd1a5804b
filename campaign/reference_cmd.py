"""`campaign reference`: quantize a weight matrix (random, a .npy file or a GGUF tensor), run
both CPU references on activations (random or a .npy file) and print their agreement and time.
The quickest check of the formats and the math contract on any machine."""
from __future__ import annotations

import time

import numpy as np

from campaign.errors import CampaignError


def load_matrix(path: str, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {what} from {path}: {str(exc).splitlines()[0]}") from None


def run(args) -> int:
    """Bad input (corrupt GGUF, NaN/Inf, a K that is not a multiple of the block) -> one line."""
    try:
        return _run(args)
    except ValueError as exc:  # kernels/ report bad input as ValueError (GGUFFormatError is one)
        raise CampaignError(str(exc)) from None


def _run(args) -> int:
    from kernels import gguf_io, quant, reference

    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    if args.gguf:
        qtype, packed, (M, K) = gguf_io.read_tensor(args.gguf, args.tensor)
        print(f"{args.gguf}:{args.tensor}: {qtype} [{M}, {K}]")
    else:
        qtype = quant.get(args.type).name
        w = load_matrix(args.weights, "weights") if args.weights else \
            (rng.standard_normal((args.M, args.K)) * 0.02).astype(np.float32)
        packed, rms = quant.get(qtype).quantize_report(w)
        M, K = w.shape
        print(f"quantized {qtype} [{M}, {K}] in {time.perf_counter() - t0:.2f} s, RMS error {rms:.3g} "
              f"({rms / float(np.sqrt(np.mean(np.square(w, dtype=np.float64)))):.3%} of RMS)")
    x = load_matrix(args.x, "activations") if args.x else rng.standard_normal((args.T, K)).astype(np.float32)
    if x.ndim != 2 or x.shape[1] != K:
        raise ValueError(f"activations have shape {x.shape}; need [T, {K}] for these weights")
    t0 = time.perf_counter()
    xq = quant.quantize_q8_1(x)
    c_int = reference.gemm_int(packed, qtype, xq)
    t_int = time.perf_counter() - t0
    t0 = time.perf_counter()
    c_64 = reference.gemm_float64(packed, qtype, x)
    t_64 = time.perf_counter() - t0
    rel = float(np.linalg.norm(c_int - c_64) / max(np.linalg.norm(c_64), 1e-300))
    flops = 2.0 * x.shape[0] * M * K
    print(f"integer contract (Q8_1 activations): {t_int:.2f} s ({flops / t_int / 1e9:.1f} GFLOP/s)")
    print(f"float64 dequant(W).x:               {t_64:.2f} s ({flops / t_64 / 1e9:.1f} GFLOP/s)")
    print(f"relative difference (activation quantization error): {rel:.3g}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("reference", help="quantize a matrix, run both CPU references, print error and time")
    p.add_argument("--type", default="q4_K", help="quant type for --weights or the random matrix")
    p.add_argument("--M", type=int, default=4096)
    p.add_argument("--K", type=int, default=4096)
    p.add_argument("--T", type=int, default=64)
    p.add_argument("--weights", help="float32 [M, K] .npy to quantize (instead of a random matrix)")
    p.add_argument("--gguf", help="read the quantized weight from this GGUF file (with --tensor)")
    p.add_argument("--tensor", help="tensor name in --gguf")
    p.add_argument("--x", help="float32 [T, K] .npy activations (instead of random ones)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)
