'use strict'

/**
 * Measure every entry `rounds` times, one entry after another in each
 * round, the order rotated each round so none always runs first or after
 * the same neighbour. Each result (or `{ error }`, the first line of what
 * `measure` threw) is pushed to `entry.rounds` with its 1-based `round`;
 * `line(entry, result)` says what to print for a measured one.
 * @param {{ label: string, rounds: object[] }[]} entries
 * @param {number} rounds
 * @param {{ measure: (entry) => Promise<object>, line: (entry, result) => string, log?: (text: string) => void }} how
 */
async function alternateRounds (entries, rounds, { measure, line, log = console.log }) {
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[(i + r) % entries.length]
      let m
      try {
        m = { round: r + 1, ...await measure(e) }
        log(`  round ${r + 1}  ${line(e, m)}`)
      } catch (err) {
        m = { round: r + 1, error: err.message.split('\n')[0] }
        log(`  round ${r + 1}  ${e.label}: failed: ${m.error}`)
      }
      e.rounds.push(m)
    }
  }
}

module.exports = { alternateRounds }
