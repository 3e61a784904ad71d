'use strict'

/**
 * Shared vocabulary of the history modules: operation kinds as small integers
 * (the search compares them in its inner loop) and value formatting for messages.
 */

const PUT = 0
const DELETE = 1
const GET = 2
const NULL_ID = 0 // value id of null: the initial, absent state of every key

/** A value as people read it in messages: quoted string, or not-found. */
function describeValue (v) {
  return v === null ? 'not-found' : JSON.stringify(v)
}

/** Milliseconds with at most three decimals. */
function formatMs (t) {
  return Number.isFinite(t) ? String(+t.toFixed(3)) : 'never'
}

/** Short description of any argument for validation errors. */
function show (v) {
  if (typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v)
  return Array.isArray(v) ? 'an array' : typeof v
}

module.exports = { PUT, DELETE, GET, NULL_ID, describeValue, formatMs, show }
