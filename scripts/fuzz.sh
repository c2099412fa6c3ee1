#!/usr/bin/env bash
# Runs each fuzz target of fuzz/ for a bounded time (default 60 s each).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Needs a nightly toolchain (libFuzzer's sanitizer flags) and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# A crash leaves its input under fuzz/artifacts/TARGET/; turn it into a
# regression test of the crate that failed, then fix the crate.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
for t in "${targets[@]}"; do
  echo "== $t for ${seconds} s"
  cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 2>&1 | grep -E "^#[0-9]+.*(DONE|pulse)|Done|SUMMARY|panicked|ERROR" | tail -3
done
