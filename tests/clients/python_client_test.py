#!/usr/bin/python3
"""leasehold-apiserver with Python's official `kubernetes` client (Debian's
python3-kubernetes): create, patch, delete, list, and watch.Watch().stream()
seeing ADDED, MODIFIED and DELETED. Starts the server binary on an
ephemeral port; exits 77 (skipped) when the client is not installed.

usage: python_client_test.py PATH/TO/leasehold-apiserver
"""
import json
import subprocess
import sys
import threading
import time
import urllib.request

try:
    from kubernetes import client, watch
except ImportError:
    print("skipped: python3-kubernetes is not installed (scripts/setup installs it)")
    sys.exit(77)

NS = "py-ns"


def start_server(binary):
    proc = subprocess.Popen([binary, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    hello = json.loads(proc.stdout.readline())
    return proc, hello["port"], hello["control_port"]


def watches_opened(control_port):
    with urllib.request.urlopen("http://127.0.0.1:%d/_leasehold/stats" % control_port, timeout=5) as r:
        return json.load(r)["total"]["by_verb"].get("watch", 0)


def lease(name, holder):
    return client.V1Lease(metadata=client.V1ObjectMeta(name=name),
                          spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15))


def main():
    proc, port, control_port = start_server(sys.argv[1])
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        config = client.Configuration()
        config.host = "http://127.0.0.1:%d" % port
        api = client.CoordinationV1Api(client.ApiClient(config))

        seen = []

        def watcher():
            w = watch.Watch()
            for event in w.stream(api.list_namespaced_lease, NS, timeout_seconds=5,
                                  field_selector="metadata.name=py-lease"):
                seen.append((event["type"], event["object"].spec.holder_identity,
                             event["object"].metadata.resource_version))
                if event["type"] == "DELETED":
                    w.stop()

        t = threading.Thread(target=watcher)
        t.start()
        # Change the lease only once the server has the watch open.
        deadline = time.monotonic() + 5
        while watches_opened(control_port) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)

        created = api.create_namespaced_lease(NS, lease("py-lease", "a"))
        check(created.metadata.uid is not None and created.spec.holder_identity == "a", "create")
        patched = api.patch_namespaced_lease("py-lease", NS, {"spec": {"holderIdentity": "b"}})
        check(patched.spec.holder_identity == "b", "patch (strategic merge)")
        check(int(patched.metadata.resource_version) > int(created.metadata.resource_version),
              "patch bumps resourceVersion")
        listed = api.list_namespaced_lease(NS, label_selector="", field_selector="metadata.name=py-lease")
        check([l.metadata.name for l in listed.items] == ["py-lease"], "list with fieldSelector")
        status = api.delete_namespaced_lease("py-lease", NS)
        check(status.status == "Success", "delete")
        try:
            api.read_namespaced_lease("py-lease", NS)
            check(False, "read after delete is 404")
        except client.exceptions.ApiException as e:
            check(e.status == 404, "read after delete is 404")

        t.join(10)
        check(not t.is_alive(), "the watch ends")
        types = [s[0] for s in seen]
        check(types == ["ADDED", "MODIFIED", "DELETED"], "watch sees ADDED, MODIFIED, DELETED: %s" % seen)
        if len(seen) == 3:
            check(seen[0][1] == "a" and seen[1][1] == "b", "watch objects carry the holders")
            rvs = [int(s[2]) for s in seen]
            check(rvs == sorted(rvs) and rvs[0] == int(created.metadata.resource_version),
                  "watch resourceVersions in order: %s" % rvs)
    finally:
        proc.terminate()
        proc.wait(10)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
