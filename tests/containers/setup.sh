#!/usr/bin/env bash
# What the container tests (tests/containers) need, made once: a container engine, the base images the Dockerfile and
# docker-compose.yml name, and podman-compose. Idempotent: a second run checks and returns in seconds.
#   tests/containers/setup.sh
#
# - Engine: Docker when a Docker engine answers; else Debian's podman (4.3) with runc, netavark and aardvark-dns,
#   run as root with the project's own containers.conf (.containers/containers.conf, passed as CONTAINERS_CONF;
#   no file under /etc is written): runtime runc (crun refuses a hybrid cgroup layout) and default ulimits at this
#   machine's hard limits (podman's 1048576 fails without CAP_SYS_RESOURCE).
# - Base images: pulled from their registry when one answers. Where none does, stand-ins built from Debian's own
#   packages with mmdebstrap and tagged with the names the project asks for:
#     python:3.11-slim-bookworm   bookworm minbase + python3, python3-venv, ca-certificates (Debian's Python is 3.11)
#     haproxy:2.6                 bookworm minbase + haproxy (Debian's is 2.6), run as the official image runs it
#     localhost/capsnet-test/no-python:bookworm
#                                 bookworm minbase + ca-certificates, no python3: the GPU build path's base, which
#                                 like nvidia/cuda has no Python (the Dockerfile's python-base stage installs it)
#   Each stand-in carries this machine's extra CA certificates (/usr/local/share/ca-certificates), without which
#   pip and apt inside a build cannot reach their indexes through this network's proxy.
# - podman-compose 1.6 from PyPI in .containers/venv (Debian's 1.0.3 mangles healthchecks and ignores profiles).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=.containers
mkdir -p "$WORK"
SUITE=bookworm
MIRROR="http://deb.debian.org/debian"
COMPOSE_PIN="podman-compose==1.6.*"

if docker info >/dev/null 2>&1; then
  echo "Docker engine answers: the tests use docker and docker compose"
  exit 0
fi

need=()
for cmd in podman runc mmdebstrap; do command -v "$cmd" >/dev/null || need+=("$cmd"); done
[ -x /usr/lib/podman/netavark ] || need+=(netavark)
[ -x /usr/lib/podman/aardvark-dns ] || need+=(aardvark-dns)
command -v iptables >/dev/null || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc netavark aardvark-dns iptables \
    mmdebstrap uidmap slirp4netns fuse-overlayfs >/dev/null
fi

nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
cat > "$WORK/containers.conf.new" <<EOF
# written by tests/containers/setup.sh; passed to podman as CONTAINERS_CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
EOF
mv "$WORK/containers.conf.new" "$WORK/containers.conf"
export CONTAINERS_CONF="$PWD/$WORK/containers.conf"

if ! [ -x "$WORK/venv/bin/podman-compose" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check "$COMPOSE_PIN" 2>&1 | { grep -v "^WARNING: Location" || true; }
fi

# standin NAME INCLUDE CHANGES...: pull NAME, else build it from Debian packages (once: an existing image is kept)
standin() {
  local name=$1 include=$2
  shift 2
  if podman image exists "$name"; then return 0; fi
  if timeout 60 podman pull -q "$name" >/dev/null 2>&1; then
    echo "pulled $name"
    return 0
  fi
  echo "no registry answers for $name: building a stand-in from Debian's packages"
  local tar="$WORK/rootfs-${name//[:\/]/_}.tar"
  local certs=()
  for crt in /usr/local/share/ca-certificates/*.crt; do
    [ -e "$crt" ] && certs+=(--customize-hook="copy-in $crt /usr/local/share/ca-certificates/")
  done
  mmdebstrap --quiet --variant=minbase --include="$include" \
    --customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"' \
    "${certs[@]}" \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    --customize-hook='rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*' \
    "$SUITE" "$tar" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
    "deb http://deb.debian.org/debian-security $SUITE-security main"
  local changes=(--change "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" --change "ENV=LANG=C.UTF-8")
  for c in "$@"; do changes+=(--change "$c"); done
  podman import -q "${changes[@]}" "$tar" "$name" >/dev/null
  rm -f "$tar"
}

standin docker.io/library/python:3.11-slim-bookworm python3,python3-venv,ca-certificates 'CMD ["python3"]'
standin docker.io/library/haproxy:2.6 haproxy,ca-certificates \
  'CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]' 'USER haproxy' 'STOPSIGNAL SIGUSR1' 'WORKDIR /var/lib/haproxy'
standin localhost/capsnet-test/no-python:$SUITE ca-certificates 'CMD ["bash"]'
echo "containers ready: $(podman --version), $("$WORK/venv/bin/podman-compose" --version 2>/dev/null | head -1)"
