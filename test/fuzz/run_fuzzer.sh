#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its seeds and prints
# libFuzzer's totals (executions, coverage). A crash, a sanitizer report, a
# leak or an allocation over the RSS limit fails the run; libFuzzer then
# writes the input that did it next to the corpus, for a regression test.
#   run_fuzzer.sh BINARY WORK_DIR SEED_DIR SECONDS
set -euo pipefail
binary=$1 work=$2 seeds=$3 seconds=$4
mkdir -p "$work/corpus" "$work/crashes"
exec "$binary" "$work/corpus" "$seeds" -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/crashes/"
