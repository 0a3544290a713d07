#!/usr/bin/env bash
# Same-run A/B of this checkout's servers against the build of 0ea2425 (before issues 8-14).
set -u
cd /work/main
T=target/release/vesta
OLD=/work/bench-old/vesta-0ea2425
R=/work/bench-results
ms=$(mktemp); printf '[id]\ntype = "min-granularity"\n' > $ms
pids=()
start() { timeout 900 "$@" 2>>$R/ab-servers.log & pids+=($!); }
start $T serve tcp --config $ms --listen 127.0.0.1:17654 --machine 924
start $OLD serve tcp --config $ms --listen 127.0.0.1:17656 --machine 926
start $T serve rest --config $ms --listen 127.0.0.1:18080 --machine 927
start $OLD serve rest --config $ms --listen 127.0.0.1:18090 --machine 928
sleep 2
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## gen --server, 5,120,000 IDs, min-granularity (cap 1,024,000/s)"
for round in 1 2 3; do
  for s in new:17654 old:17656; do
    name=${s%%:*}; port=${s##*:}
    a=$(date +%s.%N); $T gen --server 127.0.0.1:$port -n 5120000 | wc -l > /dev/null; b=$(date +%s.%N)
    awk -v n=5120000 -v a=$a -v b=$b -v r=$round -v s=$name 'BEGIN { printf "round %d %s: %.0f IDs/s = %.1f %% of the cap\n", r, s, n/(b-a), 100*n/(b-a)/1024000 }'
  done
done
echo "## single NEXT_ID at 1,000 req/s next to a saturating NEXT_IDS 1000 client, min-granularity"
for s in new:17654 old:17656; do
  name=${s%%:*}; port=${s##*:}
  echo "### $name"
  timeout 60 $T bench tcp --server 127.0.0.1:$port -c 2 -p 8 -b 1000 -d 12s 2>/dev/null | grep -E "^ids" | sed 's/^/saturating: /' &
  sat=$!
  sleep 1
  timeout 60 $T bench tcp --server 127.0.0.1:$port -c 1 -p 4 -r 1000 -d 10s 2>/dev/null | grep -E "^latency|^service|^errors"
  wait $sat
done
echo "## single /genid at 1,000 req/s next to a saturating /genids?count=1000 client, min-granularity"
for s in new:18080 old:18090; do
  name=${s%%:*}; port=${s##*:}
  echo "### $name"
  timeout 60 $T bench rest --server 127.0.0.1:$port -c 8 -b 1000 -d 12s 2>/dev/null | grep -E "^ids" | sed 's/^/saturating: /' &
  sat=$!
  sleep 1
  timeout 60 $T bench rest --server 127.0.0.1:$port -c 2 -r 1000 -d 10s 2>/dev/null | grep -E "^latency|^service|^errors"
  wait $sat
done
echo "## /genid closed loop, 64 connections, 10 s, interleaved (min-granularity config; far below the cap)"
for round in 1 2 3; do
  for s in new:18080 old:18090; do
    name=${s%%:*}; port=${s##*:}
    echo "round $round $name: $(timeout 60 $T bench rest --server 127.0.0.1:$port -c 64 -d 10s 2>/dev/null | grep -E '^requests|^latency' | tr '\n' ' ')"
  done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done
sleep 1; rm -f $ms
