# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share. Sourced, never run.
#
# The sourcing script sets BENCH_SCRIPT (its name in messages) and defines stop_started, which
# stops every process it started; make_workdir's traps call it at the end, also on failure or
# SIGINT/SIGTERM, before the work directory is removed (kept with BENCH_KEEP=1).

die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }
warn() { echo "$BENCH_SCRIPT: $*" >&2; }
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

is_loopback() { [[ $1 =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; }

# One line of figures for bench/report: when BENCH_RESULTS names a file, the fields are appended
# to it, separated by tabs (the first names the benchmark). A field never holds a tab.
record() {  # fields...
  [ -n "${BENCH_RESULTS:-}" ] || return 0
  local IFS=$'\t'
  echo "$*" >>"$BENCH_RESULTS"
}

# Sets BUILD and WORKLOADS from the command line `BUILD_DIR [workload...]`: `all` names the
# workloads the script knows, `defaults` those it runs when none is named.
parse_command_line() {  # all defaults args...
  local all=$1 defaults=$2 w
  shift 2
  [ $# -ge 1 ] || die "usage: $BENCH_SCRIPT BUILD_DIR [${all// /|} ...]"
  # shellcheck disable=SC2034  # the caller's
  BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
  shift
  WORKLOADS=("$@")
  [ ${#WORKLOADS[@]} -gt 0 ] || read -r -a WORKLOADS <<<"$defaults"
  for w in "${WORKLOADS[@]}"; do
    [[ " $all " == *" $w "* ]] || die "unknown workload $w (want: $all)"
  done
}

# The BENCH_* knobs of tp-loadgen's runs (bench/README.md). The data sizes' defaults are the
# script's own, so that each keeps its run time.
read_knobs() {  # seq_size rand_size files
  THREADS=${BENCH_THREADS:-4}        # threads (= connections) per tp-loadgen run
  DEPTH=${BENCH_DEPTH:-8}            # requests in flight per thread
  SEQ_SIZE=${BENCH_SEQ_SIZE:-$1}     # seq-read / seq-write: bytes per thread (one file each)
  SEQ_BLOCK=${BENCH_SEQ_BLOCK:-1M}
  RAND_SIZE=${BENCH_RAND_SIZE:-$2}   # rand-read: the one shared file
  FILES=${BENCH_FILES:-$3}           # small-file: files per run; metadata, rename: in the tree
  DURATION=${BENCH_DURATION:-5}      # seconds per measured run (an upper bound for seq/small)
  REPS=${BENCH_REPS:-3}              # measured runs per cell; the table shows their median
}

describe_knobs() {  # the line above a table
  echo "tp-loadgen: $THREADS threads x $DEPTH in flight; seq $SEQ_SIZE per thread in $SEQ_BLOCK" \
    "blocks; rand-read over $RAND_SIZE; $FILES files; runs of at most ${DURATION} s; median of" \
    "$REPS runs."
}

# Sets WORK (and OUT, where run_loadgen leaves tp-loadgen's JSON line) and the traps that clean
# up after the script.
make_workdir() {  # name
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || die "cannot make a work directory"
  OUT=$WORK/loadgen.json
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_started
  if [ "${BENCH_KEEP:-0}" = 1 ]; then say "work directory kept: $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}

stop_pid() {  # pid: TERM, up to 15 s, then KILL
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  sleep 0.2
}

port_free() {  # addr port: nothing listens there yet (a stale server would answer for ours)
  if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then
    warn "something already listens on $1:$2 (a server left from an earlier run?)"
    return 1
  fi
}

show_log() {  # file
  echo "--- last lines of $1 ---" >&2
  tail -n 20 "$1" >&2 2>/dev/null
}

# Waits until the server `name` (process `pid`) answers a MOUNT and a READDIR on `url`
# (bounded: 30 s); on failure shows the tail of `log`.
wait_nfs() {  # name pid url log
  local name=$1 pid=$2 url=$3 log=$4 deadline=$((SECONDS + 30))
  while [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$pid" 2>/dev/null || { warn "$name exited"; show_log "$log"; return 1; }
    timeout 5 nfs-ls "$url" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  warn "$name did not answer on $url within 30 s"
  show_log "$log"
  return 1
}

# The configuration of one tided on `addr`, data in `data_dir`, exporting /ifs to loopback
# clients from any port (as Ganesha's default) without root squash; no portmapper, so every URL
# names both ports. `extra`: more TOML; `node_keys`: more keys of the [node] table.
write_tided_conf() {  # file id data_dir addr nfs_port mount_port [extra] [node_keys]
  cat >"$1" <<EOF
[node]
id = $2
data_dir = "$3"
${8:-}

[frontend]
address = "$4"
nfs_port = $5
mount_port = $6
portmap_port = 0
register_with_rpcbind = false

[[exports]]
path = "/ifs"
clients = ["127.0.0.0/8"]
secure = false
root_squash = false
${7:-}
EOF
}

# Starts `tided` daemonized with `conf`, its pid file, log and stdout at `base`.{pid,log,out};
# sets LAUNCHED_PID. Does not wait for it to serve (wait_nfs does).
launch_tided() {  # tided conf base
  local tided=$1 conf=$2 base=$3
  rm -f "$base.pid"
  "$tided" --config "$conf" --daemonize --pid-file "$base.pid" --log-file "$base.log" \
    </dev/null >>"$base.out" 2>&1 || {
    warn "tided ($conf) failed to start"
    cat "$base.out" >&2
    return 1
  }
  for _ in $(seq 100); do [ -s "$base.pid" ] && break; sleep 0.1; done
  [ -s "$base.pid" ] || { warn "tided ($conf) wrote no pid file"; show_log "$base.log"; return 1; }
  # shellcheck disable=SC2034  # the caller's result
  LAUNCHED_PID=$(cat "$base.pid")
}

# tided's [store] table from BENCH_STORE_KEYS (e.g. 'shards = 4'), or nothing.
store_table() {
  if [ -n "${BENCH_STORE_KEYS:-}" ]; then printf '\n[store]\n%s\n' "$BENCH_STORE_KEYS"; fi
}

# tp-loadgen's options for `workload` from the knobs read_knobs read.
common_args() {  # workload
  local a=(--threads "$THREADS" --depth "$DEPTH" --duration "$DURATION")
  case $1 in
    seq-read|seq-write) a+=(--file-size "$SEQ_SIZE" --block-size "$SEQ_BLOCK") ;;
    rand-read) a+=(--file-size "$RAND_SIZE" --block-size 4K) ;;
    small-file|metadata|rename) a+=(--files "$FILES") ;;
  esac
  echo "${a[@]}"
}

# Runs $LOADGEN with `args`, its JSON line to $OUT. `what` names the run in messages: a failure
# shows tp-loadgen's stderr, a success its warnings, if any.
run_loadgen() {  # what args...
  local what=$1 err=$WORK/loadgen.err rc
  shift
  "$LOADGEN" "$@" >"$OUT" 2>"$err"
  rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$OUT" ]; then
    warn "tp-loadgen $what failed (exit $rc):"
    cat "$err" >&2
    return 1
  fi
  [ -s "$err" ] && sed "s/^/  [$what] /" "$err" >&2
  return 0
}

# The CPU time a process has used (user and system, every thread), in clock ticks.
cpu_ticks() {  # pid
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# The machine's counters a run's costs are told from: CPU ticks in all, waiting for the disk
# and taken by the hypervisor (steal), from /proc/stat; reads and sectors read of the disk
# under $WORK, from /proc/diskstats (none on a file system without a disk of its own); and the
# CPU ticks idle.
machine_counters() {
  local device
  device=$(stat -c '%Hd %Ld' "$WORK" 2>/dev/null)
  { head -1 /proc/stat; awk -v d="$device" '$1 " " $2 == d {print "disk", $4, $6}' /proc/diskstats; } |
    awk '/^cpu / {for (i = 2; i <= 9; i++) total += $i; idle = $5; iowait = $6; steal = $9}
         /^disk / {reads = $2; sectors = $3}
         END {print total + 0, iowait + 0, steal + 0, reads + 0, sectors + 0, idle + 0}'
}

# What a run cost: the server's CPU time, the machine's time stolen by the hypervisor and
# spent waiting for the disk, and the disk's reads (how many, and their mean size).
run_costs() {  # pid cpu_ticks_before machine_counters_before
  local after
  after=$(machine_counters)
  awk -v ticks="$(( $(cpu_ticks "$1") - $2 ))" -v hz="$(getconf CLK_TCK)" -v before="$3" \
    -v after="$after" 'BEGIN {
      split(before, b); split(after, a); total = a[1] - b[1]; reads = a[4] - b[4]
      printf "server CPU %.2f s", ticks / hz
      if (total > 0) printf ", steal %.0f %%, iowait %.0f %%", 100 * (a[3] - b[3]) / total, 100 * (a[2] - b[2]) / total
      if (reads > 0) {
        kib = (a[5] - b[5]) / 2 / reads
        printf ", disk: %d reads of %s", reads, kib < 1024 ? sprintf("%.0f KiB", kib) : sprintf("%.1f MiB", kib / 1024)
      }
    }'
}

field() { sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" <<<"$1"; }  # json name: a number in tp-loadgen's line

median() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g |
    awk '{a[NR]=$1} END {if (NR == 0) exit; if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

ratio() {  # a b: a / b with two decimals, or "-"
  awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'
}

# The items in the order of repetition `rep`: reversed every other time, so that none always
# runs first (machine load drifts, and a run can leave work behind for the next one).
in_turn() {  # rep item...
  local rep=$1; shift
  if [ $((rep % 2)) = 1 ]; then echo "$@"; else printf '%s\n' "$@" | tac | tr '\n' ' '; fi
}

# NFS-Ganesha's configuration: NFSv3 over TCP only on `addr`, the VFS FSAL exporting `dir` as
# /export without root squash.
write_ganesha_conf() {  # file addr nfs_port mount_port dir
  cat >"$1" <<EOF
NFS_CORE_PARAM {
  Bind_addr = $2;
  NFS_Port = $3;
  MNT_Port = $4;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_UDP = false;
  mount_path_pseudo = true;
  Protocols = 3;
}
NFSV4 { Graceless = true; }
EXPORT {
  Export_Id = 1;
  Path = "$5";
  Pseudo = /export;
  Access_Type = RW;
  Squash = No_Root_Squash;
  Protocols = 3;
  Transports = TCP;
  SecType = sys;
  FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF
}

# Starts rpcbind unless one runs; sets RPCBIND_PID when it started it (the caller stops it).
start_rpcbind() {
  # NFS-Ganesha refuses to start without rpcbind; `rpcbind -h` crashes in Debian's 1.2.6.
  pgrep -x rpcbind >/dev/null && return 0
  command -v rpcbind >/dev/null || die "rpcbind is not installed"
  rpcbind -f -w >"$WORK/rpcbind.log" 2>&1 &
  # shellcheck disable=SC2034  # the caller's
  RPCBIND_PID=$!
  for _ in $(seq 50); do
    rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && return 0
    (exec 3<>/dev/tcp/127.0.0.1/111) 2>/dev/null && return 0
    sleep 0.1
  done
  die "rpcbind did not start"
}

