#!/bin/sh
# A leader-only job for the exec module that checks its fence before every
# side effect. Config:
#   {"type": "exec", "name": "job",
#    "settings": {"command": ["/path/to/examples/fenced-job.sh", "/var/lib/job/out"]}}
#
# The keeper SIGKILLs this job when the fence deadline passes, however stuck
# the agent is. What no process can stop is a *frozen node* (agent, keeper and
# job paused together, then resumed late): only the check below, made right
# before the side effect, keeps the job from acting on a lease it lost.
# --margin-ms leaves room for the side effect itself to finish inside the fence.
#
# HTTP workloads do the same in-process: read $LEASEHOLD_FENCE_FILE (one JSON
# line) and act only while clock_gettime(CLOCK_MONOTONIC) <
# valid_until_mono_ns - margin; e.g. in Python:
#   f = json.load(open(os.environ["LEASEHOLD_FENCE_FILE"]))
#   ok = time.monotonic_ns() + 200_000_000 < f["valid_until_mono_ns"]
# and send LEASEHOLD_TERM with each write so the receiver can reject an older term.
set -u
out=${1:?usage: fenced-job.sh OUTPUT_FILE}
leasehold=${LEASEHOLD_BIN:-leasehold}
for i in $(seq 1 1000000); do
  if "$leasehold" fence check --quiet --margin-ms 200; then
    echo "term ${LEASEHOLD_TERM:-?} step $i $(date +%s.%N)" >> "$out"   # the side effect
  else
    echo "fence not valid: skipping step $i" >&2
  fi
  sleep 0.5
done
