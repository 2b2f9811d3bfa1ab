#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing, the demo and the
# benchmarks need. Idempotent: packages already present are left alone, and
# apt is not touched at all when nothing is missing.
set -euo pipefail

PKGS=(
    build-essential pkg-config make
    libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
    libevent-dev libjansson-dev
    libturbojpeg0-dev libjpeg62-turbo-dev libzstd-dev libpng-dev libpcre2-dev libwebp-dev
    check
    clang libclang-rt-14-dev clang-format universal-ctags
    iproute2 openssl procps psmisc curl
    python3 python3-numpy python3-torch python3-torchvision python3-pil
    python3-venv patchelf debootstrap
    python3-prometheus-client
    python3-yaml
    gnuplot-nox
    chromium systemd groff-base
    nodejs
    prometheus
    libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg python3-av
    libcurl4-openssl-dev nginx-light
)

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

# The tokenizer's oracle (tests/integration/test_tokenizer_oracle.sh,
# scripts/bench-tokenizer, scripts/tokenizer-files): OpenAI's tiktoken compiled
# to WASM, from npm, pinned, in a fixed prefix; installed only when that
# version's package.json is not there yet.
ORACLE_PREFIX=/usr/local/lib/sluice-oracle
ORACLE_VERSION=1.0.22
install_oracle() {
    local pj="$ORACLE_PREFIX/node_modules/tiktoken/package.json"
    if [ -e "$pj" ] && grep -q "\"version\": \"$ORACLE_VERSION\"" "$pj"; then
        return 0
    fi
    echo "install-deps: installing tiktoken@$ORACLE_VERSION (npm) into $ORACLE_PREFIX"
    # NodeSource's nodejs bundles npm; Debian's packages it apart (and the two
    # conflict, so npm is not in PKGS): add Debian's only when there is none.
    if ! command -v npm >/dev/null 2>&1; then
        $SUDO apt-get update -q
        $SUDO apt-get install -y -q --no-install-recommends npm
    fi
    $SUDO mkdir -p "$ORACLE_PREFIX"
    $SUDO npm install --prefix "$ORACLE_PREFIX" --no-audit --no-fund --no-save \
        "tiktoken@$ORACLE_VERSION"
}

# The Kubernetes manifests' schema oracle (tests/integration/test_k8s_manifests.sh):
# kubernetes-models validates objects against the Kubernetes OpenAPI schemas.
# Pinned (4.5.1 runs on Debian 12's node 18; 5.x wants node 22), in a prefix of
# its own so that neither npm install prunes the other oracle.
K8S_ORACLE_PREFIX=/usr/local/lib/sluice-oracle-k8s
K8S_ORACLE_VERSION=4.5.1
install_k8s_oracle() {
    local pj="$K8S_ORACLE_PREFIX/node_modules/kubernetes-models/package.json"
    if [ -e "$pj" ] && grep -q "\"version\": \"$K8S_ORACLE_VERSION\"" "$pj"; then
        return 0
    fi
    echo "install-deps: installing kubernetes-models@$K8S_ORACLE_VERSION (npm) into $K8S_ORACLE_PREFIX"
    if ! command -v npm >/dev/null 2>&1; then
        $SUDO apt-get update -q
        $SUDO apt-get install -y -q --no-install-recommends npm
    fi
    $SUDO mkdir -p "$K8S_ORACLE_PREFIX"
    $SUDO npm install --prefix "$K8S_ORACLE_PREFIX" --no-audit --no-fund --no-save \
        "kubernetes-models@$K8S_ORACLE_VERSION"
}

# The S3 server the remote-source tests run (tests/integration/test_remote_sources.sh):
# moto's server verifies SigV4 signatures once IAM auth is on (s3rver from npm was
# tried first: it accepts any V4 signature, so it cannot show a wrong secret is
# refused). Not in Debian 12: pinned, from PyPI, in a venv of its own.
S3_ORACLE_PREFIX=/usr/local/lib/sluice-oracle-moto
S3_ORACLE_VERSION=5.2.1
install_s3_oracle() {
    local check="import moto.server, boto3, sys; sys.exit(moto.__version__ != '$S3_ORACLE_VERSION')"
    if [ -x "$S3_ORACLE_PREFIX/bin/python3" ] && "$S3_ORACLE_PREFIX/bin/python3" -c "$check" 2>/dev/null; then
        return 0
    fi
    # The version already on this host's python3 (the test looks there too).
    if command -v python3 >/dev/null && python3 -c "$check" 2>/dev/null; then
        return 0
    fi
    echo "install-deps: installing moto[server]==$S3_ORACLE_VERSION (PyPI) into $S3_ORACLE_PREFIX"
    # Only one test needs it: a host that cannot reach PyPI still builds and
    # runs the demo, and that test says what is missing.
    if ! { $SUDO python3 -m venv "$S3_ORACLE_PREFIX" &&
        $SUDO "$S3_ORACLE_PREFIX/bin/pip" install -q "moto[server]==$S3_ORACLE_VERSION"; }; then
        echo "install-deps: warning: moto[server] not installed (is PyPI reachable?):" \
            "tests/integration/test_remote_sources.sh will fail until it is" >&2
    fi
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PKGS[@]} packages present"
    install_oracle
    install_k8s_oracle
    install_s3_oracle
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# prometheus and nginx-light are test servers here (the tests start their own
# on loopback ports): their packages also start system services (ports 9090
# and 80) nothing uses. Stop and disable the ones this run installed; a
# service the host had before is left alone.
for svc in prometheus nginx; do
    pkg=$svc
    [ "$svc" = nginx ] && pkg=nginx-light
    if [[ " ${missing[*]} " == *" $pkg "* ]] && command -v systemctl >/dev/null &&
        systemctl is-enabled --quiet "$svc" 2>/dev/null; then
        echo "install-deps: disabling the $svc service its package started (tests run their own)"
        $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
    fi
done
install_oracle
install_k8s_oracle
install_s3_oracle
