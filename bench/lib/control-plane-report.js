'use strict'

/**
 * bench/control-plane.js's outputs: control-plane.json (everything),
 * control-plane.md (a summary table, a table per N, the real-member row) and
 * control-plane.svg (join time and controller CPU against N, log x axis;
 * written by hand, no dependency).
 */
const fs = require('node:fs')
const path = require('node:path')
const { markdownTable, writeResults } = require('./report')

const sec = (ms) => (Number.isFinite(ms) ? (ms / 1000).toFixed(2) : 'n/a')
const num = (x, d = 1) => (Number.isFinite(x) ? (Number.isInteger(x) ? x.toLocaleString('en-US') : x.toFixed(d)) : 'n/a')
const joined = (j) => (!j ? 'n/a' : j.converged ? sec(j.ms) : `> ${sec(j.ms)} (not converged)`)

/** The figures of one size that the summary and the plot use. */
function headline (r) {
  const m = r.main || {}
  const st = m.steady || {}
  return {
    n: r.n,
    joinAtOnceMs: m.joinAtOnce && m.joinAtOnce.converged ? m.joinAtOnce.ms : null,
    joinAtOnce: joined(m.joinAtOnce),
    batch: r.batch && r.batch.batch ? `${joined(r.batch.batch)} (${r.batch.joined} on ${r.batch.settled})` : (r.batch && r.batch.skipped) || 'n/a',
    rate: m.joinRate ? `${joined(m.joinRate)} (${m.joinRate.joined} at ${m.joinRate.ratePerSec}/s; ${sec(m.joinRate.afterLastJoinMs)} after the last)` : 'n/a',
    cpuPct: st.controllerCpuPct ?? null,
    loopP99: st.controllerEventLoopMs ? st.controllerEventLoopMs.p99 : null,
    renewalP99: st.renewalLatencyMs ? st.renewalLatencyMs.p99 : null,
    renewalsPerSecond: st.renewalsPerSecond ?? null,
    lapses: r.lapses,
    kill: m.kill ? `${sec(m.kill.dropMs)} / ${m.kill.converged ? sec(m.kill.ackedMs) : 'not acked'} (${m.kill.killed} killed)` : 'n/a',
    movePerMember: m.move ? m.move.perMember.pushBytes : null,
    movePerFrontend: m.move ? m.move.perFrontend.pushBytes : null
  }
}

function sizeTable (r) {
  const m = r.main || {}
  const rows = []
  const add = (what, value) => rows.push([what, value])
  const lastSeen = (j) => {
    if (j && !j.converged && j.controller) add('  last seen', `controller ${JSON.stringify(j.controller)}; members registered / holding its generation ${j.held ? `${j.held.serversRegistered} / ${j.held.serversHolding}` : 'n/a'}`)
  }
  if (m.joinAtOnce) {
    add('join at once: acknowledged (s)', joined(m.joinAtOnce))
    lastSeen(m.joinAtOnce)
  }
  if (m.joinTraffic) {
    const t = m.joinTraffic
    add('join: pushes sent / bytes (controller stats)', `${num(t.controller.pushMessages)} / ${num(t.controller.pushBytes)}`)
    add('join: pushes received / bytes (members)', `${num(t.members.pushMessages)} / ${num(t.members.pushBytes)}`)
    add('join: registrations / renewals sent (members)', `${num(t.members.registrations)} / ${num(t.members.renewals)}`)
    add('join: failed calls to the controller', errorList(t.members.errors))
  }
  if (r.batch && r.batch.first) {
    add(`burst: first ${r.batch.settled} join at once (s)`, joined(r.batch.first))
    lastSeen(r.batch.first)
  }
  if (r.batch && r.batch.batch) {
    add(`burst: ${r.batch.joined} join at once on ${r.batch.settled} settled (s)`, joined(r.batch.batch))
    lastSeen(r.batch.batch)
  }
  if (m.joinRate) {
    add(`rate: ${m.joinRate.joined} join at ${m.joinRate.ratePerSec}/s on the survivors: first join to acked / after the last (s)`, `${joined(m.joinRate)} / ${sec(m.joinRate.afterLastJoinMs)}`)
    lastSeen(m.joinRate)
  }
  const st = m.steady
  if (st) {
    add(`${m.joinAtOnce && !m.joinAtOnce.converged ? 'after the join deadline, not converged' : 'steady'} (${sec(st.ms)} s): controller CPU (% of a core)`, num(st.controllerCpuPct))
    add('steady: controller event-loop p50 / p99 / max (ms)', `${num(st.controllerEventLoopMs.p50)} / ${num(st.controllerEventLoopMs.p99)} / ${num(st.controllerEventLoopMs.max)}`)
    add('steady: controller RSS (MB)', num(st.controllerRssMB))
    add('steady: renewals/s; latency p50 / p99 / max (ms, members)', `${num(st.renewalsPerSecond)}; ${num(st.renewalLatencyMs.p50)} / ${num(st.renewalLatencyMs.p99)} / ${num(st.renewalLatencyMs.max)}`)
    add('steady: renewal failures / 404s / local lapses', `${num(st.lapses.renewalFailures)} / ${num(st.lapses.notFound)} / ${num(st.lapses.localLapses)}`)
    add('steady: failed calls to the controller', errorList(st.traffic.members.errors))
    add('steady: bytes received by the controller (renewal bodies) / sent (answers), per s', `${num(st.traffic.members.renewalBytesOut / st.traffic.seconds, 0)} / ${num(st.traffic.members.renewalBytesIn / st.traffic.seconds, 0)}`)
    add('steady: pushes/s; generations issued', `${num(st.pushesPerSecond)}; ${num(st.generations)}`)
    add('steady: fake processes CPU % (event-loop p99 ms)', st.fakeProcesses.map((p) => `${num(p.cpuPct)} (${num(p.eventLoopP99Ms)})`).join(', '))
  }
  if (m.move) {
    add('one-slice move: acknowledged by all (s); generations', `${joined(m.move)}; ${m.move.generations}`)
    add('one-slice move: push bytes per member / per front end', `${num(m.move.perMember.pushBytes)} / ${num(m.move.perFrontend.pushBytes)}`)
    add('one-slice move: pushes per member / per front end', `${num(m.move.perMember.pushes)} / ${num(m.move.perFrontend.pushes)}`)
  }
  if (m.kill) {
    add(`SIGKILL of ${m.kill.killed} members: dropped (s)`, sec(m.kill.dropMs))
    add('SIGKILL: survivors and front ends acknowledged (s)', m.kill.converged ? sec(m.kill.ackedMs) : 'not acknowledged')
  }
  add('lapses (lease expiries + evictions + 404s of live members)', num(r.lapses))
  if (m.skipped) add('skipped', m.skipped)
  return markdownTable(['N = ' + r.n.toLocaleString('en-US'), 'value'], rows, 'lr')
}

function errorList (errors) {
  if (!errors) return 'n/a' // a report from before the bench counted them
  const e = Object.entries(errors)
  return e.length ? e.map(([k, n]) => `${k}: ${num(n)}`).join(', ') : 'none'
}

function markdown (report) {
  const env = report.environment
  const out = [
    '# Control plane at scale',
    '',
    `\`${report.command}\`, ${env.date}, ${env.cpus} x ${env.cpuModel}, Node ${env.node}, ${env.platform}; controller and appserver-lib at ${report.commit || 'an unknown commit'}; load average at the start ${(env.loadavg || []).join(' ')} (the fake members share the machine: their own CPU and event-loop delay are in each table).`,
    '',
    'The real controller in its own process against protocol-level fake members (several per process, each its own control port, signed calls, pushes not verified) and fake front ends. "Acknowledged": every member registered and holding a slice, no handoff in progress, every front end holding the controller\'s current generation and every member the last generation that changed its slices (what its lease asks; the controller counts none lagging). Controller figures from its ' + statsSources(report) + '.',
    '',
    markdownTable(
      ['N', 'join at once (s)', 'burst on settled (s)', 'rate join (s)', 'ctl CPU %', 'ctl loop p99 (ms)', 'renewal p99 (ms)', 'renewals/s', 'lapses', 'kill: dropped / acked (s)', 'move B/member', 'move B/front end'],
      report.sizes.map(headline).map((h) => [num(h.n), h.joinAtOnce, h.batch, h.rate, num(h.cpuPct), num(h.loopP99), num(h.renewalP99), num(h.renewalsPerSecond), num(h.lapses), h.kill, num(h.movePerMember, 0), num(h.movePerFrontend, 0)])
    ),
    ''
  ]
  for (const r of report.sizes) out.push(sizeTable(r), '')
  if (report.real) {
    const r = report.real
    out.push(markdownTable(['real appserver-lib members', 'value'], [
      ['members / processes', `${r.count} / ${r.procs}`],
      ['all registered and acknowledged (s)', joined(r)],
      ['lapses: lease expiries / evictions / 404s; renewal failures', `${num(r.lapses.leaseExpiries)} / ${num(r.lapses.evictions)} / ${num(r.lapses.notFound)}; ${num(r.lapses.renewalFailures)}`],
      ['steady controller CPU % / loop p99 (ms)', r.steady ? `${num(r.steady.controllerCpuPct)} / ${num(r.steady.controllerEventLoopMs.p99)}` : 'n/a']
    ], 'lr'), '')
  }
  return out.join('\n')
}

function statsSources (report) {
  const s = new Set(report.sizes.map((r) => r.main && r.main.steady && r.main.steady.statsSource).filter(Boolean))
  if (s.size === 0) return 'stats'
  return [...s].map((x) => (x === 'stats' ? '`stats()`' : '`status()` (no `stats()` yet: push bytes, renewals and registrations unknown to it)')).join(' and ')
}

/** Join time (s, left axis) and controller CPU (%, right axis) against N (log x). */
function svg (report) {
  const W = 640
  const H = 340
  const L = 60
  const R = 60
  const T = 30
  const B = 50
  const pts = report.sizes.map(headline)
  const ns = pts.map((p) => p.n)
  const lx0 = Math.log10(Math.min(...ns)) - 0.15
  const lx1 = Math.log10(Math.max(...ns)) + 0.15
  const x = (n) => L + ((Math.log10(n) - lx0) / (lx1 - lx0)) * (W - L - R)
  const joinMax = niceMax(Math.max(1, ...pts.map((p) => (p.joinAtOnceMs ?? 0) / 1000)))
  const cpuMax = niceMax(Math.max(10, ...pts.map((p) => p.cpuPct ?? 0)))
  const yj = (s) => H - B - (s / joinMax) * (H - T - B)
  const yc = (c) => H - B - (c / cpuMax) * (H - T - B)
  const e = []
  e.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`)
  e.push(`<rect width="${W}" height="${H}" fill="white"/>`)
  e.push(`<text x="${W / 2}" y="18" text-anchor="middle" font-size="14">Control plane: join time and controller CPU against N</text>`)
  e.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/>`)
  e.push(`<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#1f77b4"/>`)
  e.push(`<line x1="${W - R}" y1="${T}" x2="${W - R}" y2="${H - B}" stroke="#d62728"/>`)
  for (let d = Math.ceil(lx0); d <= Math.floor(lx1); d++) {
    for (const m of [1, 2, 5]) {
      const n = m * 10 ** d
      if (Math.log10(n) < lx0 || Math.log10(n) > lx1) continue
      e.push(`<line x1="${x(n)}" y1="${H - B}" x2="${x(n)}" y2="${H - B + 4}" stroke="black"/><text x="${x(n)}" y="${H - B + 17}" text-anchor="middle">${n.toLocaleString('en-US')}</text>`)
    }
  }
  for (let i = 0; i <= 4; i++) {
    e.push(`<text x="${L - 6}" y="${yj((joinMax * i) / 4) + 4}" text-anchor="end" fill="#1f77b4">${fmtTick((joinMax * i) / 4)}</text>`)
    e.push(`<text x="${W - R + 6}" y="${yc((cpuMax * i) / 4) + 4}" fill="#d62728">${fmtTick((cpuMax * i) / 4)}</text>`)
  }
  e.push(`<text x="${W / 2}" y="${H - 12}" text-anchor="middle">members N (log scale)</text>`)
  e.push(`<text transform="translate(16 ${(H - B + T) / 2}) rotate(-90)" text-anchor="middle" fill="#1f77b4">join at once, acknowledged (s)</text>`)
  e.push(`<text transform="translate(${W - 14} ${(H - B + T) / 2}) rotate(90)" text-anchor="middle" fill="#d62728">controller CPU, steady (% of a core)</text>`)
  e.push(series(pts.filter((p) => p.joinAtOnceMs !== null).map((p) => [x(p.n), yj(p.joinAtOnceMs / 1000)]), '#1f77b4'))
  e.push(series(pts.filter((p) => p.cpuPct !== null).map((p) => [x(p.n), yc(p.cpuPct)]), '#d62728'))
  // kept inside the axes: a label at either end would run over them
  for (const p of pts.filter((q) => q.joinAtOnceMs === null)) e.push(`<text x="${Math.min(W - R - 50, Math.max(L + 50, x(p.n)))}" y="${T + 12}" text-anchor="middle" fill="#1f77b4">join: no convergence</text>`)
  e.push('</svg>')
  return e.join('\n') + '\n'
}

function series (points, color) {
  if (points.length === 0) return ''
  const line = points.length > 1 ? `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ')}"/>` : ''
  return line + points.map(([a, b]) => `<circle cx="${a.toFixed(1)}" cy="${b.toFixed(1)}" r="4" fill="${color}"/>`).join('')
}

function niceMax (v) {
  const p = 10 ** Math.floor(Math.log10(v))
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p
  return 10 * p
}

function fmtTick (v) {
  return Number.isInteger(v) ? String(v) : v.toFixed(1)
}

/** Write control-plane.{json,md,svg} into `outDir`; returns the paths. */
function writeControlPlaneResults (outDir, report) {
  const paths = writeResults(outDir, 'control-plane', report, markdown(report))
  const svgPath = path.join(outDir, 'control-plane.svg')
  fs.writeFileSync(svgPath, svg(report))
  return { ...paths, svgPath }
}

module.exports = { writeControlPlaneResults, markdown, svg, headline }
