# shellcheck shell=bash
# bench/cluster_lib.sh: forming a tided cluster on loopback with the real `tide`, for
# bench/cluster and bench/cache-read. Sourced after bench/lib.sh, never run.
#
# The sourcing script sets ADDRS (node k listens on ADDRS[k-1]), NFS_PORT, MOUNT_PORT,
# BACKEND_PORT, ADMIN_PORT, TIDED and TIDE; NODE_KEYS, if set, is more TOML for each node's
# [node] table, and BENCH_CLUSTER_KEYS from the environment more for its [cluster] table. start_cluster fills NODE_PIDS (node 1 first) and sets CDIR, which stop_started
# and the tide function use.

url() { echo "nfs://${ADDRS[$1 - 1]}/ifs?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"; }  # node
admin() { echo "${ADDRS[$1 - 1]}:$ADMIN_PORT"; }                                       # node

# Starts nodes 1..n, each with its own configuration and data under $CDIR, and forms them into
# the cluster `name` with tide; returns once every node answers NFS through the cluster and the
# namespace's shards are settled.
start_cluster() {  # n
  local n=$1 k port name="bench$1"
  CDIR=$WORK/c$n
  mkdir -p "$CDIR"
  for k in $(seq "$n"); do
    for port in $NFS_PORT $MOUNT_PORT $BACKEND_PORT $ADMIN_PORT; do
      port_free "${ADDRS[k - 1]}" "$port" || return 1
    done
    mkdir -p "$CDIR/node$k"
    write_tided_conf "$CDIR/node$k.toml" "$k" "$CDIR/node$k/data" "${ADDRS[k - 1]}" "$NFS_PORT" \
      "$MOUNT_PORT" \
      "$(printf '\n[cluster]\nname = "%s"\n%s\n%s' "$name" "${BENCH_CLUSTER_KEYS:-}" "$(store_table)")" \
      "${NODE_KEYS:-}"
    launch_tided "$TIDED" "$CDIR/node$k.toml" "$CDIR/node$k" || return 1
    NODE_PIDS+=("$LAUNCHED_PID")
  done
  for k in $(seq "$n"); do wait_admin "$k" || return 1; done
  tide cluster create "$name" --node "$(admin 1)" \
    --setup-secret-file "$CDIR/node1/data/setup-secret" || return 1
  for k in $(seq 2 "$n"); do
    tide --cluster "$(admin 1)" cluster add-node "$(admin "$k")" \
      --setup-secret-file "$CDIR/node$k/data/setup-secret" || return 1
  done
  for k in $(seq "$n"); do
    wait_nfs "node $k" "${NODE_PIDS[k - 1]}" "$(url "$k")" "$CDIR/node$k.log" || return 1
  done
  wait_settled
}

# Each shard's home in the status wait_settled saw last, shard 0 first, one per line.
homes_of_shards() {
  # The namespace's own "home" (shard 0's) comes first, then each shard's.
  grep -o '"home": [0-9]*' "$CDIR/status.json" | tail -n +2 | awk '{print $2}'
}
shard_home() { homes_of_shards | sed -n "$(($1 + 1))p"; }  # shard

# The same as "node 1" or "nodes 2, 1, 4, 3".
shard_homes() {
  local homes
  homes=$(homes_of_shards | paste -sd, -)
  case "$homes" in
    *,*) echo "nodes ${homes//,/, }" ;;
    *) echo "node ${homes:-?}" ;;
  esac
}

# Until the leader has spread the namespace's shards over the nodes and each is served, with
# its mirror in step (bounded: 120 s): measuring while shards move would measure the moves.
wait_settled() {
  local deadline=$((SECONDS + 120)) out=$CDIR/status.json
  while [ "$SECONDS" -lt "$deadline" ]; do
    if timeout 20 "$TIDE" --workdir "$CDIR/tide" status --format json >"$out" 2>&1 &&
      grep -q '"settled": true' "$out" && ! grep -qE '"(copying|handing over|home down|unknown)"' "$out"; then
      return 0
    fi
    sleep 0.5
  done
  warn "the namespace's shards were not all served and in step within 120 s:"
  cat "$out" >&2
  return 1
}

wait_admin() {  # node: until its admin API answers /health (bounded: 30 s)
  local k=$1 deadline=$((SECONDS + 30))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ! kill -0 "${NODE_PIDS[k - 1]}" 2>/dev/null; then
      warn "node $k exited"
      show_log "$CDIR/node$k.log"
      return 1
    fi
    curl -sk --max-time 2 -o /dev/null "https://$(admin "$k")/health" && return 0
    sleep 0.5
  done
  warn "node $k's admin API did not answer on https://$(admin "$k")/health within 30 s"
  show_log "$CDIR/node$k.log"
  return 1
}

tide() {  # args...: the CLI with the cluster's credentials, bounded; shows why it failed
  local out=$CDIR/tide.out k
  if ! timeout 120 "$TIDE" --workdir "$CDIR/tide" "$@" >"$out" 2>&1; then
    warn "tide $* failed:"
    cat "$out" >&2
    for k in $(seq ${#NODE_PIDS[@]}); do show_log "$CDIR/node$k.log"; done
    return 1
  fi
}
