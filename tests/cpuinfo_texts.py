"""Synthetic /proc/cpuinfo texts for CPU-peak and fingerprint tests (made up here, not read from a machine).

Field names and layout follow Linux's x86 /proc/cpuinfo; vendor, family, model and
flags are those of the named parts (family/model per the vendors' CPUID tables).
"""

from __future__ import annotations

AVX2 = "fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx f16c avx2 ht"
AVX512 = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni"


def cpuinfo(vendor: str, family: int, model: int, name: str, flags: str, cores: int = 2, smt: int = 1,
            stepping: int = 1, mhz: float = 2600.0) -> str:
    """Text of ``cores * smt`` processor entries; SMT siblings share a ``core id``."""
    blocks = []
    for cpu in range(cores * smt):
        core = cpu % cores  # Linux numbers the first thread of every core first, then the siblings
        blocks.append("\n".join([
            f"processor\t: {cpu}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}", f"model\t\t: {model}",
            f"model name\t: {name}", f"stepping\t: {stepping}", f"cpu MHz\t\t: {mhz:.3f}",
            "physical id\t: 0", f"siblings\t: {cores * smt}", f"core id\t\t: {core}", f"cpu cores\t: {cores}",
            f"flags\t\t: {flags}",
        ]))
    return "\n\n".join(blocks) + "\n\n"


ZEN2 = cpuinfo("AuthenticAMD", 23, 0x31, "AMD EPYC 7R32", AVX2, cores=4, smt=2)
ZEN3 = cpuinfo("AuthenticAMD", 25, 0x01, "AMD EPYC 7R13 Processor", AVX2)
ZEN4 = cpuinfo("AuthenticAMD", 25, 0x11, "AMD EPYC 9R14", AVX512 + " avx512_bf16")
ZEN4_NO_AVX512 = cpuinfo("AuthenticAMD", 25, 0x11, "AMD EPYC", AVX2)
ZEN5 = cpuinfo("AuthenticAMD", 26, 0x02, "AMD EPYC", AVX512 + " avx512_bf16 avx512_vp2intersect avx_vnni")
SKYLAKE_SP = cpuinfo("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Platinum 8175M CPU @ 2.50GHz", AVX512,
                     stepping=4)
SKYLAKE_SILVER = cpuinfo("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", AVX512,
                         stepping=4)
SKYLAKE_GOLD_5122 = cpuinfo("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz", AVX512,
                            stepping=4)
SAPPHIRE_RAPIDS = cpuinfo("GenuineIntel", 6, 0x8F, "Intel(R) Xeon(R) Platinum 8488C", AVX512
                          + " avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8", cores=4, smt=2, stepping=8)
UNKNOWN = cpuinfo("GenuineIntel", 6, 0xFE, "Intel(R) Future CPU", AVX512 + " avx512_bf16")
# KVM guests whose model number says one generation and whose flags another (QEMU's named CPU models with
# features added, or a host's flags passed through): Ice Lake-SP's model with Sapphire Rapids' AMX, and an
# EPYC-Milan (Zen 3) model with Zen 4's AVX-512.
KVM_ICELAKE_AMX = cpuinfo("GenuineIntel", 6, 0x6A, "Intel Xeon Processor (Icelake)", AVX512
                          + " avx512_bf16 amx_bf16 amx_tile amx_int8 hypervisor")
KVM_MILAN_AVX512 = cpuinfo("AuthenticAMD", 25, 0x01, "AMD EPYC-Milan Processor", AVX512 + " avx512_bf16 hypervisor")
