#!/usr/bin/env bash
# Every key shape at scale, against Redis with the same keys in the same run (issue 47,
# docs/bench/seq.md "Key shapes"): per shape (dense, sparse: snowflake-sized numbers, string:
# 16-24 bytes) a fresh `vesta serve tcp --seq-db` on SQLite (default [seq]: 256 MiB bound) and
# a fresh Redis 7 in memory (`--save "" --appendonly no`); `vesta bench tcp --seq-keys N
# --seq-shape S` warms each up (every key called: sections loaded, Redis keys made), then a
# measured run of the same load; then the memory each holds for the N keys: vesta's RSS
# (/proc) and the bytes its sections are charged (/healthz), Redis's `used_memory` and RSS.
# Builds nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta
# Env: KEYS (1000000), SHAPES ("sparse string dense"), WARMUP_SECONDS (20), SECONDS_PER_RUN
# (10), ROUNDS (1), CONNS (2), PIPELINE (64), SERVER (the `vesta` that serves). Loopback only;
# every server is bounded by `timeout` and stopped by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

N=${KEYS:-1000000}
SHAPES=${SHAPES:-sparse string dense}
WARM=${WARMUP_SECONDS:-20}
DUR=${SECONDS_PER_RUN:-10}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-2}
PIPE=${PIPELINE:-64}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
TCP=127.0.0.1:17670
METRICS=127.0.0.1:19670
REDIS=127.0.0.1:16390

command -v redis-server >/dev/null || { echo "needs redis-server (apt-get install redis-server)" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
nps() { awk '/^numbers/ {gsub(",", "", $4); print $4}' "$1"; }
errors() { awk '/^errors/ {gsub(":", "", $2); gsub(",", "", $2); print $2}' "$1"; }
redis_info() { redis-cli -h 127.0.0.1 -p "${REDIS##*:}" info memory | tr -d '\r' | awk -F: -v k="$1" '$1 == k {print $2}'; }
health() { curl -sf "http://$METRICS/healthz" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "server $("$SERVER" --version | head -1); $(redis-server --version | cut -d' ' -f1-3)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$N keys a shape, $CONNS connections x pipeline $PIPE, warm-up ${WARM}s, measured ${DUR}s"
echo
echo "| round | shape | vesta numbers/s | Redis INCR/s | vesta ÷ Redis | vesta RSS | vesta charged | Redis used_memory | Redis RSS | vesta RSS ÷ Redis used_memory | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for shape in $SHAPES; do
        rm -f "$work"/seq.db*
        printf '[server]\nmetrics_listen = "%s"\n' "$METRICS" >"$work/tcp.toml"
        timeout 900 "$SERVER" serve tcp --config "$work/tcp.toml" --listen "$TCP" --machine 927 \
            --seq-db "sqlite://$work/seq.db" 2>"$work/tcp.log" &
        tpid=$!
        pids+=("$tpid")
        timeout 900 redis-server --bind 127.0.0.1 --port "${REDIS##*:}" --save "" \
            --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
        rpid=$!
        pids+=("$rpid")
        wait_listening "$TCP" "$METRICS" "$REDIS"
        vpid=$(pgrep -P "$tpid")
        redis_pid=$(pgrep -P "$rpid")
        load=(tcp --seq-keys "$N" --seq-shape "$shape" -c "$CONNS" -p "$PIPE")
        "$SERVER" bench "${load[@]}" --server "$TCP" -d "${WARM}s" >"$work/warm-vesta" 2>/dev/null
        "$SERVER" bench "${load[@]}" --server "$REDIS" --peer redis -d "${WARM}s" >"$work/warm-redis" 2>/dev/null
        l0=$(cut -d' ' -f1 /proc/loadavg)
        "$SERVER" bench "${load[@]}" --server "$TCP" -d "${DUR}s" >"$work/vesta" 2>/dev/null
        "$SERVER" bench "${load[@]}" --server "$REDIS" --peer redis -d "${DUR}s" >"$work/redis" 2>/dev/null
        l1=$(cut -d' ' -f1 /proc/loadavg)
        v=$(nps "$work/vesta") r=$(nps "$work/redis")
        [ "$(errors "$work/vesta")" = 0 ] || { echo "vesta errors:"; cat "$work/vesta"; }
        [ "$(errors "$work/redis")" = 0 ] || { echo "redis errors:"; cat "$work/redis"; }
        vr=$(rss_kb "$vpid") charged=$(health memory_bytes)
        ru=$(redis_info used_memory) rr=$(redis_info used_memory_rss)
        keys=$(redis-cli -h 127.0.0.1 -p "${REDIS##*:}" dbsize | tr -d '\r')
        held=$(($(health numeric_keys) + $(health string_keys)))
        echo "| $round | $shape | $v | $r | $(awk -v a="$v" -v b="$r" 'BEGIN {printf "%.2f", a / b}') | $((vr / 1024)) MiB | $((charged / 1048576)) MiB ($held keys in tables) | $((ru / 1048576)) MiB ($keys keys) | $((rr / 1048576)) MiB | $(awk -v a="$vr" -v b="$ru" 'BEGIN {printf "%.2f", a * 1024 / b}') | $l0-$l1 |"
        kill -TERM "$tpid" "$rpid" 2>/dev/null || true
        wait "$tpid" "$rpid" 2>/dev/null || true
    done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
