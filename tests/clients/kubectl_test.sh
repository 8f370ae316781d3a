#!/usr/bin/env bash
# leasehold-apiserver with kubectl, as a new user would drive it: create -f
# (with validation), apply twice and unchanged, patch merge|json|strategic,
# label, annotate, get with the HOLDER column, get -w seeing a change, delete.
# Starts the server binary on an ephemeral port with a generated kubeconfig.
# Exit 77 (skipped) when kubectl is not on PATH.
#
# usage: kubectl_test.sh PATH/TO/leasehold-apiserver
set -uo pipefail
binary=$1
if ! command -v kubectl >/dev/null 2>&1; then
  echo "skipped: kubectl is not on PATH"
  exit 77
fi

dir=$(mktemp -d)
server_pid=
watch_pids=()
cleanup() {
  ((${#watch_pids[@]})) && kill "${watch_pids[@]}" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

"$binary" --port 0 >"$dir/hello" 2>"$dir/server.log" &
server_pid=$!
for _ in $(seq 100); do
  [ -s "$dir/hello" ] && break
  sleep 0.05
done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/hello")
if [ -z "$port" ]; then
  echo "FAIL: the server did not start: $(cat "$dir/hello" "$dir/server.log")"
  exit 1
fi

cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: leasehold
  cluster:
    server: http://127.0.0.1:$port
contexts:
- name: leasehold
  context: {cluster: leasehold, namespace: kt}
current-context: leasehold
users: []
KUBECONFIG

kc() { HOME=$dir KUBECONFIG=$dir/kubeconfig timeout 20 kubectl --cache-dir "$dir/cache" "$@" 2>&1; }

failures=0
# check NAME EXPECTED-SUBSTRING OUTPUT
check() {
  if [[ "$3" == *"$2"* ]]; then
    echo "ok   $1"
  else
    echo "FAIL $1: expected \"$2\" in:"
    echo "$3" | sed 's/^/     /'
    failures=$((failures + 1))
  fi
}
holder() { kc get lease demo -o jsonpath='{.spec.holderIdentity}'; }

lease_yaml() {
  cat >"$dir/lease.yaml" <<YAML
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: demo
  namespace: kt
spec:
  holderIdentity: $1
  leaseDurationSeconds: 15
YAML
}

lease_yaml first
check "create -f with validation" "lease.coordination.k8s.io/demo created" "$(kc create -f "$dir/lease.yaml")"
check "create -f again: AlreadyExists" "AlreadyExists" "$(kc create -f "$dir/lease.yaml")"
lease_yaml applied
check "apply on a created lease" "configured" "$(kc apply -f "$dir/lease.yaml")"
check "apply changed the holder" "applied" "$(holder)"
check "apply kept the last-applied annotation" "holderIdentity" \
  "$(kc get lease demo -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')"
lease_yaml applied-2
check "apply a change" "configured" "$(kc apply -f "$dir/lease.yaml")"
check "apply unchanged" "unchanged" "$(kc apply -f "$dir/lease.yaml")"
check "apply the change landed" "applied-2" "$(holder)"

check "patch --type merge" "patched" "$(kc patch lease demo --type merge -p '{"spec":{"holderIdentity":"merge"}}')"
check "merge patch landed" "merge" "$(holder)"
check "patch --type json" "patched" \
  "$(kc patch lease demo --type json -p '[{"op":"replace","path":"/spec/holderIdentity","value":"json"}]')"
check "json patch landed" "json" "$(holder)"
check "patch --type strategic" "patched" "$(kc patch lease demo --type strategic -p '{"spec":{"holderIdentity":"holder-s"}}')"
check "strategic patch landed" "holder-s" "$(holder)"
check "label" "labeled" "$(kc label lease demo team=blue)"
check "label landed (selector)" "demo" "$(kc get leases -l team=blue -o name)"
check "annotate" "annotated" "$(kc annotate lease demo note=hello)"
check "annotate landed" "hello" "$(kc get lease demo -o jsonpath='{.metadata.annotations.note}')"

lease_yaml fresh
sed -i 's/name: demo/name: fresh/' "$dir/lease.yaml"
check "apply creates a new lease" "lease.coordination.k8s.io/fresh created" "$(kc apply -f "$dir/lease.yaml")"
check "apply again unchanged" "unchanged" "$(kc apply -f "$dir/lease.yaml")"
check "delete -f" "deleted" "$(kc delete -f "$dir/lease.yaml")"

table=$(kc get leases)
check "get: columns" "NAME   HOLDER     AGE" "$table"
check "get: the row" "demo   holder-s" "$table"
check "get -A: namespace column" "NAMESPACE" "$(kc get leases -A)"

# get -w on one lease and on every namespace, both seeing one change.
watch_pids=()
for args in "lease demo -w" "leases -A -w"; do
  out=$dir/watch-${args// /_}.out
  # shellcheck disable=SC2086
  HOME=$dir KUBECONFIG=$dir/kubeconfig timeout 20 kubectl --cache-dir "$dir/cache" \
    get $args >"$out" 2>&1 &
  watch_pids+=($!)
done
wait_for() {   # wait_for TEXT FILE...: until every file contains TEXT (10 s at most)
  local text=$1 f
  shift
  for _ in $(seq 200); do
    for f in "$@"; do
      grep -q "$text" "$f" 2>/dev/null || { sleep 0.05; continue 2; }
    done
    return
  done
}
watch_outs=("$dir/watch-lease_demo_-w.out" "$dir/watch-leases_-A_-w.out")
wait_for holder-s "${watch_outs[@]}"
kc patch lease demo --type merge -p '{"spec":{"holderIdentity":"watched"}}' >/dev/null
wait_for watched "${watch_outs[@]}"
kill "${watch_pids[@]}" 2>/dev/null
wait "${watch_pids[@]}" 2>/dev/null
check "get lease NAME -w sees the change" "demo   watched" "$(cat "$dir/watch-lease_demo_-w.out")"
check "get leases -A -w sees the change" "kt          demo   watched" "$(cat "$dir/watch-leases_-A_-w.out")"

check "delete" "deleted" "$(kc delete lease demo)"
check "get after delete: NotFound" "NotFound" "$(kc get lease demo)"

echo "$failures failed"
[ "$failures" -eq 0 ]
