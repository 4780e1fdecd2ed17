#!/bin/sh
# /init of the kernel-client test's guest (busybox sh, see make_initramfs.sh).
#
# Mounts the node's export with the Linux kernel's own NFSv3 client and runs a
# scripted POSIX workload on it. Every step prints exactly one line on the
# serial console, which kernel_client_test.cc parses:
#   RUN <name>                    the step started (names the step on a hang)
#   STEP <name> OK (<secs> s)
#   STEP <name> FAIL: <the guest's own output, lines joined by " | ">
#   STEP <name> SKIP: <why>
# and, for the locks step, "TP LOCKED|UNLOCKED <kind> <path>", after which it
# waits for the host to type "TP GO" (or "TP FAIL <why>") on the console;
# then "TP DONE" and a power-off. With tp_mode=commands it runs no workload:
# it mounts the export at the export's own path, prints "TP READY", and runs
# each line the host types on the console as a shell command, printing its
# output as "OUT <line>" and then "END <exit status>", until the host types
# "TP EXIT" (kernel_client/tiering_walkthrough_test.cc). `touch` and `ls` are
# GNU coreutils' there (make_initramfs.sh).
# Parameters come on the kernel command line:
#   tp_server=ADDR        where the node's ports are forwarded (guestfwd)
#   tp_export=PATH        the export to mount
#   tp_mode=MODE          "workload" (the default) or "commands"
#   tp_files=N            entries of the big directory
#   tp_big=NAME           a file under the export the host wrote ...
#   tp_big_sha256=HEX     ... and its SHA-256
#   tp_big_size=BYTES     ... and its size
/bin/busybox mkdir -p /proc /sys /dev /tmp /mnt /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
exec </dev/console >/dev/console 2>&1

echo "TP init: $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpu(s)"
tp_server=10.0.2.100 tp_export=/ifs tp_mode=workload tp_files=5000 tp_big='' tp_big_sha256=''
tp_big_size=''
# shellcheck disable=SC2013 # the command line is words
for kv in $(cat /proc/cmdline); do
  case "$kv" in
    tp_*=*) eval "${kv%%=*}='${kv#*=}'" ;;
  esac
done

finish() {
  echo "TP DONE"
  sync
  poweroff -f
}

# One line of output, bounded, for a FAIL message.
oneline() {
  head -c 1500 "$1" | awk 'NR > 1 { printf " | " } { printf "%s", $0 }'
}

uptime_cs() {  # centiseconds since boot
  awk '{ printf "%d", $1 * 100 }' /proc/uptime
}

# run NAME FUNCTION [SECONDS]: runs FUNCTION in a subshell with `set -e`, in
# /mnt/kc, killed after SECONDS (default 60). A failed check prints what it
# expected and exits the subshell non-zero.
run() {
  name=$1
  limit=${3:-60}
  echo "RUN $name"
  start=$(uptime_cs)
  (set -e; cd /mnt/kc; "$2") >/tmp/step.out 2>&1 &
  pid=$!
  (sleep "$limit"; kill -9 "$pid") >/dev/null 2>&1 &
  watchdog=$!
  rc=0
  wait "$pid" || rc=$?
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
  cs=$(($(uptime_cs) - start))
  secs="$((cs / 100)).$((cs / 10 % 10))$((cs % 10))"
  if [ "$rc" = 0 ]; then
    echo "STEP $name OK ($secs s)"
  elif [ "$rc" = 137 ]; then
    echo "STEP $name FAIL: no result within $limit s (killed); output: $(oneline /tmp/step.out)"
  else
    echo "STEP $name FAIL: $(oneline /tmp/step.out)"
  fi
}

# dd without its transfer summary; when it fails, what it said is the step's output.
quiet_dd() {
  dd "$@" 2>/tmp/dd.err || { cat /tmp/dd.err; return 1; }
}

# check WHAT ACTUAL EXPECTED
check() {
  if [ "$2" != "$3" ]; then
    echo "$1: expected '$3', got '$2'"
    exit 1
  fi
}

# refused WHAT ERROR-TEXT COMMAND...: COMMAND must fail, saying ERROR-TEXT.
refused() {
  what=$1
  want=$2
  shift 2
  if "$@" >/tmp/refused.out 2>&1; then
    echo "$what: succeeded, expected '$want'"
    exit 1
  fi
  if ! grep -q "$want" /tmp/refused.out; then
    echo "$what: expected '$want', got: $(cat /tmp/refused.out)"
    exit 1
  fi
}

# Forget cached pages, dentries and inodes, so that what follows reads from
# the server and not from this client's caches.
drop_caches() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
}

as_user() {  # uid 1000, gid 1000 (see /etc/passwd)
  su -s /bin/sh tp -c "$1"
}

# --- The workload -----------------------------------------------------------

step_write_read() {
  printf 'hello\n' >f
  check "read back" "$(cat f)" "hello"
  printf 'world\n' >>f
  check "append" "$(cat f)" "$(printf 'hello\nworld')"
  check "size after append" "$(stat -c %s f)" 12
  truncate -s 3 f
  check "after truncate to 3" "$(cat f)" "hel"
  truncate -s 8192 f
  check "size after extending truncate" "$(stat -c %s f)" 8192
  check "bytes past the old end" "$(tail -c 8189 f | tr -d '\000' | wc -c)" 0
  drop_caches
  check "size from the server" "$(stat -c %s f)" 8192
  check "head from the server" "$(head -c 3 f)" "hel"
  # 1 MiB of random data and an overwrite in its middle, read back from the server.
  quiet_dd if=/dev/urandom of=/tmp/rand bs=65536 count=16
  cp /tmp/rand rand
  printf 'XYZ' | quiet_dd of=rand bs=1 seek=70000 conv=notrunc
  printf 'XYZ' | quiet_dd of=/tmp/rand bs=1 seek=70000 conv=notrunc
  drop_caches
  check "sha256 of 1 MiB written and overwritten" "$(sha256sum <rand)" "$(sha256sum </tmp/rand)"
}

step_rename() {
  echo A >a
  mv a b
  check "old name after rename" "$(ls a 2>&1)" "ls: a: No such file or directory"
  check "contents under the new name" "$(cat b)" A
  echo X >c
  echo Y >d
  mv c d
  check "target replaced by rename" "$(cat d)" X
  check "source after rename over a file" "$(ls c 2>&1)" "ls: c: No such file or directory"
  mkdir r1 r2
  echo M >r1/m
  mv r1/m r2/m2
  mv r1 r2/r1moved
  drop_caches
  check "after renames across directories" "$(ls r2 | tr '\n' ' ')" "m2 r1moved "
  check "moved file" "$(cat r2/m2)" M
  mkdir e1 e2 e3
  echo z >e3/z
  mv -T e1 e2
  check "source after renaming a directory over an empty one" "$(ls -d e1 2>&1)" \
    "ls: e1: No such file or directory"
  check "target after renaming a directory over an empty one" "$(stat -c %F e2)" directory
  # RFC 1813 allows NFS3ERR_NOTEMPTY or NFS3ERR_EXIST here.
  refused "rename a directory over a non-empty one" "not empty\|File exists" mv -T e2 e3
  check "the non-empty target" "$(ls e3)" z
}

step_links() {
  printf 'L\n' >h1
  ln h1 h2
  check "link count after link" "$(stat -c %h h1)" 2
  printf 'more\n' >>h2
  check "write through the second name" "$(cat h1)" "$(printf 'L\nmore')"
  check "same inode" "$(stat -c %i h2)" "$(stat -c %i h1)"
  rm h2
  drop_caches
  check "link count after unlink" "$(stat -c %h h1)" 1
  ln -s h1 s1
  ln -s /no/such/target dangling
  drop_caches
  check "readlink" "$(readlink s1)" h1
  check "read through the symlink" "$(cat s1)" "$(printf 'L\nmore')"
  check "type" "$(stat -c %F s1)" "symbolic link"
  check "dangling readlink" "$(readlink dangling)" /no/such/target
  refused "open a dangling symlink" "No such file or directory" cat dangling
}

step_tree() {
  mkdir -p t/a/b/c t/x/y
  echo 1 >t/a/b/c/f
  echo 2 >t/x/y/g
  : >t/a/e
  refused "rmdir of a non-empty directory" "not empty" rmdir t/a
  drop_caches
  check "find" "$(find t | sort | tr '\n' ' ')" \
    "t t/a t/a/b t/a/b/c t/a/b/c/f t/a/e t/x t/x/y t/x/y/g "
  rm -r t
  refused "stat a tree removed with rm -r" "No such file or directory" stat t
  mkdir t2
  rmdir t2
  refused "stat a removed directory" "No such file or directory" stat t2
}

step_attributes() {
  echo data >m
  chmod 640 m
  touch -d "2001-02-03 04:05:06" m
  drop_caches
  check "mode after chmod" "$(stat -c %a m)" 640
  check "mtime after touch -d" "$(stat -c %Y m)" 981173106
  echo new >n
  drop_caches
  skew=$(($(stat -c %Y n) - $(date +%s)))
  if [ "$skew" -lt -300 ] || [ "$skew" -gt 300 ]; then
    echo "mtime of a new file is $skew s from the guest's clock"
    exit 1
  fi
  df /mnt >/tmp/df.out
  check "df lists the mount" "$(tail -n 1 /tmp/df.out | awk '{ print $NF }')" /mnt
}

# open(O_CREAT|O_EXCL): CREATE EXCLUSIVE with a verifier, then SETATTR of the
# mode and times (RFC 1813 3.3.8).
step_exclusive_create() {
  umask 022
  (set -C; echo first >x)
  refused "second exclusive create" "File exists" sh -c 'set -C; echo second >x'
  drop_caches
  check "contents" "$(cat x)" first
  check "mode" "$(stat -c %a x)" 644
  skew=$(($(stat -c %Y x) - $(date +%s)))
  if [ "$skew" -lt -300 ] || [ "$skew" -gt 300 ]; then
    echo "mtime after an exclusive create is $skew s from the guest's clock (the verifier?)"
    exit 1
  fi
}

# A file unlinked while open stays readable: the client renames it to
# .nfsXXXX ("silly rename") and removes that when the file is closed.
step_silly_rename() {
  mkdir sr
  echo still-here >sr/f
  exec 3<sr/f
  rm sr/f
  check "read after unlink" "$(cat <&3)" still-here
  check "silly-renamed entries while open" "$(find sr -name '.nfs*' | wc -l)" 1
  exec 3<&-
  i=0
  while [ -n "$(ls -A sr)" ] && [ "$i" -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  check "entries after close" "$(ls -A sr)" ""
  rmdir sr
}

step_bigdir_create() {
  mkdir big
  cd big
  i=0
  while [ "$i" -lt "$tp_files" ]; do
    : >"f$i"
    i=$((i + 1))
  done
}

step_bigdir_ls() {
  drop_caches
  ls -l big >/tmp/ls.out
  check "ls -l regular files" "$(grep -c '^-' /tmp/ls.out)" "$tp_files"
  check "ls -l total line" "$(head -n 1 /tmp/ls.out | cut -d' ' -f1)" total
  check "distinct names" "$(ls big | sort -u | wc -l)" "$tp_files"
  check "first and last name" "$(ls big/f0 big/f$((tp_files - 1)) | tr '\n' ' ')" \
    "big/f0 big/f$((tp_files - 1)) "
}

step_bigdir_remove() {
  rm -r big
  refused "stat the removed big directory" "No such file or directory" stat big
}

step_permissions() {
  echo secret >secret
  chmod 600 secret
  echo public >public
  chmod 644 public
  echo group >group
  chown 0:1000 group
  chmod 640 group
  mkdir closed open
  chmod 755 closed
  chown 1000:1000 open
  drop_caches
  check "uid 1000 reads a 0644 file" "$(as_user 'cat public')" public
  check "gid 1000 reads a 0640 file of group 1000" "$(as_user 'cat group')" group
  refused "uid 1000 reads root's 0600 file" "Permission denied" as_user 'cat secret'
  refused "uid 1000 writes root's 0644 file" "Permission denied" as_user 'echo x >public'
  refused "uid 1000 creates in root's 0755 directory" "Permission denied" \
    as_user 'touch closed/x'
  refused "uid 1000 removes from root's 0755 directory" "Permission denied" \
    as_user 'rm -f secret'
  refused "uid 1000 chmods root's file" "Operation not permitted" as_user 'chmod 666 secret'
  check "uid 1000 creates in its own directory" \
    "$(as_user 'echo mine >open/mine && cat open/mine')" mine
  check "owner of the new file" "$(stat -c %u:%g open/mine)" 1000:1000
  chmod 600 open/mine
  check "root reads uid 1000's 0600 file (no root squash)" "$(cat open/mine)" mine
}

# A stranger may not chown a file even to the owner and group it has (pjdfstest chown/07.t), and
# setgid goes only where Linux drops it: a chmod outside the file's group, a chown.
step_chown_restricted() {
  echo theirs >theirs
  mkdir theirs_dir
  ln -s theirs theirs_link
  check "the symlink's owner" "$(stat -c %u:%g theirs_link)" 0:0
  ctime=$(stat -c %Z theirs)
  sleep 1  # a ctime the refused calls moved would differ
  for object in theirs theirs_dir theirs_link; do
    refused "uid 1000 chowns root's $object to root" "Operation not permitted" \
      as_user "chown 0:0 $object"
    refused "uid 1000 lchowns root's $object to root" "Operation not permitted" \
      as_user "chown -h 0:0 $object"
  done
  drop_caches
  check "ctime after the refused chowns" "$(stat -c %Z theirs)" "$ctime"
  echo mine >mine
  chown 1000:0 mine
  chmod 2755 mine
  as_user 'chown 1000 mine'
  check "setuid/setgid after the owner's chown to itself" "$(stat -c %a mine)" 755
  chmod 2755 mine
  as_user 'touch mine'
  drop_caches
  check "setgid after the owner, outside the group, touched the file" "$(stat -c %a mine)" 2755
  as_user 'chmod 2750 mine'
  drop_caches
  check "setgid after the owner, outside the group, chmodded the file" "$(stat -c %a mine)" 750
}

step_big_file() {
  check "size of $tp_big" "$(stat -c %s "../$tp_big")" "$tp_big_size"
  check "sha256 of $tp_big" "$(sha256sum "../$tp_big" | cut -d' ' -f1)" "$tp_big_sha256"
}

# Writes a file for the host to read back through libnfs after the guest
# stops; prints its checksum on a line of its own.
step_write_for_host() {
  quiet_dd if=/dev/urandom of=guest.bin bs=65536 count=64
  sync
  echo "SHA256 kc/guest.bin $(sha256sum <guest.bin | cut -d' ' -f1)" >/dev/console
}

# Tells the host `TP <what>` and waits for its verdict: "TP GO", or "TP FAIL
# <why>", which fails the step.
host_says() {
  echo "TP $1" >/dev/console
  IFS= read -r answer </dev/console
  answer=${answer%"$(printf '\r')"}
  [ "$answer" = "TP GO" ] || { echo "after '$1' the host said: $answer"; exit 1; }
}

# Locks through NLM, taken by the kernel's lockd (tp_guest_statd answering its
# SM_MON). For fcntl and for flock (which the NFS client sends as an NLM lock
# of the whole file), the guest holds an exclusive lock of a file while the
# host asks for it through another node and must be refused, then releases it
# and the host must get it.
step_locks() {
  stty -echo </dev/console
  for kind in fcntl flock; do
    file=lock.$kind
    : >"$file"
    /usr/local/bin/tp_guest_lock "$kind" "$file" >/tmp/holder.out 2>&1 &
    holder=$!
    i=0
    until grep -q held /tmp/holder.out; do
      if ! kill -0 "$holder" 2>/dev/null || [ "$i" -ge 200 ]; then
        cat /tmp/holder.out /tmp/statd.log
        echo "$kind: no lock within 20 s"
        exit 1
      fi
      sleep 0.1
      i=$((i + 1))
    done
    host_says "LOCKED $kind kc/$file"
    kill "$holder"
    wait "$holder"
    host_says "UNLOCKED $kind kc/$file"
  done
}

# --- Boot, network, mount, run ----------------------------------------------

while read -r module; do
  insmod "/lib/modules/$module" || echo "TP insmod $module failed"
done </etc/tp-modules

# The host's commands, one a line, until "TP EXIT". Each runs in a shell of its
# own, killed after 120 s; the console does not echo what the host types.
# Debian's busybox shell runs its own applets before anything on PATH: GNU
# touch and ls are shell functions there.
serve_commands() {
  gnu_tools='touch() { /usr/local/bin/touch "$@"; }; ls() { /usr/local/bin/ls "$@"; }'
  stty -echo
  echo "TP READY"
  while IFS= read -r line; do
    line=${line%"$(printf '\r')"}
    [ "$line" = "TP EXIT" ] && break
    (cd /; exec sh -c "$gnu_tools
$line") >/tmp/command.out 2>&1 &
    pid=$!
    (sleep 120; kill -9 "$pid") >/dev/null 2>&1 &
    watchdog=$!
    rc=0
    wait "$pid" || rc=$?
    kill "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    sed 's/^/OUT /' /tmp/command.out
    echo "END $rc"
  done
}

unmount_and_finish() {
  echo "RUN umount"
  cd /
  if umount "$mount_point" >/tmp/umount.out 2>&1; then
    echo "STEP umount OK"
  else
    echo "STEP umount FAIL: $(oneline /tmp/umount.out)"
  fi
  finish
}

i=0
while [ ! -e /sys/class/net/eth0 ] && [ "$i" -lt 50 ]; do
  sleep 0.1
  i=$((i + 1))
done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2

# Commands name the export's paths as its clients do: it is mounted there.
mount_point=/mnt
if [ "$tp_mode" = commands ]; then
  mount_point=$tp_export
  mkdir -p "$mount_point"
fi
# The portmapper and status monitor the kernel's lockd registers with and
# asks to monitor the server, on 127.0.0.1:111.
/usr/local/bin/tp_guest_statd 2>/tmp/statd.log &
echo "RUN mount"
# The kernel's own text options, as mount.nfs would pass them; busybox's
# mount hands them to mount(2) unchanged. No port= or mountport=: the kernel
# asks the node's portmapper at tp_server:111. Locking is on: the first mount
# starts lockd.
if ! mount -t nfs -o "vers=3,proto=tcp,mountproto=tcp,addr=$tp_server" \
  "$tp_server:$tp_export" "$mount_point" >/tmp/mount.out 2>&1; then
  dmesg | grep -i -E 'nfs|rpc|lockd' | tail -n 8 >>/tmp/mount.out
  cat /tmp/statd.log >>/tmp/mount.out
  echo "STEP mount FAIL: $(oneline /tmp/mount.out)"
  finish
fi
echo "STEP mount OK"
grep " $mount_point " /proc/mounts
if [ "$tp_mode" = commands ]; then
  serve_commands
  unmount_and_finish
fi
mkdir -p /mnt/kc && chmod 755 /mnt /mnt/kc

run write_read step_write_read
run locks step_locks 90
run rename step_rename
run links step_links
run tree step_tree
run attributes step_attributes
run exclusive_create step_exclusive_create
run silly_rename step_silly_rename
run bigdir_create step_bigdir_create 200
run bigdir_ls step_bigdir_ls 90
run bigdir_remove step_bigdir_remove 200
run permissions step_permissions
run chown_restricted step_chown_restricted
run big_file step_big_file 90
run write_for_host step_write_for_host

unmount_and_finish
