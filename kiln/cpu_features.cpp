// cpu_features(): one row per extension, `built` from the compiler's predefined macros
// (which -march=KILN_CPU_ARCH sets) and `supported` from GCC/Clang's
// __builtin_cpu_supports (cpuid, read once by the runtime). Note [Instruction set] is in
// cpu_features.h.
#include "kiln/cpu_features.h"

#include "core/error.h"

#ifndef KILN_CPU_ARCH_NAME
#error "KILN_CPU_ARCH_NAME must be defined by the build (kiln/CMakeLists.txt)"
#endif

namespace kiln {

#if defined(__x86_64__)
namespace {

// One row: the name __builtin_cpu_supports takes (it must be a string literal, hence the
// macro) and whether this file was compiled with the extension enabled.
#define KILN_CPU_FEATURE(name, built_flag) CpuFeature{name, built_flag, __builtin_cpu_supports(name) != 0}

#if defined(__SSE4_2__)
constexpr bool kSse42 = true;
#else
constexpr bool kSse42 = false;
#endif
#if defined(__AVX__)
constexpr bool kAvx = true;
#else
constexpr bool kAvx = false;
#endif
#if defined(__AVX2__)
constexpr bool kAvx2 = true;
#else
constexpr bool kAvx2 = false;
#endif
#if defined(__FMA__)
constexpr bool kFma = true;
#else
constexpr bool kFma = false;
#endif
#if defined(__AVX512F__)
constexpr bool kAvx512f = true;
#else
constexpr bool kAvx512f = false;
#endif
#if defined(__AVX512BW__)
constexpr bool kAvx512bw = true;
#else
constexpr bool kAvx512bw = false;
#endif
#if defined(__AVX512DQ__)
constexpr bool kAvx512dq = true;
#else
constexpr bool kAvx512dq = false;
#endif
#if defined(__AVX512VL__)
constexpr bool kAvx512vl = true;
#else
constexpr bool kAvx512vl = false;
#endif

}  // namespace

std::vector<CpuFeature> cpu_features() {
  __builtin_cpu_init();
  return {KILN_CPU_FEATURE("sse4.2", kSse42),      KILN_CPU_FEATURE("avx", kAvx),
          KILN_CPU_FEATURE("avx2", kAvx2),         KILN_CPU_FEATURE("fma", kFma),
          KILN_CPU_FEATURE("avx512f", kAvx512f),   KILN_CPU_FEATURE("avx512bw", kAvx512bw),
          KILN_CPU_FEATURE("avx512dq", kAvx512dq), KILN_CPU_FEATURE("avx512vl", kAvx512vl)};
}
#undef KILN_CPU_FEATURE
#else
std::vector<CpuFeature> cpu_features() { return {}; }
#endif

void check_cpu_supports_build(const std::vector<CpuFeature>& features, const std::string& arch) {
  std::string missing;
  for (const CpuFeature& feature : features) {
    if (feature.built && !feature.supported) missing += (missing.empty() ? "" : ", ") + feature.name;
  }
  KILN_CHECK(missing.empty(), "kiln::init: this Kiln was built with KILN_CPU_ARCH=", arch,
             " for CPUs with instructions this CPU lacks (", missing,
             "); rebuild it here, or with -DKILN_CPU_ARCH=x86-64-v3 (any AVX2 + FMA CPU) or "
             "-DKILN_CPU_ARCH=x86-64 (any 64-bit x86) for a binary that runs on other machines");
}

std::string cpu_arch() { return KILN_CPU_ARCH_NAME; }

}  // namespace kiln
