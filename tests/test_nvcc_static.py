"""CI (nvcc, no GPU): compile, ptxas report, SASS parsing, compile cache, the static gate,
and the CUDA kernels' per-thread code run on the host against the numpy/gguf references."""
from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from experiments.base import Lever
from gates import static
from kernels import dequant_cublas, nvcc, q8_1_gpu
from kernels.family import Variant
from tests.cuda_cases import GGUF_NAME, TYPES, gguf_bf16_bits, q8_1_cases, random_blocks

try:
    NVCC = nvcc.find_nvcc()
except nvcc.CompileError:
    NVCC = None
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MMQ_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cubin-cache"))


def cuda_lever(**kw) -> Lever:
    base = dict(name="t", family="t", backend="cuda", space={}, suite="dense", types=("q4_K",), incumbent=None)
    return Lever(**{**base, **kw})


IMMA_SRC = r"""
extern "C" __global__ void imma(const int* a, const int* b, int* c) {
    int d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d0), "+r"(d1), "+r"(d2), "+r"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    c[threadIdx.x] = d0 + d1 + d2 + d3;
}
"""
HMMA_SRC = r"""
extern "C" __global__ void hmma(const unsigned* a, const unsigned* b, float* c) {
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    c[threadIdx.x] = d0 + d1 + d2 + d3;
}
"""
# 64 live accumulators: under -maxrregcount=24 ptxas must spill
PRESSURE_SRC = r"""
extern "C" __global__ void pressure(const float* __restrict__ x, float* __restrict__ y, int n) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = x[j * n + threadIdx.x];
    for (int it = 0; it < n; ++it) {
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) & 63] + x[it];
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    y[threadIdx.x] = s;
}
"""
# an array indexed at run time lives in local memory (stack), no "spill" reported
LOCAL_ARRAY_SRC = r"""
extern "C" __global__ void local_array(float* x, int i) {
    float a[256];
    for (int k = 0; k < 256; ++k) a[k] = x[k] * k;
    x[0] = a[i & 255] + a[(i * 7) & 255];
}
"""
BIG_SMEM_SRC = r"""
extern "C" __global__ void big_smem(float* x) {
    __shared__ float tile[10240];  // 40 KiB static
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = tile[(threadIdx.x + 1) % 10240];
}
"""


# ---------------------------------------------------------------- parsing (no compile)

def test_ptxas_log_parser_reads_current_and_old_layouts():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmILi64EEvPKfPf' for 'sm_90'
ptxas info    : Function properties for _Z4gemmILi64EEvPKfPf
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Function properties for __internal_helper
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'old_style' for 'sm_80'
ptxas info    : Function properties for old_style
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 1024 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
"""
    res = nvcc.parse_ptxas_log(log)
    assert set(res) == {"_Z4gemmILi64EEvPKfPf", "old_style"}  # the non-entry helper is no kernel
    g = res["_Z4gemmILi64EEvPKfPf"]
    assert (g["registers"], g["barriers"], g["smem_static_bytes"]) == (168, 1, 4096)
    assert (g["stack_bytes"], g["spill_store_bytes"], g["spill_load_bytes"]) == (16, 8, 12)
    o = res["old_style"]
    assert (o["registers"], o["smem_static_bytes"], o["cmem_bytes"]) == (40, 1024, 388)


def test_sass_opcodes_strip_predicates_and_modifiers():
    sass = """
        Function : k
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000ff00000000800 */
        /*00b0*/                   IMMA.16832.S8.S8 R8, R8.ROW, R6.COL, RZ ;  /* 0x0000000608087237 */
        /*00c0*/              @!P0 LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64] ;
        /*00d0*/               @P1 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*00e0*/              @!UPT UIADD3 UR4, UR4, 0x1, URZ ;
        /*00f0*/                   LDS.U.128 R4, [R2] ;
        /*0100*/                   IMMA.16832.S8.S8 R12, R8.ROW, R6.COL, R12 ;
"""
    ops = nvcc.sass_opcodes(sass)
    assert ops == {"LDC": 1, "IMMA": 2, "LDGSTS": 1, "HGMMA": 1, "UIADD3": 1, "LDS": 1}


# ---------------------------------------------------------------- compiling

def test_imma_and_hmma_show_in_sass():
    imma = nvcc.compile_cubin(IMMA_SRC)
    hmma = nvcc.compile_cubin(HMMA_SRC)
    assert nvcc.sass_opcodes(imma.sass)["IMMA"] >= 1
    assert nvcc.sass_opcodes(imma.sass)["HMMA"] == 0
    assert nvcc.sass_opcodes(hmma.sass)["HMMA"] >= 1
    assert imma.resources["imma"]["registers"] > 0
    assert nvcc.sass_arch(imma.sass) == "sm_90"
    assert imma.cubin[:4] == b"\x7fELF"


def test_arch_specific_target_compiles_with_gencode():
    c = nvcc.compile_cubin(IMMA_SRC, arch="sm_90a")
    assert any(a.startswith("-gencode=arch=compute_90a,code=sm_90a") for a in c.command)
    assert nvcc.sass_arch(c.sass) == "sm_90a"
    assert static.check_resources(c.summary(), cuda_lever(sass_claims=("IMMA",)), {"arch": "sm_90"}).passed


def test_bad_arch_is_refused():
    with pytest.raises(nvcc.CompileError, match="bad arch"):
        nvcc.compile_cubin(IMMA_SRC, arch="90")


def test_compile_error_carries_command_and_nvcc_text():
    with pytest.raises(nvcc.CompileError) as err:
        nvcc.compile_cubin("__global__ void broken(int* x) { x[0] = ; }\n")
    message = str(err.value)
    first = message.splitlines()[0]
    assert first.startswith("nvcc failed for sm_90") and "expected an expression" in first
    assert "command: " in message and "-cubin" in message and "-arch=sm_90" in message


def test_defines_become_macros_and_change_the_key():
    src = "#if VALUE != 7\n#error VALUE must be 7\n#endif\n__global__ void k(int* x) { x[0] = VALUE; }\n"
    ok = nvcc.compile_cubin(src, {"VALUE": 7})
    with pytest.raises(nvcc.CompileError, match="VALUE must be 7"):
        nvcc.compile_cubin(src, {"VALUE": 8})
    assert nvcc.compile_key(src, {"VALUE": 7}, "sm_90", ["-DVALUE=7"]) != \
        nvcc.compile_key(src, {"VALUE": 8}, "sm_90", ["-DVALUE=8"])
    assert ok.kernel_names == ["_Z1kPi"]


def test_render_source_prepends_defines_and_keeps_file_lines(tmp_path):
    cu = tmp_path / "probe.cu"
    cu.write_text("#if WIDTH != 4 || !FLAG\n#error bad defines\n#endif\n__global__ void probe() {}\n")
    text = nvcc.render_source(cu, {"WIDTH": 4, "FLAG": True})
    assert "#define FLAG 1\n#define WIDTH 4\n" in text and '#line 1 "probe.cu"' in text
    assert text.endswith(cu.read_text())
    nvcc.compile_cubin(text)  # the rendered text alone carries the defines
    with pytest.raises(nvcc.CompileError, match="bad macro name"):
        nvcc.render_source(cu, {"not a name": 1})


def test_cache_hits_memory_then_disk_without_running_nvcc():
    src = f"// {uuid.uuid4()}\n__global__ void cached(float* x) {{ x[threadIdx.x] *= 2.0f; }}\n"
    runs = nvcc.nvcc_run_count()
    first = nvcc.compile_cubin(src)
    assert nvcc.nvcc_run_count() == runs + 1 and not first.from_cache
    assert nvcc.compile_cubin(src) is first
    nvcc.clear_memory_cache()
    from_disk = nvcc.compile_cubin(src)
    assert nvcc.nvcc_run_count() == runs + 1
    assert from_disk.from_cache and from_disk.key == first.key
    assert from_disk.cubin == first.cubin and from_disk.resources == first.resources
    assert from_disk.sass == first.sass
    nvcc.compile_cubin(src, extra_options=("-maxrregcount=32",))
    assert nvcc.nvcc_run_count() == runs + 2  # other options: another key, another compile


def test_cache_key_covers_included_headers(tmp_path, monkeypatch):
    """An edit to a header the source includes (directly or through another header) changes
    the key; an edit to a header it does not include leaves cached cubins valid."""
    monkeypatch.setattr(nvcc, "CUDA_DIR", tmp_path)
    (tmp_path / "outer.cuh").write_text('#include "common.cuh"\n')
    header = tmp_path / "common.cuh"
    header.write_text("#define A 1\n")
    unrelated = tmp_path / "other.cuh"
    unrelated.write_text("#define B 1\n")
    src = '#include "outer.cuh"\n'
    before = nvcc.compile_key(src, {}, "sm_90", [])
    unrelated.write_text("#define B 2\n")
    assert nvcc.compile_key(src, {}, "sm_90", []) == before
    header.write_text("#define A 2\n")
    assert nvcc.compile_key(src, {}, "sm_90", []) != before


# ---------------------------------------------------------------- our kernels

@pytest.mark.parametrize("qtype", TYPES)
def test_dequant_kernel_compiles_clean_for_every_type(qtype):
    c = dequant_cublas.FAMILY.compile_only({}, qtype, "sm_90")
    r = c.resources[dequant_cublas.KERNEL]
    assert r["registers"] > 0 and r["spill_store_bytes"] == r["spill_load_bytes"] == r["stack_bytes"] == 0
    ops = nvcc.sass_opcodes(c.sass, dequant_cublas.KERNEL)
    assert ops["FFMA"] == 0, "nvcc contracted the dequant arithmetic into FMA (breaks bit-exactness)"
    assert ops["LDL"] == ops["STL"] == 0
    assert "STG.E.128" in c.sass, "outputs are not written with 16-byte stores"


def test_dequant_formats_agree_with_the_quant_types():
    from kernels import quant

    for qtype, (_struct, block, type_size, _lanes) in dequant_cublas.FORMATS.items():
        qt = quant.get(qtype)
        assert (block, type_size) == (qt.block, qt.type_size)


def test_dequant_lanes_per_block_is_checked_at_compile_time():
    text = nvcc.render_source(dequant_cublas.DEQUANT_CU, {"QTYPE": "Q6_K", "LANES_PER_BLOCK": 16})
    with pytest.raises(nvcc.CompileError, match="LANES_PER_BLOCK"):
        nvcc.compile_cubin(text)


def test_q8_1_kernels_compile_clean_with_ieee_division():
    c = q8_1_gpu.compile_for("sm_90")
    for name in q8_1_gpu.KERNEL_BY_INPUT.values():
        r = c.resources[name]
        assert r["registers"] > 0 and r["spill_store_bytes"] == r["stack_bytes"] == 0
        ops = nvcc.sass_opcodes(c.sass, name)
        # IEEE division range-checks its operands (FCHK) and has a slow path; an approximate one does not
        assert ops["FCHK"] >= 1 and ops["SHFL"] >= 4
        assert ops["LDL"] == ops["STL"] == 0


def test_timer_spin_kernel_compiles():
    from kernels import cuda_runtime

    c = cuda_runtime.compile_spin("sm_90")
    assert c.kernel_names == ["spin_ns"]
    assert "SR_GLOBALTIMER" in c.sass  # waits on the ns timer, not the SM clock


# ---------------------------------------------------------------- static gate

def test_static_gate_passes_the_baseline_defaults():
    import experiments

    result = static.compile_defaults(experiments.get("dequant_cublas"), "sm_90")
    assert result.passed, result.reason
    assert result.numbers["q4_K.registers"] > 0 and result.numbers["q8_0.spill_bytes"] == 0


def test_static_gate_catches_register_spills():
    c = nvcc.compile_cubin(PRESSURE_SRC, extra_options=("-maxrregcount=24",))
    res = c.summary()
    assert res["spill_store_bytes"] > 0
    verdict = static.check_resources(res, cuda_lever(), {"arch": "sm_90"})
    assert not verdict.passed and "local memory" in verdict.reason
    assert verdict.numbers["spill_bytes"] > 0
    assert static.check_resources(res, cuda_lever(allow_spills=True), {"arch": "sm_90"}).passed


def test_static_gate_catches_local_memory_without_spills():
    res = nvcc.compile_cubin(LOCAL_ARRAY_SRC).summary()
    assert res["spill_store_bytes"] == 0 and res["local_mem_ops"] > 0
    verdict = static.check_resources(res, cuda_lever(), {"arch": "sm_90"})
    assert not verdict.passed and "LDL/STL" in verdict.reason


def test_static_gate_catches_a_missing_claimed_opcode():
    res = nvcc.compile_cubin(HMMA_SRC).summary()
    verdict = static.check_resources(res, cuda_lever(sass_claims=("IMMA", "HMMA")), {"arch": "sm_90"})
    assert not verdict.passed and "missing: IMMA" in verdict.reason
    assert verdict.numbers["sass_HMMA"] >= 1 and verdict.numbers["sass_IMMA"] == 0
    assert static.check_resources(res, cuda_lever(sass_claims=("HMMA",)), {"arch": "sm_90"}).passed


def test_static_gate_checks_arch_and_shared_memory():
    c = nvcc.compile_cubin(BIG_SMEM_SRC, arch="sm_89")
    res = c.summary(dynamic_smem_bytes=8 * 1024)
    assert res["smem_bytes_total"] == 48 * 1024
    wrong_arch = static.check_resources(res, cuda_lever(), {"arch": "sm_90", "smem_per_block_optin": 227 * 1024})
    assert not wrong_arch.passed and "compiled for sm_89, device is sm_90" in wrong_arch.reason
    too_small = static.check_resources(res, cuda_lever(), {"arch": "sm_89", "smem_per_block_optin": 40 * 1024})
    assert not too_small.passed and "shared memory 49152 B > limit 40960 B" in too_small.reason
    assert static.check_resources(res, cuda_lever(), {"arch": "sm_89", "smem_per_block_optin": 99 * 1024}).passed


def test_static_gate_reads_variant_resources_and_passes_cpu_variants():
    res = nvcc.compile_cubin(IMMA_SRC).summary()
    res.update(device_arch="sm_90", smem_limit_bytes=227 * 1024)
    variant = Variant("t", {}, "q4_K", IMMA_SRC, res, impl=None)
    assert static.run(variant, cuda_lever(sass_claims=("IMMA",))).passed
    cpu = Variant("cpu_demo", {}, "q4_K", "", {}, impl=None)
    result = static.run(cpu, cuda_lever(backend="cpu"))
    assert result.passed and result.numbers == {"backend": "cpu"}


def test_compile_defaults_reports_compile_failures_per_type():
    class Broken:
        def compile_only(self, params, qtype, arch):
            return nvcc.compile_cubin("__global__ void k() { nope; }\n", None, arch)

    result = static.compile_defaults(cuda_lever(types=("q4_K", "q8_0")), "sm_90", family=Broken())
    assert not result.passed and result.reason.startswith("q4_K: compile failed: nvcc failed")


# ---------------------------------------------------------------- kernels' code on the host

@pytest.fixture(scope="module")
def host_tool(tmp_path_factory):
    """Build a host-only harness from tests/cuda (g++ through nvcc; no GPU needed to run it)."""
    out = tmp_path_factory.mktemp("host")

    def build(name: str) -> Path:
        exe = out / name
        if not exe.exists():
            subprocess.run([NVCC, "-O2", "-std=c++17", f"-I{nvcc.CUDA_DIR}", "-o", str(exe),
                            str(ROOT / "tests" / "cuda" / f"{name}.cu")], check=True, capture_output=True)
        return exe

    return build, out


@pytest.mark.parametrize("qtype", TYPES)
def test_dequant_thread_code_matches_gguf_bit_for_bit(host_tool, qtype):
    build, tmp = host_tool
    exe = build("dequant_host")
    rng = np.random.default_rng(TYPES.index(qtype))
    M, K = 7, 768
    packed = random_blocks(rng, qtype, M, K)
    n_blocks = M * K // dequant_cublas.FORMATS[qtype][1]
    packed.tofile(tmp / f"{qtype}.bin")
    subprocess.run([str(exe), GGUF_NAME[qtype], str(tmp / f"{qtype}.bin"), str(n_blocks), str(tmp / f"{qtype}.out")],
                   check=True)
    got = np.fromfile(tmp / f"{qtype}.out", np.uint16).reshape(M, K)
    want = gguf_bf16_bits(packed, qtype)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{qtype}: {len(bad)} of {got.size} differ, first at {tuple(bad[0])}"


@pytest.mark.parametrize("kind", ["f32", "bf16"])
def test_q8_1_lane_code_matches_the_reference_bytes(host_tool, kind):
    from kernels.quant.q8_1 import float32_to_bf16_bits, quantize_q8_1

    build, tmp = host_tool
    exe = build("q8_1_host")
    x = q8_1_cases(np.random.default_rng(3))
    x_in = x if kind == "f32" else float32_to_bf16_bits(x)
    T, K = x.shape
    x_in.tofile(tmp / f"x_{kind}.bin")
    paths = [str(tmp / f"{n}_{kind}.bin") for n in "qds"]
    subprocess.run([str(exe), kind, str(tmp / f"x_{kind}.bin"), str(T * K // 32), *paths], check=True)
    q = np.fromfile(paths[0], np.int8).reshape(T, K)
    d = np.fromfile(paths[1], np.float32).reshape(T, K // 32)
    s = np.fromfile(paths[2], np.int32).reshape(T, K // 32)
    ref = quantize_q8_1(x_in)
    assert np.array_equal(q, ref.q)
    assert np.array_equal(d.view(np.uint32), ref.d.view(np.uint32))
    assert np.array_equal(s, ref.s)
    # the edge cases are really in there: a zero block, ties that round to even
    assert ref.d[0, 0] == 0 and ref.d[3, 0] == 0.5 and ref.q[3, 0] == 127
    assert np.all(ref.q[3, 1:32] % 2 == 0)


def test_cuobjdump_is_found():
    assert Path(nvcc.find_cuobjdump()).name == "cuobjdump"
    assert shutil.which(nvcc.find_nvcc())
