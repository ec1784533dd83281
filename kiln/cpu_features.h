// Which x86 instruction-set extensions this build of Kiln uses, and which this CPU has.
//
// Note [Instruction set]: Kiln's C++ code is compiled for one instruction-set level, the
// CMake setting KILN_CPU_ARCH (passed to the compiler as -march=...; default `native`, the
// machine that builds it; `x86-64-v3` for a binary that runs on any AVX2 + FMA CPU from
// 2013 on; `x86-64` for any 64-bit x86). The compiler vectorises every kernel, Eigen's GEMM
// included, for that level; so a binary built on one machine stops with an illegal
// instruction on a CPU without the extensions it was built for. init() checks first
// (check_cpu_supports_build) and throws a kiln::Error naming what is missing instead; the
// check compares every extension -march turned on (the build lists the macros it
// predefines) with cpuid, and its file is compiled for the baseline x86-64 so that it runs
// on any CPU. (Static initialisers of the program run before init() and are compiled for
// the build's level: on a CPU lacking it, one of those may still stop the program first.)
//
// Why one level for the whole build rather than PyTorch's runtime dispatch (each hot
// kernel compiled several times, one picked at start-up): Kiln's GEMM and convolutions
// are Eigen templates. Compiling them at several levels in one program instantiates the
// same template, with the same mangled name, differently in different files; the linker
// keeps one copy, which may be the AVX-512 one, called on a CPU without AVX-512. Doing it
// safely means wrapping every such kernel in a per-level namespace, which Eigen's
// internals do not allow. A packager who needs one binary for many CPUs builds with a
// portable level (x86-64-v3 covers every x86 server CPU of the last decade).
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct CpuFeature {
  std::string name;   // as GCC's __builtin_cpu_supports spells it: "avx2", "avx512f"
  bool built = false;      // the compiler was allowed to use it (predefined macros)
  bool supported = false;  // this CPU has it (cpuid, at run time)
};

// The extensions Kiln's kernels care about, from SSE4.2 to AVX-512, in that order. Empty
// on CPUs other than x86-64 (the build then uses whatever -march=KILN_CPU_ARCH gives).
std::vector<CpuFeature> cpu_features();

// Throws kiln::Error when one of `features` was built for but is not supported, naming
// each missing extension, the KILN_CPU_ARCH the build used and how to rebuild.
void check_cpu_supports_build(const std::vector<CpuFeature>& features, const std::string& cpu_arch);

// The KILN_CPU_ARCH this build was configured with ("native", "x86-64-v3", ...).
std::string cpu_arch();

}  // namespace kiln
