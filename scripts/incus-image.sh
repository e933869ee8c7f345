#!/usr/bin/env bash
# Builds the Debian 12 machine image the incus provider's tests boot, from
# Debian's packages with mmdebstrap, and imports it into Incus under an alias.
# Cached: the image is rebuilt only when its package list or this script's
# files change (the alias carries that key), and re-imported only when Incus
# lacks it. The mirror is the one this machine's apt sources already use.
#
#   scripts/incus-image.sh [ALIAS-PREFIX]     prints the alias it made/found
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-drover-bookworm}
here=deploy/incus/image
packages=$(tr '\n' ' ' <"$here/packages")
key=$({ cat "$here/packages" "$here/metadata.yaml" "$0"; find "$here/templates" "$here/files" -type f -print0 | sort -z | xargs -0 cat; } | sha256sum | cut -c1-12)
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
tarball="$cache/$alias.tar.gz"
if [ ! -s "$tarball" ]; then
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2=="bookworm"{print $1; exit}')
  [ -n "$mirror" ] || { echo "no bookworm entry in this machine's apt sources" >&2; exit 1; }
  work=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/rootfs"
  mmdebstrap --quiet --variant=minbase --include="${packages// /,}" \
    --customize-hook="cp -a $here/files/. \"\$1/\"" \
    --customize-hook='chroot "$1" systemctl enable systemd-networkd' \
    --customize-hook='chroot "$1" systemctl mask systemd-binfmt.service' \
    --customize-hook='rm -f "$1/etc/machine-id" && touch "$1/etc/machine-id"' \
    bookworm "$work/rootfs" "deb $mirror bookworm main" >&2
  sed "s/@CREATED@/$(date +%s)/" "$here/metadata.yaml" >"$work/metadata.yaml"
  cp -a "$here/templates" "$work/templates"
  tar -C "$work" --numeric-owner -czf "$tarball.part" metadata.yaml templates rootfs
  mv "$tarball.part" "$tarball"
fi
incus image import "$tarball" --alias "$alias" >&2
# Older builds of this image are stale cache: removed, in Incus and on disk.
for old in $(incus image alias list --format csv | cut -d, -f1 | grep "^$prefix-" | grep -vx "$alias"); do
  incus image delete "$old" >&2 || true
done
find "$cache" -maxdepth 1 -name "$prefix-*.tar.gz" ! -name "$alias.tar.gz" -delete
echo "$alias"
