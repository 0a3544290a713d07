#!/usr/bin/env bash
# Bounded loopback benchmark of `vesta serve rest` against the bare-hyper baseline, in the same
# run (docs/bench/rest.md), both measured by `vesta bench rest`. Builds nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta -p vesta-bench --bin bare-hyper
# Env: ROUNDS (3), SECONDS_PER_RUN (10), CONNS (64), RATE (20000), RATE_SECONDS (30),
#      RATE_CONNS (16), WARMUP_SECONDS (3), TYPE (max-peak | min-granularity), SERVER (the
#      `vesta` binary that serves, e.g. an older build for a before/after comparison; the load
#      always comes from this checkout's `vesta bench rest`). The server also serves segment
#      numbers (tag `bench`, step 100,000, from a throwaway SQLite leaf_alloc), so each round
#      measures /segment/bench and Leaf's /api/segment/get/bench too. Every process it starts is bounded by `timeout`
#      or its own lifetime and killed by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
DUR=${SECONDS_PER_RUN:-10}
CONNS=${CONNS:-64}
RATE=${RATE:-20000}
RATE_SECONDS=${RATE_SECONDS:-30}
RATE_CONNS=${RATE_CONNS:-16}
WARMUP=${WARMUP_SECONDS:-3}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
VESTA_ADDR=127.0.0.1:18080
BARE_ADDR=127.0.0.1:18081
TICK=$(getconf CLK_TCK)
TYPE=${TYPE:-max-peak}

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.5
    rm -rf "$work"
}
trap cleanup EXIT
printf '[id]\ntype = "%s"\n' "$TYPE" >"$work/rest.toml"
DB="sqlite://$work/segments.db"
"$T/vesta" segment init --db "$DB" >/dev/null
"$T/vesta" segment create bench --step 100000 --db "$DB" >/dev/null

timeout 1800 "$SERVER" serve rest --config "$work/rest.toml" --listen "$VESTA_ADDR" --machine 924 \
    --segment-db "$DB" 2>/tmp/vesta-rest-bench.log &
pids+=($!)
"$T/bare-hyper" "$BARE_ADDR" 1800 >/tmp/bare-hyper-bench.log &
pids+=($!); BARE_PID=$!
wait_listening "$VESTA_ADDR" "$BARE_ADDR"
VESTA_PID=$(pgrep -P "${pids[0]}") # the server itself, not `timeout`

# CPU ticks (user + system) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); layout $TYPE; server $SERVER"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## closed loop, $CONNS connections, ${DUR}s, $ROUNDS interleaved rounds (req/s; server CPU us per request)"
echo "| round | bare hyper | /genid | /genid ÷ bare | /genids?count=1000 | /segment/bench | /segment ÷ bare | /api/segment/get/bench | Leaf's ÷ bare | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|"
bench_rest() { # pid bench-args... -> "req/s cpu_us_per_req"
    local pid=$1 before after out rps
    shift
    before=$(ticks "$pid")
    out=$(timeout 120 "$T/vesta" bench rest -c "$CONNS" -d "${DUR}s" "$@" 2>/dev/null)
    after=$(ticks "$pid")
    rps=$(awk '/^requests/ {gsub(",", "", $7); print $7}' <<<"$out")
    awk -v r="$rps" -v t=$((after - before)) -v hz="$TICK" -v d="$DUR" \
        'BEGIN { printf "%.0f %.2f\n", r, (t / hz) * 1e6 / (r * d) }'
}
for round in $(seq 1 "$ROUNDS"); do
    read -r bare bare_cpu < <(bench_rest "$BARE_PID" --server "$BARE_ADDR" --baseline)
    read -r genid genid_cpu < <(bench_rest "$VESTA_PID" --server "$VESTA_ADDR")
    read -r batch batch_cpu < <(bench_rest "$VESTA_PID" --server "$VESTA_ADDR" -b 1000)
    read -r seg seg_cpu < <(bench_rest "$VESTA_PID" --server "$VESTA_ADDR" --segment bench)
    read -r leaf leaf_cpu < <(bench_rest "$VESTA_PID" --server "$VESTA_ADDR" --segment bench --leaf)
    ratio=$(awk -v a="$genid" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
    seg_ratio=$(awk -v a="$seg" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
    leaf_ratio=$(awk -v a="$leaf" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
    echo "| $round | $bare ($bare_cpu us) | $genid ($genid_cpu us) | $ratio | $batch ($batch_cpu us) | $seg ($seg_cpu us) | $seg_ratio | $leaf ($leaf_cpu us) | $leaf_ratio | $(cut -d' ' -f1 /proc/loadavg) |"
done
echo
echo "## fixed rate: $RATE req/s, $RATE_CONNS connections, ${RATE_SECONDS}s after a ${WARMUP}s warm-up run"
for target in "vesta /genid|$VESTA_ADDR|$VESTA_PID|" "bare hyper|$BARE_ADDR|$BARE_PID|--baseline"; do
    IFS='|' read -r name addr pid extra <<<"$target"
    echo "### $name (load avg $(cut -d' ' -f1 /proc/loadavg))"
    # shellcheck disable=SC2086 # $extra is one flag or nothing
    timeout 120 "$T/vesta" bench rest --server "$addr" $extra -c "$RATE_CONNS" -r "$RATE" \
        -d "${WARMUP}s" >/dev/null 2>&1
    before=$(ticks "$pid")
    # shellcheck disable=SC2086
    timeout 3700 "$T/vesta" bench rest --server "$addr" $extra -c "$RATE_CONNS" -r "$RATE" \
        -d "${RATE_SECONDS}s" 2>/dev/null
    after=$(ticks "$pid")
    awk -v t=$((after - before)) -v hz="$TICK" -v s="$RATE_SECONDS" \
        'BEGIN { printf "server CPU: %.1f%% of one core\n", (t / hz) * 100 / s }'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
