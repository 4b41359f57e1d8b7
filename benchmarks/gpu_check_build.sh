#!/bin/bash
# Build nccl-tests' all_reduce_perf (no MPI: one process drives -g N GPUs) from a local
# checkout, for benchmarks/gpu_check.py. Nothing is downloaded.
#   benchmarks/gpu_check_build.sh SRC BUILD
# NCCL comes from NCCL_HOME, else from the nvidia-nccl wheel next to torch (which ships
# libnccl.so.2 but no libnccl.so, so a link folder under BUILD provides the name to link).
set -euo pipefail

src="${1:?usage: gpu_check_build.sh SRC BUILD}"
build="$(mkdir -p "${2:?usage: gpu_check_build.sh SRC BUILD}" && cd "$2" && pwd)"
if [[ ! -f "${src}/src/Makefile" ]]; then
    echo "gpu_check_build: ${src} is not an nccl-tests checkout (no src/Makefile)" >&2
    exit 2
fi
cuda_home="${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}"
nccl_home="${NCCL_HOME:-}"
if [[ -z "${nccl_home}" ]]; then
    wheel="$(python3 -c 'import nvidia.nccl as n, os; print(list(n.__path__)[0])' 2>/dev/null \
        || true)"
    if [[ -z "${wheel}" || ! -f "${wheel}/include/nccl.h" ]]; then
        echo "gpu_check_build: no NCCL_HOME and no nvidia-nccl wheel with nccl.h" >&2
        exit 2
    fi
    nccl_home="${build}/nccl"
    mkdir -p "${nccl_home}/lib"
    ln -sfn "${wheel}/include" "${nccl_home}/include"
    ln -sf "${wheel}/lib/libnccl.so.2" "${nccl_home}/lib/libnccl.so"
    ln -sf "${wheel}/lib/libnccl.so.2" "${nccl_home}/lib/libnccl.so.2"
fi
echo "gpu_check_build: CUDA ${cuda_home}, NCCL ${nccl_home}"
make -C "${src}/src" -j "$(nproc)" MPI=0 CUDA_HOME="${cuda_home}" NCCL_HOME="${nccl_home}" \
    NVCC_GENCODE="-arch=native" BUILDDIR="${build}" "${build}/all_reduce_perf"
echo "gpu_check_build: ${build}/all_reduce_perf"
