#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, etcd, kubectl) from source into
# bin/k8s/ and prints the directory to use as KUBEBUILDER_ASSETS. The envtest download
# site is unreachable from our build machines, so the binaries come from the Go module
# proxy: k8s.io/kubernetes v1.37.2 (hack/controlplane) and etcd v3.6.16 (hack/etcd).
#
# Skips whatever is already built. If KUBEBUILDER_ASSETS already names a directory that
# holds all three binaries, that directory is used and nothing is built.
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16

log() { printf 'envtest: %s\n' "$*" >&2; }

has_all() {
  local d=$1
  [ -x "$d/kube-apiserver" ] && [ -x "$d/etcd" ] && [ -x "$d/kubectl" ]
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ "${KUBEBUILDER_ASSETS}" != "$root/bin/k8s" ]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver, etcd or kubectl; building our own"
fi

out="$root/bin/k8s"
mkdir -p "$out"

# Stamp the real version: an unstamped build reports v0.0.0, which kubectl's version skew
# check and the discovery client's version parsing both reject.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean"

build() { # name module-dir package [ldflags]
  local name=$1 dir=$2 pkg=$3 flags=${4:-"-s -w"}
  if [ -x "$out/$name" ]; then
    log "$name already built"
    return
  fi
  log "building $name from $pkg (first build only; kube-apiserver takes about 5 minutes on 2 cores)"
  local start=$SECONDS
  (cd "$root/hack/$dir" && go build -trimpath -ldflags "$flags" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  log "built $name in $((SECONDS - start))s"
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver controlplane k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kubectl controlplane k8s.io/kubernetes/cmd/kubectl "$ldflags"

log "control plane ${K8S_VERSION} (etcd ${ETCD_VERSION}) ready; export KUBEBUILDER_ASSETS=$out"
echo "$out"
