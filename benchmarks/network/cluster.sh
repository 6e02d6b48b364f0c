# Sourced by run.sh: an emulated cluster on this one machine (root needed).
#
#   cluster_up RANKS ONE_WAY_US RATE     e.g. cluster_up 4 1000 1gbit
#   rank_exec K CMD...                   run CMD inside rank K's namespace
#   cluster_down                         remove everything cluster_up made (safe to repeat)
#
# Topology: one namespace per rank (${NET_PREFIX}K) whose only interface is the veth
# ${NET_IFACE} (address 10.77.0.(10+K)/24, the only route it has); the veth's other end is a port
# of a bridge in a hub namespace (no address there, so nothing is routed anywhere else).
# Delay is netem's "delay on egress", done by a delay_line process per rank: tc mirred steers
# everything the rank sends on ${NET_IFACE} into a TAP (tx0) that the delay line reads, and the
# delay line writes each frame ONE_WAY_US later into a second TAP (inK) that is also a bridge
# port, from where the bridge delivers it to the destination's veth. So A->B crosses A's delay
# line only: one-way delay ONE_WAY_US, round trip 2 x ONE_WAY_US, plus the machine's own cost.
# The bridge never sends anything back into a delay line: MAC addresses are static (fdb and
# neighbour entries), learning and flooding are off on the inK ports, IPv6 is off.
# Rates: tc tbf on tx0 (what the rank sends) and on the hub end of its veth (what it receives).

NET_PREFIX="${NET_PREFIX:-dclnet-}"
NET_HUB="${NET_PREFIX}hub"
NET_IFACE="emu0"
NET_SUBNET_PREFIX="10.77.0"
NET_RUN_DIR=""
# TCP segments handed to the TAPs are capped at this size: tbf lets one segment through
# unshaped after an idle period, so this bounds the error on short transfers (~130 us at 1 Gbit/s)
# while keeping the frame rate the user-space delay line has to copy low.
NET_GSO_MAX=16384

rank_addr() { echo "${NET_SUBNET_PREFIX}.$((10 + $1))"; }

rank_exec() {
  local k="$1"
  shift
  ip netns exec "${NET_PREFIX}${k}" "$@"
}

# tbf on one device: burst = one capped segment plus headers, queue = 2 ms at the rate.
_shape() {
  local ns="$1" dev="$2" rate="$3"
  ip -n "$ns" link set "$dev" txqueuelen 10000
  tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst $((NET_GSO_MAX + 4096)) \
    latency 2ms
}

cluster_up() {
  local ranks="$1" one_way_us="$2" rate="$3"
  NET_RUN_DIR="$(mktemp -d /tmp/dynamiccl-net.XXXXXX)"
  : "${DELAY_LINE:?DELAY_LINE must point at the compiled delay_line}"
  ip netns add "$NET_HUB"
  ip -n "$NET_HUB" link add br0 type bridge
  ip -n "$NET_HUB" link set br0 up
  local k j
  for ((k = 0; k < ranks; k++)); do
    local ns="${NET_PREFIX}${k}"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip -n "$NET_HUB" link add "v$k" type veth peer name "$NET_IFACE" netns "$ns"
    ip -n "$NET_HUB" link set "v$k" master br0 up
    ip -n "$ns" addr add "$(rank_addr "$k")/24" dev "$NET_IFACE"
    ip -n "$ns" link set "$NET_IFACE" gso_max_size "$NET_GSO_MAX" up
    # The delay line creates both of its TAPs; we configure them once it says so.
    "$DELAY_LINE" --rt "$one_way_us" "/var/run/netns/$ns" tx0 "/var/run/netns/$NET_HUB" "in$k" \
      >"$NET_RUN_DIR/line$k.out" 2>"$NET_RUN_DIR/line$k.err" &
    echo $! >"$NET_RUN_DIR/line$k.pid"
    local tries=0
    until grep -q ready "$NET_RUN_DIR/line$k.out" 2>/dev/null; do
      if ((++tries > 100)) || ! kill -0 "$(cat "$NET_RUN_DIR/line$k.pid")" 2>/dev/null; then
        echo "delay line $k did not start:" >&2
        cat "$NET_RUN_DIR/line$k.err" >&2
        return 1
      fi
      sleep 0.05
    done
    ip -n "$ns" link set tx0 up
    ip -n "$NET_HUB" link set "in$k" master br0 up
    ip netns exec "$NET_HUB" bridge link set dev "in$k" learning off flood off mcast_flood off \
      bcast_flood off
    tc -n "$ns" qdisc add dev "$NET_IFACE" clsact
    tc -n "$ns" filter add dev "$NET_IFACE" egress protocol all u32 match u32 0 0 \
      action mirred egress redirect dev tx0
    _shape "$ns" tx0 "$rate"
    _shape "$NET_HUB" "v$k" "$rate"
  done
  # Static addresses: every frame to rank K leaves the bridge on v$k, and no ARP is needed.
  local macs=()
  for ((k = 0; k < ranks; k++)); do
    macs[k]=$(ip -n "${NET_PREFIX}${k}" -br link show "$NET_IFACE" | awk '{ print $3 }')
    ip netns exec "$NET_HUB" bridge fdb replace "${macs[k]}" dev "v$k" master static
  done
  for ((k = 0; k < ranks; k++)); do
    for ((j = 0; j < ranks; j++)); do
      ((j == k)) && continue
      ip -n "${NET_PREFIX}${k}" neigh replace "$(rank_addr "$j")" lladdr "${macs[j]}" \
        dev "$NET_IFACE" nud permanent
    done
  done
}

cluster_down() {
  local f
  if [ -n "$NET_RUN_DIR" ] && [ -d "$NET_RUN_DIR" ]; then
    for f in "$NET_RUN_DIR"/line*.pid; do
      [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    for f in "$NET_RUN_DIR"/line*.pid; do
      [ -f "$f" ] && while kill -0 "$(cat "$f")" 2>/dev/null; do sleep 0.05; done
    done
    cat "$NET_RUN_DIR"/line*.err 2>/dev/null | grep -v ' 0 dropped' >&2 || true
    rm -rf "$NET_RUN_DIR"
  fi
  NET_RUN_DIR=""
  local ns
  for ns in $(ip netns list | awk -v p="$NET_PREFIX" 'index($1, p) == 1 { print $1 }'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del "$ns"
  done
}

# cluster_run RANKS PORT LOGDIR CMD...: CMD once per rank, inside its namespace, with the env://
# variables torch.distributed reads; rank 0 prints to stdout, the others to LOGDIR/rankK.log.
# Fails (and stops the other ranks) as soon as any rank fails.
cluster_run() {
  local ranks="$1" port="$2" logdir="$3"
  shift 3
  local pids=() k
  for ((k = 0; k < ranks; k++)); do
    local envs=(RANK="$k" LOCAL_RANK=0 WORLD_SIZE="$ranks" MASTER_ADDR="$(rank_addr 0)"
      MASTER_PORT="$port" GLOO_SOCKET_IFNAME="$NET_IFACE" OMP_NUM_THREADS=1)
    if ((k == 0)); then
      rank_exec "$k" env "${envs[@]}" "$@" &
    else
      rank_exec "$k" env "${envs[@]}" "$@" >"$logdir/rank$k.log" 2>&1 &
    fi
    pids+=($!)
  done
  local failed=0 running=("${pids[@]}") done_pid
  while ((${#running[@]} > 0)); do
    wait -n -p done_pid "${running[@]}" || { failed=1; break; }
    local still=() pid
    for pid in "${running[@]}"; do [ "$pid" != "$done_pid" ] && still+=("$pid"); done
    running=("${still[@]}")
  done
  if ((failed)); then
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait "${pids[@]}" 2>/dev/null
    for ((k = 1; k < ranks; k++)); do
      tail -n 5 "$logdir/rank$k.log" | sed "s/^/[rank $k] /" >&2
    done
    return 1
  fi
}
