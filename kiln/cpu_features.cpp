// cpu_features(): one row per extension, `built` from the macros -march=KILN_CPU_ARCH
// predefines (listed by the build, kiln/CMakeLists.txt) and `supported` from GCC/Clang's
// __builtin_cpu_supports (cpuid, read once by the runtime). Note [Instruction set] is in
// cpu_features.h. This file itself is compiled for the baseline x86-64, so the check runs
// on any CPU; its message is built with plain string operations.
#include "kiln/cpu_features.h"

#include <cstring>
#include <string>

#include "core/error.h"

#if !defined(KILN_CPU_ARCH_NAME) || !defined(KILN_CPU_BUILT_MACROS)
#error "KILN_CPU_ARCH_NAME and KILN_CPU_BUILT_MACROS must be defined by the build (kiln/CMakeLists.txt)"
#endif

namespace kiln {

#if defined(__x86_64__)
namespace {

// Whether the build's -march defined `macro` (KILN_CPU_BUILT_MACROS: every such macro the
// compiler predefines for -march=${KILN_CPU_ARCH}, space-separated, from kiln/CMakeLists.txt).
bool built_with(const char* macro) {
  return std::strstr(" " KILN_CPU_BUILT_MACROS " ", (std::string(" ") + macro + " ").c_str()) != nullptr;
}

}  // namespace

// One row: the name __builtin_cpu_supports takes (a string literal, hence the macro) and
// the macro -march defines for it.
#define KILN_CPU_FEATURE(name, macro) \
  CpuFeature { name, built_with(macro), __builtin_cpu_supports(name) != 0 }

std::vector<CpuFeature> cpu_features() {
  __builtin_cpu_init();
  return {KILN_CPU_FEATURE("popcnt", "__POPCNT__"),
          KILN_CPU_FEATURE("sse4.2", "__SSE4_2__"),
          KILN_CPU_FEATURE("avx", "__AVX__"),
          KILN_CPU_FEATURE("avx2", "__AVX2__"),
          KILN_CPU_FEATURE("fma", "__FMA__"),
          KILN_CPU_FEATURE("bmi", "__BMI__"),
          KILN_CPU_FEATURE("bmi2", "__BMI2__"),
          KILN_CPU_FEATURE("avx512f", "__AVX512F__"),
          KILN_CPU_FEATURE("avx512bw", "__AVX512BW__"),
          KILN_CPU_FEATURE("avx512dq", "__AVX512DQ__"),
          KILN_CPU_FEATURE("avx512vl", "__AVX512VL__"),
          KILN_CPU_FEATURE("avx512cd", "__AVX512CD__"),
          KILN_CPU_FEATURE("avx512vbmi", "__AVX512VBMI__"),
          KILN_CPU_FEATURE("avx512vbmi2", "__AVX512VBMI2__"),
          KILN_CPU_FEATURE("avx512vnni", "__AVX512VNNI__"),
          KILN_CPU_FEATURE("avx512bitalg", "__AVX512BITALG__"),
          KILN_CPU_FEATURE("avx512vpopcntdq", "__AVX512VPOPCNTDQ__"),
          KILN_CPU_FEATURE("avx512ifma", "__AVX512IFMA__"),
          KILN_CPU_FEATURE("avx512bf16", "__AVX512BF16__"),
          KILN_CPU_FEATURE("avx512vp2intersect", "__AVX512VP2INTERSECT__")};
}
#undef KILN_CPU_FEATURE
#else
std::vector<CpuFeature> cpu_features() { return {}; }
#endif

void check_cpu_supports_build(const std::vector<CpuFeature>& features, const std::string& arch) {
  std::string missing;
  for (const CpuFeature& feature : features) {
    if (!feature.built || feature.supported) continue;
    if (!missing.empty()) missing += ", ";
    missing += feature.name;
  }
  if (missing.empty()) return;
  throw Error("kiln::init: this Kiln was built with KILN_CPU_ARCH=" + arch +
              " for CPUs with instructions this CPU lacks (" + missing +
              "); rebuild it here, or with -DKILN_CPU_ARCH=x86-64-v3 (any AVX2 + FMA CPU) or "
              "-DKILN_CPU_ARCH=x86-64 (any 64-bit x86) for a binary that runs on other machines");
}

std::string cpu_arch() { return KILN_CPU_ARCH_NAME; }

}  // namespace kiln
