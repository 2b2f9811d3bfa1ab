#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing, the demo and the
# benchmarks need. Idempotent: packages already present are left alone, and
# apt is not touched at all when nothing is missing.
set -euo pipefail

PKGS=(
    build-essential pkg-config make
    libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
    libevent-dev libjansson-dev
    libturbojpeg0-dev libjpeg62-turbo-dev libzstd-dev libpng-dev
    check
    clang libclang-rt-14-dev
    iproute2 openssl procps psmisc curl
    python3 python3-numpy python3-torch python3-torchvision python3-pil
    python3-prometheus-client
    gnuplot-nox
    chromium systemd groff-base
)

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PKGS[@]} packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
