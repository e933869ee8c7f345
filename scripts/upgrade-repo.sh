#!/usr/bin/env bash
# Fills DIR with a flat package repository that upgrades the engine of a
# Debian 12 (bookworm) machine in place to Debian 13's (trixie) docker.io
# 26.1, for machines with no route out: serve DIR over HTTP on their bridge
# and point their apt at it (docs/incus.md, "Upgrading the engine in place").
#
# apt decides what goes in: `apt-get install --download-only
# --no-install-recommends -t trixie PACKAGES` in an APT root of its own (this
# machine's mirror, bookworm + trixie), against the dpkg status of the
# machine to upgrade: by default the bookworm test image's
# (scripts/incus-image.sh), else --status FILE (a copy of a machine's
# /var/lib/dpkg/status). For docker.io + docker-cli that is those two
# packages: every dependency of trixie's docker.io is met by bookworm's
# (containerd 1.6, runc 1.1.5 stay). Index: Packages and Release made by
# apt-ftparchive (Debian package apt-utils).
# Cached under target/incus/ keyed by this script, the packages and the
# status; DIR gets a copy.
#
#   scripts/upgrade-repo.sh [--status FILE] [--packages "docker.io docker-cli"] DIR
#       prints the packages it holds (name version), one a line
set -euo pipefail
status=""
packages="docker.io docker-cli"
while [ $# -gt 1 ]; do
  case "$1" in
  --status) status=$(realpath "$2"); shift 2 ;;
  --packages) packages=$2; shift 2 ;;
  *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--status FILE] [--packages LIST] DIR" >&2; exit 2; }
mkdir -p "$1"
dir=$(realpath "$1")
cd "$(dirname "$0")/.."
cache=$(realpath -m "${DROVER_INCUS_CACHE:-target/incus}")
mkdir -p "$cache"
work=$(mktemp -d "$cache/upgrade.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -z "$status" ]; then
  # The bookworm test image's own status: from its build, else from Incus.
  alias=$(scripts/incus-image.sh)
  if [ -s "$cache/$alias.tar.zst" ]; then
    zstd -dc "$cache/$alias.tar.zst" | tar -xO rootfs/var/lib/dpkg/status >"$work/status"
  else
    incus image export "$alias" "$work/image" >/dev/null
    tar -xaOf "$(ls "$work"/image*)" rootfs/var/lib/dpkg/status >"$work/status"
    rm -f "$work"/image*
  fi
  status="$work/status"
fi
key=$({ cat "$0" "$status"; echo "$packages"; } | sha256sum | cut -c1-12)
repo="$cache/upgrade-$key"
exec 9>"$cache/.upgrade.lock"
flock 9
if [ ! -s "$repo/Packages" ]; then
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2=="bookworm"{print $1; exit}')
  [ -n "$mirror" ] || { echo "no bookworm entry in this machine's apt sources" >&2; exit 1; }
  root="$work/apt"
  mkdir -p "$root"/etc/apt/{apt.conf.d,preferences.d,sources.list.d} "$root"/var/lib/apt/lists/partial \
    "$root"/var/cache/apt/archives/partial "$root"/var/lib/dpkg "$work/debs/partial"
  cp "$status" "$root/var/lib/dpkg/status"
  for suite in bookworm trixie; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main"
  done >"$root/etc/apt/sources.list"
  cat >"$work/apt.conf" <<EOF
Dir "$root/";
Dir::State::status "$root/var/lib/dpkg/status";
Dir::Etc::Parts "$root/etc/apt/apt.conf.d";
Dir::Etc::SourceParts "$root/etc/apt/sources.list.d";
Dir::Etc::Preferences "$root/etc/apt/preferences";
Dir::Etc::PreferencesParts "$root/etc/apt/preferences.d";
Dir::Cache::archives "$work/debs/";
APT::Architecture "$(dpkg --print-architecture)";
APT::Architectures { "$(dpkg --print-architecture)"; };
APT::Sandbox::User "root";
Acquire::Languages "none";
EOF
  export APT_CONFIG="$work/apt.conf"
  apt-get -q update >&2
  # shellcheck disable=SC2086 # a list of package names
  apt-get -q -y --download-only --no-install-recommends -t trixie install $packages >&2
  unset APT_CONFIG
  rm -rf "$work/debs/partial" "$work/debs/lock"
  ls "$work/debs/"*.deb >/dev/null 2>&1 || { echo "nothing to download: $packages already at trixie's versions" >&2; exit 1; }
  (cd "$work/debs" && apt-ftparchive packages . >Packages && apt-ftparchive release . >../Release && mv ../Release .)
  rm -rf "$repo"
  mv "$work/debs" "$repo"
  # Older repositories are stale cache.
  find "$cache" -maxdepth 1 -name 'upgrade-*' ! -name "upgrade-$key" ! -name 'upgrade.*' -exec rm -rf {} +
fi
rm -rf "${dir:?}"/*.deb "$dir/Packages" "$dir/Release"
cp "$repo"/*.deb "$repo/Packages" "$repo/Release" "$dir/"
awk '/^Package:/{p=$2} /^Version:/{print p, $2}' "$dir/Packages"
