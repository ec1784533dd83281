// Short OpenMP spin-waits, so that Kiln shares a busy machine instead of fighting it.
//
// Note [OpenMP under load]: when an OpenMP thread reaches the end of a parallel region
// before its team-mates, libgomp (GCC's OpenMP, which Eigen, oneDNN and Kiln's own
// kernels run on) spins for GOMP_SPINCOUNT iterations (300,000 by default, about a
// millisecond) before it sleeps. Alone on the machine that saves a wake-up. With another
// busy process it is ruinous: the team-mate it waits for has no CPU, because the spinner
// holds it, and every one of a training step's thousands of parallel regions pays for it.
// Measured on 2 cores (a ResNet-10 at a quarter width, 16^3 volumes, two epochs; bench/
// results/2026-11-28-cpu-under-load.md): 2.1 s alone, but two such runs at once took 18.1 s
// (8x one run each, where fair time sharing gives 2x); with GOMP_SPINCOUNT=1000 the two
// took 4.3 s, and one alone 2.2 s. libgomp reads the variable once, when it loads, before
// any of main() runs, so the one way to set it is to set it and run the program again.
//
// use_short_openmp_spins(argv), first thing in main: when neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set, sets GOMP_SPINCOUNT=1000 and re-runs this program (execv of
// /proc/self/exe with the same arguments, once: KILN_OPENMP_SPINS marks the re-run). A
// user's own setting of either variable is kept as it is. `kiln` and the test binaries
// call it; a program linking Kiln may too, or set the variable itself.
#pragma once

#include <string>

namespace kiln {

void use_short_openmp_spins(char** argv);

// How this process's OpenMP threads wait, for `kiln info`: "GOMP_SPINCOUNT=1000 (set by
// Kiln)", "GOMP_SPINCOUNT=... (yours)", "OMP_WAIT_POLICY=... (yours)", or "libgomp's
// default (300000 spins)" when the program did not call use_short_openmp_spins.
std::string openmp_spins();

}  // namespace kiln
