#!/usr/bin/env bash
# Incus for the incus provider's tests, on a Debian 12 machine (as root).
#   incus-setup.sh packages   enable bookworm-backports (derived from this
#                             machine's apt sources, never a hard-coded
#                             mirror) and install incus, mmdebstrap,
#                             dnsmasq-base, btrfs-progs, zstd (the images'
#                             packing), apt-utils (apt-ftparchive, the
#                             upgrade repository's index)
#   incus-setup.sh daemon     start incusd unless it answers (machines
#                             without systemd: in a session of its own, with
#                             the limits its systemd unit gives it, its log in
#                             /var/log/drover-incusd.log), and create the
#                             storage pool `drover` (btrfs, in a file) the
#                             tests use
# No default network is made: each test creates its own bridge (NAT off).
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
case "${1:-}" in
packages)
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2=="bookworm"{print $1; exit}')
  [ -n "$mirror" ] || { echo "no bookworm entry in this machine's apt sources" >&2; exit 1; }
  list=/etc/apt/sources.list.d/drover-backports.sources
  if ! apt-get indextargets --format '$(RELEASE)' | grep -qx bookworm-backports; then
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" | $SUDO tee "$list" >/dev/null
  fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -t bookworm-backports incus
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y mmdebstrap dnsmasq-base btrfs-progs zstd apt-utils
  ;;
daemon)
  if ! $SUDO incus info >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
      $SUDO systemctl start incus.socket incus.service
    else
      # As its unit starts it: its own session (a test run's process
      # group, killed, must not take it along), the unit's limits, and the
      # inotify limits the package's sysctl file sets (every privileged
      # machine's systemd and dockerd draw on root's).
      $SUDO sysctl -qw fs.inotify.max_user_instances=1048576 fs.inotify.max_user_watches=1048576
      $SUDO setsid -f sh -c 'ulimit -n 1048576; ulimit -u unlimited; exec /usr/libexec/incus/incusd --group root --logfile /var/log/drover-incusd.log' </dev/null >/dev/null 2>&1
    fi
    $SUDO incus admin waitready --timeout=120
    $SUDO incus info >/dev/null
  fi
  # btrfs, not dir: with dir every new machine unpacks the whole image and
  # every deleted one is an rm -rf of a root file system with an engine's
  # data in it; that I/O stalled Incus's database until LXC's start hooks
  # timed out (docs/incus.md, Known problems). btrfs unpacks the image once
  # and makes each machine a snapshot of it.
  $SUDO incus storage show drover >/dev/null 2>&1 || $SUDO incus storage create drover btrfs size=40GiB >/dev/null
  ;;
*)
  echo "usage: $0 packages|daemon" >&2
  exit 2
  ;;
esac
