#!/usr/bin/env bash
# Runs every fuzzer (.npy, .npz, .tess, ONNX models, TensorProtos, the whole
# compile) long
# (default 10 minutes each) from fresh seed corpora
# and prints libFuzzer's totals: executions, coverage, peak memory.
#   benchmarks/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 test/fuzz/make_corpus.py "$work/seeds" --tools build/bin
for target in npy npz executable onnx pb; do
  binary=build/bin/tessera-fuzz
  case $target in onnx | pb) binary=build/bin/tessera-fuzz-onnx ;; esac
  echo "== $target ($seconds s)"
  TESSERA_FUZZ_TARGET=$target test/fuzz/run_fuzzer.sh $binary \
    "$work/$target" "$work/seeds/$target" "$seconds" 2>&1 |
    grep -E "stat::|DONE|ERROR|SUMMARY"
done
# The whole compile on generated models (a seeded generator, not libFuzzer):
# as many models as fit the same time, from a seed of the day.
echo "== compile ($seconds s)"
mkdir -p "$work/compile"
build/bin/tessera-fuzz-compile --seed "$(date +%s)" --runs 100000000 --seconds "$seconds" \
  --differential 20 --save "$work/compile"
