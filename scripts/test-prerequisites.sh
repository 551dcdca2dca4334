#!/bin/sh
# Run by `npm test` before the tests: the cluster tests start real etcd members, the OIDC browser
# test drives a real Chromium and the documented examples use curl, jq and openssl, system programs
# npm cannot install. Where one is missing and this is a Debian machine we may install on (root, or
# sudo without a password), it is installed with apt-get; otherwise this says what is missing and
# how to get it, and stops.
# MESH_ETCD_BIN / MESH_ETCDCTL_BIN / MESH_CHROMIUM name programs installed elsewhere.
set -eu

have() { [ -n "$1" ] && command -v "$1" >/dev/null 2>&1; }

packages=""
have "${MESH_ETCD_BIN:-etcd}" || packages="$packages etcd-server"
have "${MESH_ETCDCTL_BIN:-etcdctl}" || packages="$packages etcd-client"
# test/doc-examples.test.ts runs the documented examples: curl, jq, openssl.
have jq || packages="$packages jq"
have curl || packages="$packages curl"
have openssl || packages="$packages openssl"
if ! have "${MESH_CHROMIUM:-}"; then
  have /usr/bin/chromium || have /usr/bin/chromium-browser || have /usr/bin/google-chrome || packages="$packages chromium"
fi
[ -z "$packages" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"
else sudo="none"
fi
if [ "$sudo" = none ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "npm test: the tests need programs that are not installed:$packages (Debian package names)." >&2
  echo "Install them (apt-get install$packages), or name installed ones with MESH_ETCD_BIN, MESH_ETCDCTL_BIN, MESH_CHROMIUM." >&2
  exit 1
fi
echo "npm test: installing$packages with apt-get (the cluster tests run real etcd members, the OIDC browser test a real Chromium, the doc examples curl, jq and openssl)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $packages >&2
