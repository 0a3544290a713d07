#!/usr/bin/env bash
# Bounded loopback benchmark of the gRPC service of `vesta serve rest` against the bare tonic
# handler (`bare-tonic`) in the same run, and of gRPC's latency at a fixed rate next to REST's
# on the same server (docs/bench/grpc.md), all measured by `vesta bench grpc|rest`. Builds
# nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta -p vesta-bench --bin bare-tonic
# Env: ROUNDS (3), SECONDS_PER_RUN (10), CONNS (16), STREAM_CONNS (2), RATES ("20000 5000"),
#      RATE_SECONDS (30), RATE_CONNS (16), WARMUP_SECONDS (3), TYPE (max-peak |
#      min-granularity), SERVER (the `vesta` binary that serves). Every process it starts is
#      bounded by `timeout` or its own lifetime and killed by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
DUR=${SECONDS_PER_RUN:-10}
CONNS=${CONNS:-16}
STREAM_CONNS=${STREAM_CONNS:-2}
RATES=${RATES:-20000 5000}
RATE_SECONDS=${RATE_SECONDS:-30}
RATE_CONNS=${RATE_CONNS:-16}
WARMUP=${WARMUP_SECONDS:-3}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
VESTA_ADDR=127.0.0.1:18080
BARE_ADDR=127.0.0.1:18082
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

timeout 3600 "$SERVER" serve rest --config "$work/rest.toml" --listen "$VESTA_ADDR" \
    --machine 924 2>"$work/rest.log" &
pids+=($!)
"$T/bare-tonic" "$BARE_ADDR" 3600 >"$work/bare.log" &
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
echo "## closed loop, ${DUR}s per run, $ROUNDS interleaved rounds (calls/s; server CPU us per call)"
echo "$CONNS connections for NextId and NextIds, $STREAM_CONNS for StreamIds; unit fill = IDs per"
echo "whole time unit inside the run ÷ the layout's cap"
echo "| round | bare tonic NextId | vesta NextId | vesta ÷ bare | NextIds 1000 (IDs/s) | StreamIds 1M: unit fill | bare tonic StreamIds 1M (numbers/s) | load avg |"
echo "|---|---|---|---|---|---|---|---|"
bench_grpc() { # pid conns bench-args... -> "calls/s cpu_us_per_call ids/s fill"
    local pid=$1 conns=$2 before after out rps ids fill
    shift 2
    before=$(ticks "$pid")
    out=$(timeout 120 "$T/vesta" bench grpc -c "$conns" -d "${DUR}s" "$@" 2>/dev/null)
    after=$(ticks "$pid")
    rps=$(awk '/^requests/ {gsub(",", "", $7); print $7}' <<<"$out")
    ids=$(awk '/^ids/ {gsub(",", "", $4); print $4}' <<<"$out")
    fill=$(awk '/^unit fill/ {print $3 "%"}' <<<"$out")
    awk -v r="$rps" -v t=$((after - before)) -v hz="$TICK" -v d="$DUR" -v i="${ids:--}" \
        -v f="${fill:--}" 'BEGIN { printf "%.0f %.2f %s %s\n", r, (t / hz) * 1e6 / (r * d), i, f }'
}
for round in $(seq 1 "$ROUNDS"); do
    read -r bare bare_cpu _ _ < <(bench_grpc "$BARE_PID" "$CONNS" --server "$BARE_ADDR" --baseline)
    read -r one one_cpu _ _ < <(bench_grpc "$VESTA_PID" "$CONNS" --server "$VESTA_ADDR")
    read -r _ _ batch_ids _ < <(bench_grpc "$VESTA_PID" "$CONNS" --server "$VESTA_ADDR" -b 1000)
    read -r _ _ _ fill < <(bench_grpc "$VESTA_PID" "$STREAM_CONNS" --server "$VESTA_ADDR" \
        -b 1000000 --stream)
    read -r bare_streams _ _ _ < <(bench_grpc "$BARE_PID" "$STREAM_CONNS" --server "$BARE_ADDR" \
        --baseline -b 1000000 --stream)
    ratio=$(awk -v a="$one" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
    numbers=$(awk -v s="$bare_streams" 'BEGIN { printf "%.0f", s * 1e6 }')
    echo "| $round | $bare ($bare_cpu us) | $one ($one_cpu us) | $ratio | $batch_ids | $fill | $numbers | $(cut -d' ' -f1 /proc/loadavg) |"
done
echo
for RATE in $RATES; do
echo "## fixed rate: $RATE calls/s, $RATE_CONNS connections, ${RATE_SECONDS}s after a ${WARMUP}s warm-up run"
for target in "vesta gRPC NextId|grpc|$VESTA_ADDR|$VESTA_PID|" \
    "vesta REST /genid|rest|$VESTA_ADDR|$VESTA_PID|" \
    "bare tonic NextId|grpc|$BARE_ADDR|$BARE_PID|--baseline"; do
    IFS='|' read -r name proto addr pid extra <<<"$target"
    echo "### $name (load avg $(cut -d' ' -f1 /proc/loadavg))"
    # shellcheck disable=SC2086 # $extra is one flag or nothing
    timeout 120 "$T/vesta" bench "$proto" --server "$addr" $extra -c "$RATE_CONNS" -r "$RATE" \
        -d "${WARMUP}s" >/dev/null 2>&1
    before=$(ticks "$pid")
    # shellcheck disable=SC2086
    timeout 3700 "$T/vesta" bench "$proto" --server "$addr" $extra -c "$RATE_CONNS" -r "$RATE" \
        -d "${RATE_SECONDS}s" 2>/dev/null
    after=$(ticks "$pid")
    awk -v t=$((after - before)) -v hz="$TICK" -v s="$RATE_SECONDS" \
        'BEGIN { printf "server CPU: %.1f%% of one core\n", (t / hz) * 100 / s }'
done
echo
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
