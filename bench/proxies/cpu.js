'use strict'

const fs = require('node:fs')
const { execFileSync } = require('node:child_process')

let ticksPerSecond = null
function clockTicks () {
  if (ticksPerSecond === null) {
    try { ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100 } catch { ticksPerSecond = 100 }
  }
  return ticksPerSecond
}

/** pid, ppid and utime+stime (ticks) from one /proc/<pid>/stat line. */
function parseStat (text) {
  // The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { pid: Number(text.slice(0, text.indexOf(' '))), ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) }
}

/**
 * CPU time (ms, user + system) used so far by a process and all its living
 * descendants (nginx workers, cluster workers; threads count in their
 * process). Linux only: null where /proc is missing.
 * @param {number} rootPid
 * @returns {number | null}
 */
function treeCpuMs (rootPid) {
  let entries
  try { entries = fs.readdirSync('/proc') } catch { return null }
  const stats = []
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue
    try { stats.push(parseStat(fs.readFileSync(`/proc/${name}/stat`, 'utf8'))) } catch {} // exited meanwhile
  }
  const children = new Map()
  for (const s of stats) {
    if (!children.has(s.ppid)) children.set(s.ppid, [])
    children.get(s.ppid).push(s)
  }
  const root = stats.find((s) => s.pid === rootPid)
  if (!root) return null
  let ticks = 0
  const todo = [root]
  while (todo.length) {
    const s = todo.pop()
    ticks += s.ticks
    todo.push(...(children.get(s.pid) || []))
  }
  return (ticks * 1000) / clockTicks()
}

module.exports = { treeCpuMs, parseStat }
