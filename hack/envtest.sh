#!/usr/bin/env bash
# Builds the local control plane from source into bin/k8s/ and prints the directory to use
# as KUBEBUILDER_ASSETS: kube-apiserver, etcd and kubectl for every suite, and
# kube-scheduler and kube-controller-manager for the end-to-end suite (test/e2e) and
# `make demo`. The envtest download site is unreachable from our build machines, so the
# binaries come from the Go module proxy: k8s.io/kubernetes v1.37.2 (hack/controlplane) and
# etcd v3.6.16 (hack/etcd).
#
# Skips whatever is already built; the Kubernetes commands still missing are built by one
# `go build`, so the packages they share compile once. If KUBEBUILDER_ASSETS already names
# a directory that holds all five binaries, that directory is used and nothing is built.
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
K8S_COMMANDS=(kube-apiserver kube-scheduler kube-controller-manager kubectl)

log() { printf 'envtest: %s\n' "$*" >&2; }

has_all() {
  local d=$1 name
  for name in etcd "${K8S_COMMANDS[@]}"; do
    [ -x "$d/$name" ] || return 1
  done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ "${KUBEBUILDER_ASSETS}" != "$root/bin/k8s" ]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of etcd ${K8S_COMMANDS[*]}; building our own"
fi

out="$root/bin/k8s"
mkdir -p "$out"

# Stamp the real version: an unstamped build reports v0.0.0, which kubectl's version skew
# check and the discovery client's version parsing both reject.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean"

build() { # module-dir ldflags name...: builds the named commands that are missing, in one go build
  local dir=$1 flags=$2 name pkg
  shift 2
  local missing=() pkgs=()
  for name in "$@"; do
    if [ -x "$out/$name" ]; then
      log "$name already built"
      continue
    fi
    missing+=("$name")
    pkg=$(pkg_of "$name")
    pkgs+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "building ${missing[*]} (first build only; kube-apiserver alone takes about 5 minutes on 2 cores)"
  local start=$SECONDS tmp="$out/.build"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # One package: name the file (etcd's package path ends in /v3). Several: go build names
  # each binary after its package directory, which is the command's name.
  local target="$tmp/"
  [ ${#pkgs[@]} -gt 1 ] || target="$tmp/${missing[0]}"
  (cd "$root/hack/$dir" && go build -trimpath -ldflags "$flags" -o "$target" "${pkgs[@]}")
  for name in "${missing[@]}"; do
    mv "$tmp/$name" "$out/$name"
  done
  rm -rf "$tmp"
  log "built ${missing[*]} in $((SECONDS - start))s"
}

pkg_of() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    *) echo "k8s.io/kubernetes/cmd/$1" ;;
  esac
}

build etcd "-s -w" etcd
build controlplane "$ldflags" "${K8S_COMMANDS[@]}"

log "control plane ${K8S_VERSION} (etcd ${ETCD_VERSION}) ready; export KUBEBUILDER_ASSETS=$out"
echo "$out"
