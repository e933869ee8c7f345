#!/usr/bin/env bash
# Builds a Debian machine image the incus provider's tests boot, from
# Debian's packages with mmdebstrap, and imports it into Incus under an alias.
# Two suites: bookworm (Debian 12, docker.io 20.10, the default) and trixie
# (Debian 13, docker.io 26.1), from the same archive.
# Cached: an image is rebuilt only when its suite, package lists or this
# script's files change (the alias carries that key), and re-imported only
# when Incus lacks it. The mirror is the one this machine's apt sources
# already use (their bookworm entry; trixie is taken from the same archive).
#
#   scripts/incus-image.sh [--suite bookworm|trixie] [ALIAS-PREFIX]
#       prints the alias it made/found (prefix: drover-SUITE)
set -euo pipefail
cd "$(dirname "$0")/.."
suite=bookworm
if [ "${1:-}" = --suite ]; then
  suite=${2:?--suite needs bookworm or trixie}
  shift 2
fi
case "$suite" in
bookworm) version=12 ;;
trixie) version=13 ;;
*) echo "unknown suite $suite (bookworm or trixie)" >&2; exit 2 ;;
esac
prefix=${1:-drover-$suite}
here=deploy/incus/image
# The packages every image has, then the suite's own (packages.SUITE).
lists=("$here/packages")
[ -f "$here/packages.$suite" ] && lists+=("$here/packages.$suite")
packages=$(cat "${lists[@]}" | tr '\n' ' ')
key=$({ echo "$suite"; cat "${lists[@]}" "$here/metadata.yaml" "$0"; find "$here/templates" "$here/files" -type f -print0 | sort -z | xargs -0 cat; } | sha256sum | cut -c1-12)
alias="$prefix-$key"
cache=${DROVER_INCUS_CACHE:-target/incus}
mkdir -p "$cache"
# One build at a time (tests start in parallel and all want the image).
exec 9>"$cache/.lock"
flock 9
if incus image info "$alias" >/dev/null 2>&1; then
  echo "$alias"
  exit 0
fi
tarball="$cache/$alias.tar.zst"
if [ ! -s "$tarball" ]; then
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2=="bookworm"{print $1; exit}')
  [ -n "$mirror" ] || { echo "no bookworm entry in this machine's apt sources" >&2; exit 1; }
  work=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/rootfs"
  # sshd starts at boot with no authorized key; its host keys are made on
  # each machine's first boot (cloud-init's ssh module, else the unit's
  # drop-in), never baked into the image: every machine has its own.
  mmdebstrap --quiet --variant=minbase --include="${packages// /,}" \
    --customize-hook="cp -a $here/files/. \"\$1/\"" \
    --customize-hook='chroot "$1" systemctl enable systemd-networkd ssh' \
    --customize-hook='chroot "$1" systemctl mask systemd-binfmt.service' \
    --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
    --customize-hook='rm -f "$1/etc/machine-id" && touch "$1/etc/machine-id"' \
    "$suite" "$work/rootfs" "deb $mirror $suite main" >&2
  sed -e "s/@CREATED@/$(date +%s)/" -e "s/@SUITE@/$suite/g" -e "s/@VERSION@/$version/g" \
    "$here/metadata.yaml" >"$work/metadata.yaml"
  cp -a "$here/templates" "$work/templates"
  # zstd: a fifth of gzip's time for the same size (Incus reads either).
  tar -C "$work" --numeric-owner -cf - metadata.yaml templates rootfs | zstd -q -f -T0 -3 -o "$tarball.part"
  mv "$tarball.part" "$tarball"
fi
incus image import "$tarball" --alias "$alias" >&2
# Older builds of this image are stale cache: removed, in Incus and on disk;
# in Incus only once no machine runs on one and none was made from it for an
# hour (another checkout's tests may be using it: they make machines by alias).
for old in $(incus image alias list --format csv | cut -d, -f1 | grep "^$prefix-" | grep -vx "$alias"); do
  idle=$(python3 - "$old" <<'EOF'
import datetime, json, subprocess, sys
def query(path):
    out = subprocess.run(["incus", "query", path], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)
image = query("/1.0/images/" + query("/1.0/images/aliases/" + sys.argv[1])["target"])
based = {i["config"].get("volatile.base_image") for i in query("/1.0/instances?recursion=1&all-projects=true")}
used = datetime.datetime.strptime(image["last_used_at"][:19], "%Y-%m-%dT%H:%M:%S")
hour = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(hours=1)
print("yes" if image["fingerprint"] not in based and used < hour else "no")
EOF
  ) || idle=no
  [ "$idle" = yes ] && { incus image delete "$old" >&2 || true; }
done
find "$cache" -maxdepth 1 -name "$prefix-*.tar.*" ! -name "$alias.tar.zst" -delete
echo "$alias"
