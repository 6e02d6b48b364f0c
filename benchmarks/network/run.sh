#!/usr/bin/env bash
# The CPU engine under real network conditions: an emulated cluster on this machine (network
# namespaces, veths, a bridge, tc tbf rates and user-space delay lines; see cluster.sh), then
#   0. capacity: what the path carries at all (loopback vs. through a delay line),
#   1. netcheck: measured RTT and bandwidth of each profile,
#   2. sweep:    every CPU arm of allreduce / allgather / reduce_scatter / broadcast, 4 B..64 MiB,
#                at 4 and 8 ranks under each profile (coll_bench.py),
#   3. e2e:      examples/train_ddp.py under the WAN profile at 4 ranks, dynamiccl learning
#                step-aware (as shipped) and per call (--no-hook) against plain gloo, back to
#                back in the same cluster, in three configurations,
#   4. forced:   (only when named in --stages) the same training with every CPU all-reduce arm
#                pinned in turn (DYNAMICCL_FORCE), and gloo: what each arm gives the step, the
#                oracle the learners are judged against,
# and writes results.md and sweep_<op>.png (report.py). Needs root (namespaces, tc).
#
#   benchmarks/network/run.sh [--quick] [--stages capacity,netcheck,sweep,e2e,forced]
#                             [--configs NAME,...] [--variants NAME,...] [--out DIR] [--no-build]
#                             [--keep-traces]
#
# --quick: fewer sizes, repetitions and steps (a few minutes), written to
# build/network-quick unless --out is given; the full run writes benchmarks/network/.
# --no-build: use the existing environment and build instead of sourcing scripts/env.sh.
# --configs: run only these e2e configurations (e2e and forced stages): their records in
# e2e.jsonl / forced.jsonl are replaced, the other configurations' kept.
# --variants: run these e2e variants (gloo, dynamiccl, dynamiccl_per_call, which are the
# default, and dynamiccl_replay), e.g. more repetitions of two of them back to back; needs
# --out, so a record of other variants never replaces the full one.
# --ablate RULE[,RULE]: the variants dynamiccl_ablated and dynamiccl_per_call_ablated run with
# these learner rules off (DYNAMICCL_TEST_ABLATE), e.g. --variants
# dynamiccl,dynamiccl_ablated --ablate skew_skip: what a rule buys under the WAN profile.
# --repeats N: e2e repetitions of each configuration (default 3, --quick 1).
# --keep-traces: keep each e2e run's call traces (every rank's DYNAMICCL_TRACE file, ~3 MB a
# run) in OUT/traces/CONFIG-VARIANT-REP/, for probe_timing.py; without it they are deleted.
#
# Profiles (host-to-host one-way delay, per-direction rate of each rank's link):
#   lan  50 us, 10 Gbit/s      wan  1 ms, 1 Gbit/s
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

ORIG_ARGS="$*"
QUICK=0
STAGES="capacity,netcheck,sweep,e2e"
CONFIGS=""
VARIANTS=""
OUT=""
BUILD_ENV=1
KEEP_TRACES=0
ABLATE=""
REPEATS=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --stages) STAGES="$2"; shift ;;
    --configs) CONFIGS="$2"; shift ;;
    --variants) VARIANTS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --no-build) BUILD_ENV=0 ;;
    --keep-traces) KEEP_TRACES=1 ;;
    --ablate) ABLATE="$2"; shift ;;
    --repeats) REPEATS="$2"; shift ;;
    *) echo "unknown argument $1; accepted: --quick, --stages LIST, --configs LIST," \
         "--variants LIST, --out DIR, --no-build, --keep-traces, --ablate RULES, --repeats N" >&2
       exit 2 ;;
  esac
  shift
done
if [ -n "$VARIANTS" ] && [ -z "$OUT" ]; then
  echo "--variants writes a partial e2e record: give --out DIR as well" >&2
  exit 2
fi

if ((BUILD_ENV)); then
  # shellcheck source=/dev/null
  source "$ROOT/scripts/env.sh"  # sets VENV and BUILD, the environment and build it made
  PY="$VENV/bin/python"
else
  # --no-build: the environment already in effect (scripts/env.sh sourced, or one's own).
  PY="$(command -v python)"
  BUILD="${DYNAMICCL_BUILD:-$ROOT/build}"
fi
if ((QUICK)); then OUT="${OUT:-$BUILD/network-quick}"; else OUT="${OUT:-$HERE}"; fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

if [ "$(id -u)" != 0 ]; then echo "run.sh needs root (ip netns, tc)" >&2; exit 1; fi
for tool in ip tc bridge cc; do
  command -v "$tool" >/dev/null || { echo "run.sh needs '$tool'" >&2; exit 1; }
done

mkdir -p "$BUILD/network"
DELAY_LINE="$BUILD/network/delay_line"
cc -O2 -Wall -Wextra -pthread -o "$DELAY_LINE" "$HERE/delay_line.c"

# shellcheck source=cluster.sh
source "$HERE/cluster.sh"
LOGS="$(mktemp -d /tmp/dynamiccl-netlogs.XXXXXX)"
cleanup() {
  cluster_down
  rm -rf "$LOGS"
}
# The ranks import a snapshot of the package (compiled module included): a rebuild in the
# checkout while this runs for an hour must not change, or break, what is measured.
snapshot_package() {
  local try
  for try in 1 2 3 4 5; do
    rm -rf "$LOGS/pkg" && mkdir -p "$LOGS/pkg" && cp -r "$ROOT/dynamiccl_pg" "$LOGS/pkg/"
    if (cd "$LOGS" && PYTHONPATH="$LOGS/pkg" "$PY" -c "import dynamiccl_pg") 2>/dev/null; then
      return 0
    fi
    sleep 20  # caught a build half-written; try again
  done
  echo "cannot import dynamiccl_pg from $ROOT (is it built?)" >&2
  return 1
}
snapshot_package
trap cleanup EXIT
trap 'exit 130' INT TERM
cluster_down  # leftovers of an interrupted run

declare -A ONE_WAY_US=([lan]=50 [wan]=1000)
declare -A RATE=([lan]=10gbit [wan]=1gbit)
PORT=29600
next_port() { PORT=$((PORT + 1)); }

# TCP ping-pong RTT (us) between ranks 0 and 1 of the current cluster: the median of three
# runs' medians, so that one disturbed run does not set a profile's delay.
ping_rtt() {
  rank_exec 1 python3 "$HERE/netcheck.py" serve 5000 &
  local server=$! i
  for i in 1 2 3; do
    rank_exec 0 python3 "$HERE/netcheck.py" ping "$(rank_addr 1)" 5000 "$1" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["rtt_us_median"])'
  done | sort -g | sed -n 2p
  rank_exec 0 python3 "$HERE/netcheck.py" quit "$(rank_addr 1)" 5000
  wait "$server"
}

# The path through the machine itself (veths, bridge, a delay line adding nothing) already has
# a one-way latency of tens of microseconds; each profile's delay line adds only what is
# missing, with one correction from a measurement: measured RTT / 2 ~ the profile's target.
declare -A ADDED_US
calibrate() {
  cluster_up 2 0 100gbit
  BASE_ONE_WAY_US=$(ping_rtt 1000 | awk '{ printf "%.1f", $1 / 2 }')
  cluster_down
  echo "[network] the machine's own one-way latency (nothing added): ${BASE_ONE_WAY_US} us"
  local profile added rtt
  for profile in lan wan; do
    added=$(awk -v t="${ONE_WAY_US[$profile]}" -v b="$BASE_ONE_WAY_US" \
      'BEGIN { d = t - b; printf "%.1f", (d > 0 ? d : 0) }')
    cluster_up 2 "$added" "${RATE[$profile]}"
    rtt=$(ping_rtt 500)
    cluster_down
    ADDED_US[$profile]=$(awk -v a="$added" -v t="${ONE_WAY_US[$profile]}" -v r="$rtt" \
      'BEGIN { d = a + t - r / 2; printf "%.1f", (d > 0 ? d : 0) }')
    echo "[network] $profile: adding ${added} us gave RTT ${rtt} us;" \
      "adding ${ADDED_US[$profile]} us"
  done
}

profile_up() {
  cluster_up "$2" "${ADDED_US[$1]}" "${RATE[$1]}"
}

# What the path can carry at all, on an idle machine: loopback inside one namespace, and one
# TCP stream through a delay line that adds nothing, without a rate limit.
capacity() {
  rm -f "$OUT/capacity.jsonl"
  cluster_up 2 0 100gbit
  local path host server_rank
  for path in loopback line; do
    host=127.0.0.1 server_rank=0
    [ "$path" = line ] && host="$(rank_addr 1)" server_rank=1
    rank_exec "$server_rank" python3 "$HERE/netcheck.py" serve 5000 &
    local server=$! ping bulk
    ping=$(rank_exec 0 python3 "$HERE/netcheck.py" ping "$host" 5000 1000)
    bulk=$(rank_exec 0 python3 "$HERE/netcheck.py" bulk "$host" 5000 5)
    rank_exec 0 python3 "$HERE/netcheck.py" quit "$host" 5000
    wait "$server"
    local label="loopback inside one namespace (no veth, no delay line)"
    [ "$path" = line ] && label="rank to rank: veth, bridge, one delay line adding 0 µs, no tbf"
    echo "{\"path\": \"$label\", \"ping\": $ping, \"bulk\": $bulk}" >>"$OUT/capacity.jsonl"
    echo "[network] capacity, $label: ping $ping bulk $bulk"
  done
  cluster_down
}

# RTT and single-stream bandwidth between ranks 0 and 1 of the current cluster.
netcheck() {
  local profile="$1" ranks="$2" seconds="$3"
  rank_exec 1 python3 "$HERE/netcheck.py" serve 5000 &
  local server=$! ping bulk first
  ping=$(rank_exec 0 python3 "$HERE/netcheck.py" ping "$(rank_addr 1)" 5000 1000)
  bulk=$(rank_exec 0 python3 "$HERE/netcheck.py" bulk "$(rank_addr 1)" 5000 "$seconds")
  first=$(rank_exec 0 python3 "$HERE/netcheck.py" first "$(rank_addr 1)" 5000)
  rank_exec 0 python3 "$HERE/netcheck.py" quit "$(rank_addr 1)" 5000
  wait "$server"
  echo "[network] $profile x$ranks: ping $ping bulk $bulk first use $first"
  # One JSON line per cluster; a cluster far from its profile would make every number after it
  # meaningless, so that stops the run.
  python3 - "$profile" "$ranks" "${ONE_WAY_US[$profile]}" "${RATE[$profile]}" \
    "${ADDED_US[$profile]}" "$BASE_ONE_WAY_US" "$ping" "$bulk" "$first" \
    >>"$OUT/netcheck.jsonl" <<'EOF'
import json, sys
profile, world, target, rate, added, base, ping, bulk, first = sys.argv[1:]
rec = {"profile": profile, "world": int(world), "target_one_way_us": float(target), "rate": rate,
       "added_delay_us": float(added), "base_one_way_us": float(base),
       "ping": json.loads(ping), "bulk": json.loads(bulk), "first_use": json.loads(first)}
print(json.dumps(rec))
one_way = rec["ping"]["rtt_us_median"] / 2
if not 0.5 * rec["target_one_way_us"] <= one_way <= 2 * rec["target_one_way_us"]:
    sys.exit(f"measured one-way latency {one_way:.0f} us is far from the target {target} us")
EOF
}

run_ranks() {
  local ranks="$1"
  shift
  next_port
  (cd "$ROOT" && cluster_run "$ranks" "$PORT" "$LOGS" env PYTHONPATH="$LOGS/pkg" "$@")
}

has_stage() { [[ ",$STAGES," == *",$1,"* ]]; }

# Before a stage writes its records: without --configs it starts its file afresh; with it, only
# the configurations it runs are dropped (E2E_CONFIGS, as --configs narrowed it).
clear_records() {
  if [ -z "$CONFIGS" ]; then rm -f "$1"; return; fi
  [ -f "$1" ] || return 0
  "$PY" - "$1" "${E2E_CONFIGS[@]%%|*}" <<'EOF'
import json, sys
path, names = sys.argv[1], set(sys.argv[2:])
with open(path) as f:
    keep = [line for line in f if line.strip() and json.loads(line)["config"] not in names]
with open(path, "w") as f:
    f.writelines(keep)
EOF
}

if ((QUICK)); then
  SIZES="4,256,16K,1M,16M"
  REPS_SCALE=0.4
  WORLDS=(4 8)
  E2E_STEPS=300
  E2E_REPEATS=1
  FORCED_STEPS=200
else
  SIZES="4,16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M"
  REPS_SCALE=1.0
  WORLDS=(4 8)
  E2E_STEPS=1200
  E2E_REPEATS=3
  FORCED_STEPS=400  # nothing learns: the second half's median settles sooner
fi
# e2e configurations: name and train_ddp.py arguments (see README.md for why these).
E2E_CONFIGS=(
  "example_defaults|--hidden 256 --bucket-cap-mb 0.25"
  "gains_expected|--hidden 64 --bucket-cap-mb 0.03"
  "native_near_best|--hidden 512 --bucket-cap-mb 25"
)
# Keeps the entries ("name|arguments") of the array named $1 whose names the comma-separated
# list $3 gives; a name it does not have stops the run ($2: the option, for the message).
narrow() {
  local -n entries="$1"
  local all name entry wanted kept=()
  all="$(printf '%s,' "${entries[@]%%|*}")"
  IFS=, read -r -a wanted <<<"$3"
  for name in "${wanted[@]}"; do
    if [[ ",$all" != *",$name,"* ]]; then
      echo "$2: unknown name '$name'; accepted: ${all%,}" >&2
      exit 2
    fi
  done
  for entry in "${entries[@]}"; do
    [[ ",$3," == *",${entry%%|*},"* ]] && kept+=("$entry")
  done
  entries=("${kept[@]}")
}
ALL_CONFIGS="$(printf '%s,' "${E2E_CONFIGS[@]%%|*}")"
[ -n "$CONFIGS" ] && narrow E2E_CONFIGS --configs "$CONFIGS"
# e2e variants: the name e2e.jsonl records and train_ddp.py arguments. dynamiccl_per_call runs
# without the DDP bucket-hint hook: every bucket exposed, judged by its own duration.
# dynamiccl_replay (only when --variants names it, beside dynamiccl) loads the policy the
# step-aware run of its repetition learned and runs it frozen: what the learned choices give the
# step without the cost of learning them. It runs last in its repetition, after that run.
POLICY="$LOGS/policy.json"
E2E_VARIANTS=(
  "gloo|--backend gloo"
  "dynamiccl|--backend dynamiccl --save-policy $POLICY"
  "dynamiccl_per_call|--backend dynamiccl --no-hook"
  "dynamiccl_replay|--backend dynamiccl"
  "dynamiccl_ablated|--backend dynamiccl"
  "dynamiccl_per_call_ablated|--backend dynamiccl --no-hook"
)
narrow E2E_VARIANTS --variants "${VARIANTS:-gloo,dynamiccl,dynamiccl_per_call}"
ROTATED=() REPLAY=()
for variant in "${E2E_VARIANTS[@]}"; do
  if [[ "$variant" == dynamiccl_replay\|* ]]; then REPLAY=("$variant"); else ROTATED+=("$variant"); fi
done
if [[ ",$VARIANTS," == *_ablated,* ]] && [ -z "$ABLATE" ]; then
  echo "--variants: the *_ablated variants need --ablate RULE[,RULE]" >&2
  exit 2
fi
E2E_REPEATS="${REPEATS:-$E2E_REPEATS}"
if ((${#REPLAY[@]})) && [[ ",$VARIANTS," != *",dynamiccl,"* ]]; then
  echo "--variants: dynamiccl_replay replays the dynamiccl run's policy: name dynamiccl too" >&2
  exit 2
fi

START=$(date +%s)
has_stage capacity && capacity
calibrate

if has_stage netcheck || has_stage sweep; then
  has_stage netcheck && rm -f "$OUT/netcheck.jsonl"
  has_stage sweep && rm -f "$OUT/sweep.jsonl"
  for profile in lan wan; do
    for ranks in "${WORLDS[@]}"; do
      profile_up "$profile" "$ranks"
      has_stage netcheck && netcheck "$profile" "$ranks" 3
      if has_stage sweep; then
        echo "[network] sweep: $profile x$ranks ($((($(date +%s) - START) / 60)) min so far)"
        run_ranks "$ranks" "$PY" "$HERE/coll_bench.py" --sizes "$SIZES" --reps-scale "$REPS_SCALE" \
          --profile "$profile" --out "$OUT/sweep.jsonl"
      fi
      cluster_down
    done
  done
fi

if has_stage e2e; then
  clear_records "$OUT/e2e.jsonl"
  profile_up wan 4
  for cfg in "${E2E_CONFIGS[@]}"; do
    name="${cfg%%|*}"
    read -r -a cfg_args <<<"${cfg#*|}"
    for ((rep = 0; rep < E2E_REPEATS; rep++)); do
      # Rotate which variant goes first, so a drift of the machine favours none.
      first=$((rep % ${#ROTATED[@]}))
      order=("${ROTATED[@]:first}" "${ROTATED[@]:0:first}" "${REPLAY[@]}")
      rm -f "$POLICY"
      for variant in "${order[@]}"; do
        backend="${variant%%|*}"
        read -r -a variant_args <<<"${variant#*|}"
        replay=()
        [ "$backend" = dynamiccl_replay ] && replay=(DYNAMICCL_MODE=frozen DYNAMICCL_POLICY="$POLICY")
        [[ "$backend" == *_ablated ]] && replay=(DYNAMICCL_TEST_ABLATE="$ABLATE")
        echo "[network] e2e: $name, $backend, run $rep ($((($(date +%s) - START) / 60)) min so far)"
        log="$LOGS/e2e-$name-$backend-$rep.log"
        rm -f "$LOGS"/trace.* "$LOGS/stats.json"
        run_ranks 4 env "${replay[@]}" DYNAMICCL_TRACE="$LOGS/trace" \
          "$PY" "$ROOT/examples/train_ddp.py" "${variant_args[@]}" --steps "$E2E_STEPS" \
          "${cfg_args[@]}" --stats-json "$LOGS/stats.json" | tee "$log"
        PYTHONPATH="$LOGS/pkg" "$PY" "$HERE/e2e_parse.py" --log "$log" \
          --trace "$LOGS/trace.rank0.jsonl" --stats "$LOGS/stats.json" \
          --config "$name" --args "${cfg#*|}" --backend "$backend" --run "$rep" \
          --steps "$E2E_STEPS" >>"$OUT/e2e.jsonl"
        if ((KEEP_TRACES)) && [ "$backend" != gloo ]; then  # plain gloo writes no trace
          mkdir -p "$OUT/traces/$name-$backend-$rep"
          cp "$LOGS"/trace.rank*.jsonl "$OUT/traces/$name-$backend-$rep/"
        fi
      done
    done
  done
  cluster_down
fi

if has_stage forced; then
  clear_records "$OUT/forced.jsonl"
  # The arms are the product's catalog (first: the engine default, Gloo's own algorithm).
  read -r -a ARMS <<<"$(PYTHONPATH="$LOGS/pkg" "$PY" -c \
    'from dynamiccl_pg import _C; print(*_C.arm_names(_C.Engine.cpu, "allreduce"))')"
  FORCED=("gloo" "${ARMS[@]}")
  profile_up wan 4
  for cfg in "${E2E_CONFIGS[@]}"; do
    name="${cfg%%|*}"
    read -r -a cfg_args <<<"${cfg#*|}"
    for ((rep = 0; rep < E2E_REPEATS; rep++)); do
      shift_by=$((rep * ${#FORCED[@]} / E2E_REPEATS))  # rotate the order, as e2e does
      for arm in "${FORCED[@]:shift_by}" "${FORCED[@]:0:shift_by}"; do
        echo "[network] forced: $name, $arm, run $rep ($((($(date +%s) - START) / 60)) min so far)"
        log="$LOGS/forced-$name-$arm-$rep.log"
        force=() backend=gloo label=gloo
        if [ "$arm" != gloo ]; then
          force=(DYNAMICCL_FORCE="allreduce:$arm") backend=dynamiccl label="forced:$arm"
        fi
        rm -f "$LOGS"/trace.*
        run_ranks 4 env "${force[@]}" DYNAMICCL_TRACE="$LOGS/trace" \
          "$PY" "$ROOT/examples/train_ddp.py" --backend "$backend" --steps "$FORCED_STEPS" \
          "${cfg_args[@]}" | tee "$log"
        PYTHONPATH="$LOGS/pkg" "$PY" "$HERE/e2e_parse.py" --log "$log" --config "$name" \
          --args "${cfg#*|}" --backend "$label" --run "$rep" --steps "$FORCED_STEPS" \
          --trace "$LOGS/trace.rank0.jsonl" >>"$OUT/forced.jsonl"
      done
    done
  done
  cluster_down
fi

ELAPSED=$(($(date +%s) - START))
echo "[network] measurements took $((ELAPSED / 60)) min $((ELAPSED % 60)) s"
# Which command produced each stage's data: a stage re-run alone replaces only its own entry, and
# one for some configurations (--configs) only theirs, kept as "e2e (name,...)".
"$PY" - "$OUT/provenance.json" "$STAGES" "benchmarks/network/run.sh${ORIG_ARGS:+ $ORIG_ARGS}" \
  "$ELAPSED" "$QUICK" "$CONFIGS" "$ALL_CONFIGS" "${E2E_CONFIGS[@]%%|*}" <<'EOF'
import json, os, sys
path, stages, command, elapsed, quick, narrowed, all_configs, *names = sys.argv[1:]
prov = json.load(open(path)) if os.path.exists(path) else {}
for stage in stages.split(","):
    entry = {"command": command, "elapsed_s": int(elapsed), "quick": quick == "1"}
    mine = [k for k in prov if k == stage or k.startswith(stage + " (")]
    if narrowed and stage in ("e2e", "forced"):
        for key in mine:  # what an earlier run recorded of the other configurations stays its
            covered = prov[key].get("configs", all_configs.strip(",").split(","))
            rest = [n for n in covered if n not in names]
            old = prov.pop(key)
            if rest:
                prov[f"{stage} ({','.join(rest)})"] = {**old, "configs": rest}
        prov[f"{stage} ({','.join(names)})"] = {**entry, "configs": names}
    else:
        for key in mine:
            del prov[key]
        prov[stage] = entry
with open(path, "w") as f:
    json.dump(prov, f, indent=1, sort_keys=True)
EOF
"$PY" "$HERE/report.py" --dir "$OUT"
echo "[network] wrote $OUT/results.md and $OUT/sweep_<op>.png"
