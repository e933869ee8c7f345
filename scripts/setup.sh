#!/usr/bin/env bash
# Installs what drover's demo and tests need on a fresh Debian 12 machine.
# Idempotent: skips what is already there. Needs root (or sudo) for apt.
set -euo pipefail
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v etcd >/dev/null || need+=(etcd-server)
command -v busybox >/dev/null || need+=(busybox-static)
command -v protoc >/dev/null || need+=(protobuf-compiler libprotobuf-dev)
command -v ip >/dev/null || need+=(iproute2)
# iptables (and ss, from iproute2): the nemesis partitions an engine (e2e_nemesis).
command -v iptables >/dev/null || need+=(iptables)
command -v promtool >/dev/null || need+=(prometheus)
# systemd-analyze verify checks deploy/systemd's unit (crates/drover/tests/deploy.rs).
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v openssl >/dev/null || need+=(openssl)
# OpenSSH: the ssh provider drives the client (ssh, ssh-keygen, ssh-agent);
# its tests start sshd processes of their own on loopback (crates/ssh/tests).
command -v ssh >/dev/null || need+=(openssh-client)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
# A C compiler: the linker for Rust, and mimalloc (the binary's allocator) is C.
command -v cc >/dev/null || need+=(gcc libc6-dev)
# python3-venv: moto, the EC2 API the ec2 provider's tests run against (below).
{ command -v python3 >/dev/null && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; } || need+=(python3 python3-venv)
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${need[@]}"
fi
# moto (PyPI), the EC2 API the ec2 provider's tests run against
# (crates/ec2/tests), in a venv of its own; reinstalled only when the
# pinned version is not the one there.
MOTO_VERSION=5.2.5
if ! /opt/drover-moto/bin/python -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO /usr/bin/python3 -m venv /opt/drover-moto
  $SUDO /opt/drover-moto/bin/pip install --quiet "moto[server]==$MOTO_VERSION"
fi
# Incus (the incus provider's machines), with DROVER_INCUS=1 (scripts/test.sh
# sets it unless told DROVER_INCUS=0; the demo and benchmarks need none):
# from bookworm-backports, on the mirror this machine's apt sources already
# use; mmdebstrap builds its images (scripts/incus-image.sh, at the first test
# that needs one) and zstd packs them, btrfs-progs makes its storage pool,
# apt-ftparchive (apt-utils) indexes the in-place upgrade's package
# repository (scripts/upgrade-repo.sh).
if [ "${DROVER_INCUS:-0}" = 1 ]; then
  if ! command -v incus >/dev/null || ! command -v mmdebstrap >/dev/null || ! command -v dnsmasq >/dev/null || ! command -v mkfs.btrfs >/dev/null \
    || ! command -v zstd >/dev/null || ! command -v apt-ftparchive >/dev/null; then
    scripts/incus-setup.sh packages
  fi
  scripts/incus-setup.sh daemon
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust 1.95 with rustup (https://rustup.rs)" >&2; exit 1; }
