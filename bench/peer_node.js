#!/usr/bin/node
// The second peer: @codedependant/kubernetes-leader-election (a Lease, renewed
// by its leader, watched by every elector through @kubernetes/client-node),
// used as its README does, with a leader-only ticker, writing a
// leasehold-format journal for scripts/check-journal (as peer_elector.py does).
//
//   node peer_node.js --server URL --identity ID --journal FILE
//                     [--lease-name N] [--lease-s 2] [--renew-ms 300] [--tick-ms 100]
//
// The package is installed by bench/run into bench/.node (NODE_PATH). It talks
// to the API only when KUBERNETES_SERVICE_HOST is set (else it assumes
// leadership at once) and loads its client config with
// KubeConfig.loadFromDefault(): this script writes a kubeconfig for the
// plain-http server and points KUBECONFIG at it. Each request carries
// X-Leasehold-Identity (added to every http.request of the process) so the
// server's /_leasehold/stats count it per client; nothing else is changed.
//
// Journal: term_acquired + module_started on LEADERSHIP_ACQUIRED,
// module_stopped + term_lost on LEADERSHIP_LOST; on SIGTERM/SIGINT the work
// stops first, then elector.stop() (which releases the lease when leading),
// then the process exits. A kubeconfig with `insecure-skip-tls-verify: true`
// is needed: client-node refuses an http:// server otherwise.
'use strict'

const fs = require('node:fs')
const http = require('node:http')

function args(argv) {
  const out = {leaseName: 'peer-node-lock', leaseS: 2, renewMs: 300, tickMs: 100}
  const names = {'--server': 'server', '--identity': 'identity', '--journal': 'journal',
                 '--lease-name': 'leaseName', '--lease-s': 'leaseS', '--renew-ms': 'renewMs',
                 '--tick-ms': 'tickMs'}
  for (let i = 0; i < argv.length; i += 2) {
    const k = names[argv[i]]
    if (!k || i + 1 >= argv.length) {
      process.stderr.write(`peer_node.js: bad argument ${argv[i]}\n`)
      process.exit(2)
    }
    out[k] = ['leaseS', 'renewMs', 'tickMs'].includes(k) ? Number(argv[i + 1]) : argv[i + 1]
  }
  for (const k of ['server', 'identity', 'journal']) {
    if (!out[k]) {
      process.stderr.write(`peer_node.js: --${k} is required\n`)
      process.exit(2)
    }
  }
  return out
}

const a = args(process.argv.slice(2))

// Per-client request counting on the server: one header on every request.
const request = http.request
http.request = function(...rest) {
  const req = request.apply(this, rest)
  req.setHeader('X-Leasehold-Identity', a.identity)
  return req
}

const kubeconfig = a.journal + '.kubeconfig'
fs.writeFileSync(kubeconfig, JSON.stringify({
  apiVersion: 'v1', kind: 'Config', 'current-context': 'bench',
  // client-node refuses http:// unless TLS verification is off (config.js createAgent)
  clusters: [{name: 'bench', cluster: {server: a.server, 'insecure-skip-tls-verify': true}}],
  users: [{name: 'bench', user: {}}],
  contexts: [{name: 'bench', context: {cluster: 'bench', user: 'bench', namespace: 'default'}}],
}))
process.env.KUBECONFIG = kubeconfig
process.env.KUBERNETES_SERVICE_HOST = new URL(a.server).hostname

const {Elector, EVENTS} = require('@codedependant/kubernetes-leader-election')

const journal = fs.openSync(a.journal, 'a')
function log(event, extra = {}) {
  const line = {mono_ns: Number(process.hrtime.bigint()), wall: '', identity: a.identity,
                event, term: 0, ...extra}
  fs.writeSync(journal, JSON.stringify(line) + '\n')
}

let ticker = null
let ticks = 0
function startWork() {
  if (ticker) return
  log('term_acquired')
  log('module_started', {module: 'tick', leader_only: true})
  ticker = setInterval(() => {
    ticks += 1
    log('module_output', {module: 'tick', leader_only: true, detail: `tick ${ticks} term 0`})
  }, a.tickMs)
}
function stopWork(reason) {
  if (!ticker) return
  clearInterval(ticker)
  ticker = null
  log('module_stopped', {module: 'tick', leader_only: true, reason})
  log('term_lost', {reason})
}

// Errors and warnings to stderr (the agent's log file), nothing else.
const quiet = () => {}
const logger = {debug: quiet, trace: quiet, info: quiet,
                warn: (...x) => console.error('warn', ...x.map(String)),
                error: (...x) => console.error('error', ...x.map(String)),
                fatal: (...x) => console.error('fatal', ...x.map(String))}
logger.child = () => logger

const elector = new Elector({
  log: logger,
  lease_name: a.leaseName,
  auto_close: false,
  identity: a.identity,
  lease_duration_sec: a.leaseS,
  renew_interval_ms: a.renewMs,
  namespace: 'default',
})
elector.on(EVENTS.LEADERSHIP_ACQUIRED, () => startWork())
elector.on(EVENTS.LEADERSHIP_LOST, () => stopWork('leadership_lost'))

let stopping = false
async function onSignal(sig) {
  if (stopping) return
  stopping = true
  stopWork(`signal ${sig}`)
  try {
    await elector.stop()
  } finally {
    log('elector_stopped')
    process.exit(0)
  }
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)

// A service keeps running (the library's own retries are unref'd timers).
setInterval(() => {}, 1 << 30)
elector.start().catch((err) => log('elector_crashed', {reason: String(err).slice(0, 200)}))
