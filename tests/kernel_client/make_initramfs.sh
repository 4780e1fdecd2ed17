#!/bin/sh
# make_initramfs.sh OUT KERNEL_VERSION INIT_SCRIPT [TOOL...]
#
# Writes OUT, an uncompressed newc initramfs for the kernel-client test's
# guest: a static busybox (/bin/busybox, Debian's busybox-static), the
# modules `modprobe --show-depends -a nfsv3 virtio_net virtio_pci` lists for
# KERNEL_VERSION (loaded in that order by /init, listed in /etc/tp-modules),
# GNU coreutils' touch and ls in /usr/local/bin with the libraries they load
# (busybox's touch refuses `-d 2018-01-01T00:00:00`, a form administrators
# type), each TOOL (the guest's portmapper and status monitor, its lock
# holder) there too, a passwd with uid 1000, and INIT_SCRIPT as /init.
#
# OUT is rebuilt only when INIT_SCRIPT, this script, busybox, the tools or
# the kernel's modules.dep changed since it was made (their checksums are kept in
# OUT.inputs), and replaced atomically, so a build directory keeps one per
# kernel. Prints why it failed on stderr and exits non-zero.
# Exit status 3: something this needs is not installed (the caller skips).
set -eu

out=$1
kver=$2
init=$3
shift 3
busybox=${BUSYBOX:-/bin/busybox}
moddir=/lib/modules/$kver
self=$0

missing() {
  echo "make_initramfs: $*" >&2
  exit 3
}

[ -x "$busybox" ] || missing "no $busybox (install busybox-static)"
case "$(ldd "$busybox" 2>&1)" in
  *"not a dynamic executable"* | *"statically linked"*) ;;
  *) missing "$busybox is not statically linked (install busybox-static)" ;;
esac
[ -f "$moddir/modules.dep" ] || missing "no $moddir/modules.dep (install linux-image-amd64)"
modprobe=$(command -v modprobe || echo /sbin/modprobe)
[ -x "$modprobe" ] || missing "no modprobe (install kmod)"

gnu_tools="/bin/touch /bin/ls"
for tool in $gnu_tools; do
  [ -x "$tool" ] || missing "no $tool (install coreutils)"
done
for tool in "$@"; do
  [ -x "$tool" ] || { echo "make_initramfs: no $tool (a build target)" >&2; exit 1; }
done
tools="$gnu_tools $*"

# What OUT is made of; OUT.inputs keeps the list OUT was made from.
# shellcheck disable=SC2086 # the tools are words
inputs=$(sha256sum "$init" "$self" "$busybox" $tools "$moddir/modules.dep")
if [ -f "$out" ] && [ "$(cat "$out.inputs" 2>/dev/null)" = "$inputs" ]; then
  exit 0
fi

stage=$(mktemp -d "${out}.stage.XXXXXX")
trap 'rm -rf "$stage" "$out.tmp.$$"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/etc" \
  "$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/mnt" "$stage/lib/modules"
cp "$busybox" "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
cp "$init" "$stage/init"
chmod 755 "$stage/init"

# The modules in load order, each once; decompressed so busybox's insmod takes them.
"$modprobe" -S "$kver" --show-depends -a nfsv3 virtio_net virtio_pci >"$stage/deps" ||
  { echo "make_initramfs: modprobe --show-depends failed for $kver" >&2; exit 1; }
: >"$stage/etc/tp-modules"
for path in $(awk '$1 == "insmod" { print $2 }' "$stage/deps"); do
  name=$(basename "$path")
  case "$name" in
    *.ko.xz) dest=${name%.xz}; xz -dc "$path" >"$stage/lib/modules/$dest" ;;
    *.ko.zst) dest=${name%.zst}; zstd -qdc "$path" >"$stage/lib/modules/$dest" ;;
    *.ko.gz) dest=${name%.gz}; gzip -dc "$path" >"$stage/lib/modules/$dest" ;;
    *) dest=$name; cp "$path" "$stage/lib/modules/$dest" ;;
  esac
  grep -qx "$dest" "$stage/etc/tp-modules" || echo "$dest" >>"$stage/etc/tp-modules"
done
rm "$stage/deps"
[ -s "$stage/etc/tp-modules" ] || { echo "make_initramfs: no modules for $kver" >&2; exit 1; }

mkdir -p "$stage/usr/local/bin"
# shellcheck disable=SC2086 # the tools are words
for tool in $tools; do
  cp "$tool" "$stage/usr/local/bin/"
  # The loader and each library by the path the tool asks for.
  for lib in $(ldd "$tool" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    mkdir -p "$stage$(dirname "$lib")"
    cp -L "$lib" "$stage$lib"
  done
done

cat >"$stage/etc/passwd" <<'EOF'
root:x:0:0:root:/tmp:/bin/sh
tp:x:1000:1000:tp:/tmp:/bin/sh
EOF
cat >"$stage/etc/group" <<'EOF'
root:x:0:
tp:x:1000:
EOF
echo /bin/sh >"$stage/etc/shells"

(cd "$stage" && find . -mindepth 1 | sort | "$busybox" cpio -o -H newc 2>/dev/null) >"$out.tmp.$$"
rm -f "$out.inputs"
mv "$out.tmp.$$" "$out"
echo "$inputs" >"$out.inputs"
