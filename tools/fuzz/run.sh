#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo-fuzz on the nightly
# toolchain, each from its corpus in fuzz/corpus/<target>, which grows with what it finds.
#   tools/fuzz/run.sh 60                 every target, 60 s each
#   tools/fuzz/run.sh 3600 fence scaler  two targets, an hour each
# Crashes land in fuzz/artifacts/<target>/; each becomes a regression input in
# fuzz/corpus/<target>/ (the test suite replays every one on stable) and then a fix.
# Without nightly or cargo-fuzz it says so loudly and skips, as .ci/run does for clippy.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(exposition quantity scaler fence syntax webhook pass)
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "!!! SKIPPED fuzzing: no nightly toolchain (rustup toolchain install nightly)" >&2
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "!!! SKIPPED fuzzing: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2
  exit 0
fi
mkdir -p fuzz/logs
for target in "${targets[@]}"; do
  echo "== $target: ${seconds} s"
  # -max_total_time bounds the run; the final stats line gives executions and coverage.
  cargo +nightly fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 \
    2>&1 | tee "fuzz/logs/$target.log" | grep -E "^(#[0-9]+ +DONE|stat::|==[0-9]+==|SUMMARY|Done )" || true
done
