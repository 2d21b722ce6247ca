#!/bin/sh
# The llama.cpp peer for bench/run_llamacpp.sh (issue 16): llama.cpp built from the PyPI sdist of
# llama-cpp-python, whose vendor/llama.cpp holds llama.cpp's sources at the commit that release
# pins, including convert_hf_to_gguf.py and its gguf-py package. Not run in CI.
#   sh bench/llamacpp_setup.sh
# Idempotent: the sdist is unpacked once per version and the build is incremental.
#   bench/llama.cpp-build/             (git-ignored)
#     llama_cpp_python-VER/vendor/llama.cpp/   the sources (convert_hf_to_gguf.py, gguf-py/)
#     build/bin/llama-bench, llama-simple      CPU only, Release, llama.cpp's default
#                                              GGML_NATIVE=ON (-march=native), OpenMP
#     src -> llama_cpp_python-VER/vendor/llama.cpp, VERSION
# The sdist: $LLAMACPP_SDIST if set, else the newest models/llamacpp/llama_cpp_python-*.tar.gz
# (tools/get_llamacpp_assets.sh puts one there), else `pip download llama-cpp-python --no-deps
# --no-binary :all:` (the newest release) into bench/llama.cpp-build/.
# Compiles at nice 19 with ATTN_JOBS (2) jobs: the machine is shared.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D="$ROOT/bench/llama.cpp-build"
JOBS=${ATTN_JOBS:-2}
mkdir -p "$D"
sdist=${LLAMACPP_SDIST:-}
if [ -z "$sdist" ]; then
  sdist=$(ls "$ROOT"/models/llamacpp/llama_cpp_python-*.tar.gz "$D"/llama_cpp_python-*.tar.gz \
          2>/dev/null | sort -V | tail -n 1)
fi
if [ -z "$sdist" ]; then
  echo "llamacpp_setup: downloading the llama-cpp-python sdist from PyPI"
  py=python3
  [ -x "$ROOT/.venv-bench/bin/python" ] && py="$ROOT/.venv-bench/bin/python"
  "$py" -m pip download -q llama-cpp-python --no-deps --no-binary :all: -d "$D"
  sdist=$(ls "$D"/llama_cpp_python-*.tar.gz | sort -V | tail -n 1)
fi
base=$(basename "$sdist" .tar.gz)
ver=${base#llama_cpp_python-}
if [ ! -f "$D/$base/vendor/llama.cpp/CMakeLists.txt" ]; then
  echo "llamacpp_setup: unpacking $sdist"
  rm -rf "$D/$base.tmp"
  mkdir -p "$D/$base.tmp"
  tar xzf "$sdist" -C "$D/$base.tmp"
  rm -rf "${D:?}/$base"
  mv "$D/$base.tmp/$base" "$D/$base"
  rmdir "$D/$base.tmp"
fi
# The sdist keeps vendor/llama.cpp's submodule link (.git: "gitdir: ../../.git/modules/...")
# without the repository it names; llama.cpp's build-info rule would then depend on a file that
# never exists, and ninja would re-run CMake forever ("build.ninja still dirty").
[ -f "$D/$base/vendor/llama.cpp/.git" ] && rm -f "$D/$base/vendor/llama.cpp/.git"
ln -sfn "$base/vendor/llama.cpp" "$D/src"
# A different version than the last build: configure afresh.
if [ -f "$D/VERSION" ] && [ "$(cat "$D/VERSION")" != "$ver" ]; then rm -rf "$D/build"; fi
if [ ! -f "$D/build/CMakeCache.txt" ]; then
  gen=""
  command -v ninja > /dev/null && gen="-G Ninja"
  # CPU only (no GPU backend is on by default), Release, GGML_NATIVE left at its default (ON);
  # no libcurl / OpenSSL (nothing is downloaded), no tests; llama-server for bench/serve_llamacpp.sh.
  # shellcheck disable=SC2086
  nice -n 19 cmake -S "$D/src" -B "$D/build" $gen -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON > "$D/cmake.log" 2>&1 ||
    { tail -n 30 "$D/cmake.log"; echo "llamacpp_setup: cmake failed (log: $D/cmake.log)"; exit 1; }
fi
echo "$ver" > "$D/VERSION"
echo "llamacpp_setup: building llama-bench, llama-simple, llama-server (llama.cpp of llama-cpp-python $ver; nice 19, -j$JOBS)"
nice -n 19 cmake --build "$D/build" --config Release -j "$JOBS" --target llama-bench llama-simple llama-server \
  > "$D/build.log" 2>&1 ||
  { tail -n 40 "$D/build.log"; echo "llamacpp_setup: build failed (log: $D/build.log)"; exit 1; }
for b in llama-bench llama-simple llama-server; do
  [ -x "$D/build/bin/$b" ] || { echo "llamacpp_setup: $D/build/bin/$b missing"; exit 1; }
done
echo "llamacpp_setup: ok: $D/build/bin/llama-bench ($("$D/build/bin/llama-bench" --version 2>&1 | head -n 1))"
