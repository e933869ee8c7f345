#!/usr/bin/env bash
# Incus for the incus provider's tests, on a Debian 12 machine (as root).
#   incus-setup.sh packages   enable bookworm-backports (derived from this
#                             machine's apt sources, never a hard-coded
#                             mirror) and install incus, mmdebstrap, dnsmasq-base
#   incus-setup.sh daemon     start incusd unless it answers (machines
#                             without systemd: in the background, its log in
#                             /var/log/drover-incusd.log), and create the
#                             storage pool `drover` (dir) the tests use
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
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y mmdebstrap dnsmasq-base
  ;;
daemon)
  if ! $SUDO incus info >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
      $SUDO systemctl start incus.socket incus.service
    else
      $SUDO sh -c 'nohup /usr/libexec/incus/incusd --group root --logfile /var/log/drover-incusd.log >/dev/null 2>&1 </dev/null &'
    fi
    for _ in $(seq 60); do $SUDO incus info >/dev/null 2>&1 && break; sleep 0.5; done
    $SUDO incus info >/dev/null
  fi
  $SUDO incus storage show drover >/dev/null 2>&1 || $SUDO incus storage create drover dir >/dev/null
  ;;
*)
  echo "usage: $0 packages|daemon" >&2
  exit 2
  ;;
esac
