#!/usr/bin/env bash
# Build (once) and install llama-cpp-python with llama.cpp's runtime CPU dispatch.
#
# usage: scripts/llama_wheel.sh VENV_BIN VERSION
#
# Why: a native build enables AVX-512/AMX where the build machine has them and then segfaults on
# VMs that advertise AMX without granting tile state; a portable build (AVX2) gives away about half
# the generation speed on CPUs with AVX-512. llama.cpp's GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS
# builds one libggml-cpu-<variant>.so per instruction-set level; assistant/llm/cpu_backend.py picks
# the best one the CPU (and the kernel) supports, self-tests it in a subprocess and falls back to
# `haswell` (= the old portable build) if it dies.
#
# The x86 list is trimmed to the variants worth their build time (each compiles ggml-cpu again):
#   x64        no SIMD: the last resort, runs on any x86-64
#   haswell    AVX2 FMA F16C BMI2: the portable build (the fallback)
#   skylakex   + AVX-512 F/CD/VL/DQ/BW (Skylake-SP, Cascade Lake)
#   icelake    + AVX512_VBMI + AVX512_VNNI (Ice Lake, Tiger Lake, Rocket Lake)
#   zen4       + AVX512_BF16 (AMD Zen 4/5; Sapphire Rapids and later pick it too)
#   alderlake  AVX2 + AVX_VNNI (Intel client CPUs without AVX-512)
# sapphirerapids (AMX) is never built: ggml checks AMX with CPUID only, not whether the OS grants
# tile state, which is the crash this replaces. On ARM the upstream list is kept as it is.
#
# LLAMA_CPU=portable builds the old single portable library instead (no dispatch).
# Wheels are cached in $ASSISTANT_WHEEL_CACHE (default ~/.cache/assistant/wheels) under a key of
# the version, the mode, the CMake arguments and this script, so a changed recipe rebuilds and an
# unchanged one installs in seconds. pip's own wheel cache cannot be used: it is keyed by the sdist
# alone and would hand back a wheel built with other CMake arguments.
set -euo pipefail
bin=$1
version=$2
mode=${LLAMA_CPU:-variants}
keep_x86="x64 haswell skylakex icelake zen4 alderlake"
all_x86="x64 sse42 sandybridge ivybridge piledriver haswell skylakex cannonlake cascadelake icelake cooperlake zen4 alderlake sapphirerapids"
case "$mode" in
  variants)
    args="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib" ;;
  portable)
    args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  *) echo "LLAMA_CPU must be 'variants' or 'portable', not '$mode'" >&2; exit 2 ;;
esac
args="${LLAMA_CMAKE_ARGS:-$args}"
cache=${ASSISTANT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assistant/wheels}
key=$( { echo "$version|$mode|$args|$keep_x86|$(uname -m)"; cat "$0"; } | sha256sum | cut -c1-12)
out=$cache/llama-cpp-python-$version-$mode-$key
sdist_dir=$cache/sdist
sdist=$sdist_dir/llama_cpp_python-$version.tar.gz

if ! ls "$out"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  mkdir -p "$sdist_dir"
  test -f "$sdist" || "$bin/pip" download --quiet --no-deps --no-binary :all: -d "$sdist_dir" "llama-cpp-python==$version"
  src=$(mktemp -d "${TMPDIR:-/tmp}/llama-src.XXXXXX")
  trap 'rm -rf "$src"' EXIT
  tar -xzf "$sdist" -C "$src"
  top=$src/llama_cpp_python-$version
  list=$top/vendor/llama.cpp/ggml/src/CMakeLists.txt
  if [ "$mode" = variants ]; then
    for variant in $all_x86; do
      case " $keep_x86 " in *" $variant "*) continue ;; esac
      sed -i "/ggml_add_cpu_backend_variant(${variant}[ )]/d" "$list"
    done
    kept=$(grep -c 'ggml_add_cpu_backend_variant(\(x64\|haswell\|skylakex\|icelake\|zen4\|alderlake\)[ )]' "$list")
    [ "$kept" = 6 ] || { echo "llama.cpp's CPU variant list changed (kept $kept of 6); update scripts/llama_wheel.sh" >&2; exit 1; }
  fi
  echo "building llama-cpp-python $version ($mode) - a cold build takes a while on 2 cores"
  start=$(date +%s)
  mkdir -p "$out.tmp"
  CMAKE_ARGS="$args" "$bin/pip" wheel --quiet --no-deps -w "$out.tmp" "$top"
  echo $(( $(date +%s) - start )) > "$out.tmp/BUILD_SECONDS"
  rm -rf "$out"; mv "$out.tmp" "$out"
  echo "built in $(cat "$out/BUILD_SECONDS") s: $out"
fi
"$bin/pip" install --quiet --no-deps --force-reinstall "$out"/llama_cpp_python-"$version"-*.whl
