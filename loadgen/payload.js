'use strict'

const { once } = require('node:events')
const { InvalidArgumentError } = require('../core/errors')

/**
 * The payload file the wrk/wrk2 Lua scripts replay (wrk2-scripts/payload.lua).
 *
 *   # chopper-loadgen payload v1 seed=42 phases=3 requests=1260000
 *   # phase index=0 name=hot-a rate=3500 duration_ms=120000 requests=420000 path=/kv?key={key} content_type=application/octet-stream
 *   GET<TAB>key-3<TAB>0
 *   PUT<TAB>key-7<TAB>112
 *
 * One request per line: method, key, value size, tab-separated (keys cannot
 * contain control characters, see spec.js). `# phase` lines switch the path
 * template for the lines after them, so one file can hold every phase.
 */
const PAYLOAD_VERSION = 1
const CHUNK_CHARS = 64 * 1024

function headerLine (workload, phases) {
  const total = phases.reduce((n, i) => n + workload.phases[i].requests, 0)
  return `# chopper-loadgen payload v${PAYLOAD_VERSION} seed=${workload.seed} phases=${phases.length} requests=${total}`
}

function phaseLine (p) {
  return `# phase index=${p.index} name=${p.name.replace(/\s/g, '_')} rate=${p.rate} duration_ms=${Math.round(p.durationMs)} ` +
    `requests=${p.requests} path=${p.path} content_type=${p.contentType.replace(/\s/g, '')}`
}

/**
 * Lines of the payload file, lazily.
 * @param {import('./workload').Workload} workload
 * @param {{ phases?: number[] }} [options] which phases (default all, in order)
 * @returns {Generator<string>}
 */
function * payloadLines (workload, { phases } = {}) {
  const which = phases ?? workload.phases.map((p) => p.index)
  yield headerLine(workload, which)
  for (const i of which) {
    yield phaseLine(workload.phases[i])
    for (const r of workload.requests(i)) yield `${r.method}\t${r.key}\t${r.valueSize}`
  }
}

/**
 * Stream the payload to a writable, honouring backpressure.
 * @param {import('./workload').Workload} workload
 * @param {import('node:stream').Writable} stream
 * @param {{ phases?: number[] }} [options]
 * @returns {Promise<{ lines: number, requests: number }>}
 */
async function writePayload (workload, stream, options) {
  let chunk = ''
  let lines = 0
  let requests = 0
  for (const line of payloadLines(workload, options)) {
    chunk += line + '\n'
    lines++
    if (line[0] !== '#') requests++
    if (chunk.length >= CHUNK_CHARS) {
      if (!stream.write(chunk)) await once(stream, 'drain')
      chunk = ''
    }
  }
  if (chunk) stream.write(chunk)
  return { lines, requests }
}

/**
 * Parse a payload file (the inverse of payloadLines; used by tests and tools).
 * @param {string} text
 * @returns {{ header: object, phases: object[], requests: Array<{ phase: number, method: string, key: string, valueSize: number }> }}
 */
function parsePayload (text) {
  const lines = text.split('\n')
  if (!lines[0].startsWith('# chopper-loadgen payload v')) throw new InvalidArgumentError('payload: missing "# chopper-loadgen payload" header line')
  const header = fields(lines[0].slice(2))
  const phases = []
  const requests = []
  for (let n = 1; n < lines.length; n++) {
    const line = lines[n]
    if (line === '') continue
    if (line.startsWith('# phase ')) {
      const f = fields(line.slice(8))
      phases.push({ index: Number(f.index), name: f.name, rate: Number(f.rate), durationMs: Number(f.duration_ms), requests: Number(f.requests), path: f.path, contentType: f.content_type })
      continue
    }
    if (line[0] === '#') continue
    const [method, key, size] = line.split('\t')
    if (!method || key === undefined || !/^\d+$/.test(size)) throw new InvalidArgumentError(`payload line ${n + 1}: expected METHOD<TAB>KEY<TAB>VALUE_SIZE, got ${JSON.stringify(line.slice(0, 80))}`)
    requests.push({ phase: phases.length - 1, method, key, valueSize: Number(size) })
  }
  return { header, phases, requests }
}

function fields (s) {
  const out = {}
  for (const part of s.split(' ')) {
    const eq = part.indexOf('=')
    if (eq > 0) out[part.slice(0, eq)] = part.slice(eq + 1)
  }
  return out
}

module.exports = { PAYLOAD_VERSION, payloadLines, writePayload, parsePayload }
