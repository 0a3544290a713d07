#!/usr/bin/env bash
# Bounded loopback benchmark of per-key sequences over the servers (issue 33,
# docs/bench/seq.md): `vesta serve tcp --seq-db` on SQLite and on PostgreSQL loaded by
# `vesta bench tcp --seq-keys N` (pipelined SEQ_NEXT of random keys), against Redis INCR with
# the same keys, connections and pipeline (`--peer redis`; once in memory only, once with
# appendfsync everysec) and PostgreSQL `UPDATE ... RETURNING` per call (`--peer postgres`), in
# the same run; the table writes vesta made (vesta_seq_raises_total from the metrics listener)
# against calls ÷ step + sections; then p99.9 at a fixed rate over TCP and REST, next to
# NEXT_ID and /genid on the same servers. Builds nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta
# Needs PostgreSQL (/usr/lib/postgresql/*/bin) and redis-server (installed with apt-get when
# missing). Env: SECONDS_PER_RUN (10), KEYS ("1 1000 1000000": the key spaces), ROUNDS (1),
# CONNS (2), PIPELINE (64), PG_CONNS ("2 16": the PostgreSQL peer's pools), RATE (20000),
# RATE_KEYS (1000000), RATE_ROUNDS (2), RATE_TCP_CONNS (4), RATE_REST_CONNS (16),
# WARMUP_SECONDS (3), SERVER
# (the `vesta` binary that serves; the load always comes from this checkout's). Every server
# it starts listens on loopback only, is bounded by `timeout` (PostgreSQL: by this script's
# trap) and is stopped by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

DUR=${SECONDS_PER_RUN:-10}
KEYS=${KEYS:-1 1000 1000000}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-2}
PIPE=${PIPELINE:-64}
PG_CONNS=${PG_CONNS:-2 16}
RATE=${RATE:-20000}
RATE_KEYS=${RATE_KEYS:-1000000}
RATE_ROUNDS=${RATE_ROUNDS:-2}
RATE_TCP_CONNS=${RATE_TCP_CONNS:-4}
RATE_REST_CONNS=${RATE_REST_CONNS:-16}
WARMUP=${WARMUP_SECONDS:-3}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
TCP_LITE=127.0.0.1:17664
TCP_LITE_METRICS=127.0.0.1:19664
TCP_PG=127.0.0.1:17665
TCP_PG_METRICS=127.0.0.1:19665
REST=127.0.0.1:18090
REDIS=127.0.0.1:16379
REDIS_AOF=127.0.0.1:16380
PG_PORT=15432
TICK=$(getconf CLK_TCK)
# vesta's default seq.step: a section's first raise; the adaptive step only grows from it.
STEP=10000
SECTION_KEYS=100000

if ! command -v redis-server >/dev/null 2>&1; then
    echo "installing redis-server (the peer of the seq benchmark)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
PG_BIN=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)

work=$(mktemp -d)
chmod 755 "$work"
pids=()
pg_pid=""
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    if [ -n "$pg_pid" ]; then kill -INT "$pg_pid" 2>/dev/null || true; fi
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT

# PostgreSQL: a throwaway cluster on loopback (superuser vesta, trust), stopped by PID on exit.
mkdir "$work/pg"
chown postgres:postgres "$work/pg"
runuser -u postgres -- "$PG_BIN/initdb" -D "$work/pg" -A trust -U vesta >"$work/initdb.log"
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" \
    -o "-p $PG_PORT -k $work/pg -c listen_addresses=127.0.0.1" -w start >/dev/null
pg_pid=$(head -1 "$work/pg/postmaster.pid")
psql -q -h 127.0.0.1 -p "$PG_PORT" -U vesta -d postgres -c 'CREATE DATABASE vesta' \
    -c 'CREATE DATABASE peer'
PG_URL=postgres://vesta@127.0.0.1:$PG_PORT

# Redis twice: in memory only, and with the append-only file fsynced every second.
timeout 1800 redis-server --bind 127.0.0.1 --port "${REDIS##*:}" --save "" --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!); REDIS_PID=$!
mkdir "$work/aof"
timeout 1800 redis-server --bind 127.0.0.1 --port "${REDIS_AOF##*:}" --save "" \
    --appendonly yes --appendfsync everysec --dir "$work/aof" >"$work/redis-aof.log" 2>&1 &
pids+=($!); REDIS_AOF_PID=$!

# vesta: TCP on SQLite, TCP on PostgreSQL (each with a metrics listener), REST on SQLite. Each
# server has its own table: two processes on one table fence each other's sections.
printf '[server]\nmetrics_listen = "%s"\n' "$TCP_LITE_METRICS" >"$work/lite.toml"
printf '[server]\nmetrics_listen = "%s"\n' "$TCP_PG_METRICS" >"$work/pg.toml"
timeout 1800 "$SERVER" serve tcp --config "$work/lite.toml" --listen "$TCP_LITE" --machine 924 \
    --seq-db "sqlite://$work/seq-tcp.db" 2>"$work/tcp-lite.log" &
pids+=($!)
timeout 1800 "$SERVER" serve tcp --config "$work/pg.toml" --listen "$TCP_PG" --machine 925 \
    --seq-db "$PG_URL/vesta" 2>"$work/tcp-pg.log" &
pids+=($!)
timeout 1800 "$SERVER" serve rest --listen "$REST" --machine 926 \
    --seq-db "sqlite://$work/seq-rest.db" 2>"$work/rest.log" &
pids+=($!)
wait_listening "$TCP_LITE" "$TCP_PG" "$REST" "$REDIS" "$REDIS_AOF" "$TCP_LITE_METRICS" \
    "$TCP_PG_METRICS"
LITE_PID=$(pgrep -P "${pids[2]}") # the servers themselves, not `timeout`
PGV_PID=$(pgrep -P "${pids[3]}")
REST_PID=$(pgrep -P "${pids[4]}")
REDIS_PID=$(pgrep -P "$REDIS_PID")
REDIS_AOF_PID=$(pgrep -P "$REDIS_AOF_PID")

# 1234567 as 1,234,567.
group() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }
# CPU ticks (user + system) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# A counter of vesta's /metrics at HOST:PORT.
metric() { curl -sf "http://$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
# A figure of a report: requests/s, numbers/s, errors, p99.9 and p99 (µs), from its text.
field() { # report-file what
    case $2 in
    rps) awk '/^requests/ {gsub(",", "", $7); print $7}' "$1" ;;
    requests) awk '/^requests/ {gsub(",", "", $2); print $2}' "$1" ;;
    nps) awk '/^numbers/ {gsub(",", "", $4); print $4}' "$1" ;;
    errors) awk '/^errors/ {gsub(":", "", $2); gsub(",", "", $2); print $2}' "$1" ;;
    p999 | p99 | p50) awk -v q="$2" '/^latency/ {
            for (i = 2; i < NF; i++) if ($i == (q == "p999" ? "p99.9" : q)) {
                v = $(i + 1); u = $(i + 2); gsub(",", "", v)
                printf "%.0f\n", (u == "ms" ? v * 1000 : (u == "s" ? v * 1e6 : v)); exit } }' "$1" ;;
    esac
}
out=$work/out
# CPU ticks of this script's waited-for children: the load tool's own CPU.
child_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
run() { # title pid bench-args... -> prints the report; leaves it in $out, the server's CPU
    # in $cpu (% of a core) and $cpu_us (µs per request), the load tool's in $client
    local title=$1 pid=$2 before after c0
    shift 2
    echo
    echo "### $title (load avg $(cut -d' ' -f1 /proc/loadavg))"
    echo '```'
    echo "\$ vesta bench $*"
    c0=$(child_ticks)
    before=$([ "$pid" = - ] || ticks "$pid")
    timeout 120 "$T/vesta" bench "$@" -d "${DUR}s" 2>/dev/null >"$out" || echo "(failed: $?)" >>"$out"
    after=$([ "$pid" = - ] || ticks "$pid")
    cat "$out"
    cpu=$(awk -v t=$((after - before)) -v hz="$TICK" -v s="$DUR" \
        'BEGIN { printf "%.0f", (t / hz) * 100 / s }')
    cpu_us=$(awk -v t=$((after - before)) -v hz="$TICK" -v n="$(field "$out" requests)" \
        'BEGIN { printf "%.2f", (n > 0 ? (t / hz) * 1e6 / n : 0) }')
    client=$(awk -v t=$(($(child_ticks) - c0)) -v hz="$TICK" -v s="$DUR" \
        'BEGIN { printf "%.0f", (t / hz) * 100 / s }')
    if [ "$pid" = - ]; then
        echo "server CPU: not measured (a backend process per connection); load tool CPU: $client % of one core"
    else
        echo "server CPU: $cpu % of one core, $cpu_us µs per request; load tool CPU: $client % of one core"
    fi
    echo '```'
}

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); server $("$SERVER" --version | head -1)"
echo "$(redis-server --version | cut -d' ' -f1-3); PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') (defaults: fsync on, synchronous_commit on)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Closed loop, ${DUR}s a run, $CONNS connections x pipeline $PIPE (PostgreSQL: one query in"
echo "flight per connection), one number a call, keys drawn uniformly from 0..N."

summary=()
writes=()
for round in $(seq 1 "$ROUNDS"); do
    for n in $KEYS; do
        echo
        echo "## round $round, $n keys"
        r0=$(metric "$TCP_LITE_METRICS" vesta_seq_raises_total)
        l0=$(metric "$TCP_LITE_METRICS" vesta_seq_section_loads_total)
        run "vesta TCP, SQLite table" "$LITE_PID" tcp --server "$TCP_LITE" --seq-keys "$n" \
            -c "$CONNS" -p "$PIPE"
        lite=$(field "$out" nps) lite_cpu=$cpu_us lite_p=$(field "$out" p999)
        r1=$(metric "$TCP_LITE_METRICS" vesta_seq_raises_total)
        l1=$(metric "$TCP_LITE_METRICS" vesta_seq_section_loads_total)
        calls=$(awk '/^numbers/ {gsub(",", "", $2); print $2}' "$out")
        sections=$(((n + SECTION_KEYS - 1) / SECTION_KEYS))
        per_key=$((calls / n))
        writes+=("| $round | $(group "$n") | $(group "$calls") | $(group "$per_key") | $((r1 - r0)) | $((l1 - l0)) | $(group $((calls / STEP + sections))) |")
        echo "table writes: $((r1 - r0)) raises, $((l1 - l0)) section loads (bound: calls / step + sections = $((calls / STEP)) + $sections)"

        run "vesta TCP, PostgreSQL table" "$PGV_PID" tcp --server "$TCP_PG" --seq-keys "$n" \
            -c "$CONNS" -p "$PIPE"
        pgv=$(field "$out" nps) pgv_cpu=$cpu_us

        run "Redis INCR, in memory" "$REDIS_PID" tcp --peer redis --server "$REDIS" \
            --seq-keys "$n" -c "$CONNS" -p "$PIPE"
        redis=$(field "$out" nps) redis_cpu=$cpu_us redis_p=$(field "$out" p999)

        run "Redis INCR, appendfsync everysec" "$REDIS_AOF_PID" tcp --peer redis \
            --server "$REDIS_AOF" --seq-keys "$n" -c "$CONNS" -p "$PIPE"
        aof=$(field "$out" nps) aof_cpu=$cpu_us

        pg_cells=""
        for c in $PG_CONNS; do
            run "PostgreSQL UPDATE ... RETURNING, $c connections" - tcp --peer postgres \
                --server "$PG_URL/peer" --seq-keys "$n" -c "$c"
            pg_cells="$pg_cells $(group "$(field "$out" nps)") (c $c) |"
        done
        ratio=$(awk -v a="$lite" -v b="$redis" 'BEGIN { printf "%.2f", a / b }')
        summary+=("| $round | $(group "$n") | $(group "$lite") ($lite_cpu µs, p99.9 $(group "$lite_p") µs) | $(group "$pgv") ($pgv_cpu µs) | $(group "$redis") ($redis_cpu µs, p99.9 $(group "$redis_p") µs) | **$ratio** | $(group "$aof") ($aof_cpu µs) |$pg_cells $(cut -d' ' -f1 /proc/loadavg) |")
    done
done

echo
echo "## fixed rate: $RATE calls/s, ${DUR}s after a ${WARMUP}s warm-up run, $RATE_KEYS keys, $RATE_ROUNDS interleaved rounds"
rates=()
fixed() { # title pid bench-args...
    local title=$1 pid=$2
    shift 2
    timeout 120 "$T/vesta" bench "$@" -d "${WARMUP}s" >/dev/null 2>&1 || true
    run "$title" "$pid" "$@"
    rates+=("| $title | $(group "$(field "$out" rps)") | $(field "$out" p50) | $(group "$(field "$out" p99)") | **$(group "$(field "$out" p999)")** | $(awk '/^service/ {for (i = 2; i < NF; i++) if ($i == "p99.9") print $(i + 1), $(i + 2)}' "$out") | $(field "$out" errors) | $cpu % | $(cut -d' ' -f1 /proc/loadavg) |")
}
for round in $(seq 1 "$RATE_ROUNDS"); do
    fixed "$round: TCP SEQ_NEXT, $RATE_TCP_CONNS connections x pipeline $PIPE" "$LITE_PID" tcp \
        --server "$TCP_LITE" --seq-keys "$RATE_KEYS" -c "$RATE_TCP_CONNS" -p "$PIPE" -r "$RATE"
    fixed "$round: TCP NEXT_ID, same server and shape" "$LITE_PID" tcp --server "$TCP_LITE" \
        -c "$RATE_TCP_CONNS" -p "$PIPE" -r "$RATE"
    fixed "$round: REST GET /seq/{key}, $RATE_REST_CONNS connections" "$REST_PID" rest \
        --server "$REST" --seq-keys "$RATE_KEYS" -c "$RATE_REST_CONNS" -r "$RATE"
    fixed "$round: REST GET /genid, same server and shape" "$REST_PID" rest --server "$REST" \
        -c "$RATE_REST_CONNS" -r "$RATE"
done

echo
echo "## summary"
echo
echo "Closed loop, numbers/s (server CPU µs per call; p99.9 from the send):"
echo
echo "| round | keys | vesta TCP, SQLite | vesta TCP, PostgreSQL | Redis INCR, in memory | vesta ÷ Redis | Redis INCR, AOF everysec |$(for c in $PG_CONNS; do printf ' PostgreSQL UPDATE |'; done) load avg |"
echo "|---|---|---|---|---|---|---|$(for _ in $PG_CONNS; do printf -- '---|'; done)---|"
printf '%s\n' "${summary[@]}"
echo
echo "vesta TCP on SQLite, table writes during each run (from its metrics listener):"
echo
echo "| round | keys | calls | calls per key | raises | section loads | bound: calls ÷ step + sections |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${writes[@]}"
echo
echo "Fixed $RATE calls/s, latency from the intended send (µs), service p99.9 from the actual send:"
echo
echo "| round: run | achieved/s | p50 | p99 | p99.9 | service p99.9 | errors | server CPU | load avg |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rates[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
