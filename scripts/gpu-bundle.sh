#!/usr/bin/env bash
# Builds, on a development machine, what scripts/gpu-check.sh runs on a GPU machine, and
# packs it into .gpu-bundle/ (git-ignored) for the trip.
#
# Why build here: GPU time is the scarce resource, and a GPU machine for this project has
# nvcc, PyTorch and cuDNN/cuBLAS/NCCL (as Python wheels) but none of our Debian packages
# (Eigen, GoogleTest, Google Benchmark, oneDNN). The same CUDA 13 toolkit is installed here,
# so we compile every kernel here (sm_90, with -lineinfo so compute-sanitizer reports name
# source lines) and carry only the stripped, xz-compressed programs. They link the CUDA
# runtime statically, load cuBLAS at first use, and find cuDNN through LD_LIBRARY_PATH,
# which gpu-check.sh points at the GPU machine's wheels.
#
# The build targets any AVX2 CPU (KILN_CPU_ARCH=x86-64-v3: the GPU machine's processor is
# not known in advance) and has no oneDNN (one library fewer to carry; the CPU side of the
# parity tests is the reference convolution either way).
#
# Usage: scripts/gpu-bundle.sh [build-dir]   (default build-gpu; JOBS=n to limit the build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
BUNDLE=.gpu-bundle
TARGETS=(kiln_tests kiln_bench kiln_train_step train_cnn3d kiln_cli)
PROGRAMS=(kiln_tests kiln_bench kiln_train_step train_cnn3d kiln)

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DKILN_ONEDNN=OFF \
  -DKILN_CPU_ARCH=x86-64-v3 -DKILN_WERROR=ON -DKILN_INSTALL=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA_FLAGS=-lineinfo >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target "${TARGETS[@]}"

rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
for program in "${PROGRAMS[@]}"; do
  strip -o "$BUNDLE/$program" "$BUILD/bin/$program"
done
xz -T0 -6 "$BUNDLE"/*
# Shared libraries the programs need that the GPU machine may lack (it has no Debian
# packages): every library they load but the C and C++ runtimes (Google Benchmark, the
# NIfTI library, libcurl and what it loads, ...). gpu-check.sh puts them on the programs'
# path only, never on Python's.
mkdir -p "$BUNDLE/lib"
for program in "${PROGRAMS[@]}"; do ldd "$BUILD/bin/$program"; done | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libresolv|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -vE '/lib(cudnn|cublas|cudart|cuda|nccl|nvrtc)[^/]*\.so' |  # the machine's own (PyTorch's wheels)
  xargs -r cp -L -t "$BUNDLE/lib"
tar -C "$BUNDLE" -cJf "$BUNDLE/lib.tar.xz" lib && rm -rf "$BUNDLE/lib"
# ctest's files (they name the programs by absolute path: gpu-check.sh makes that path lead
# to the GPU machine's checkout), so the suite runs there as `make test` runs it here.
(cd "$BUILD" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) \
  -not -path '*/CMakeFiles/*' -print0 | tar -cf "$OLDPWD/$BUNDLE/ctest-files.tar" --null -T -)
realpath "$BUILD" >"$BUNDLE/build_dir"
git rev-parse HEAD >"$BUNDLE/commit"
git status --short >"$BUNDLE/uncommitted"
du -sh "$BUNDLE"
