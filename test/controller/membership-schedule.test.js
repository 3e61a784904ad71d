'use strict'

const { installMembership } = require('../../controller/membership')

/**
 * When membership batches go out (controller/membership.js
 * flushMembershipIfDue), on a stand-in for the controller's shared state and
 * jest's fake clock: each batch is recorded with its time; a test starts a
 * handoff by setting `c.target` and grants it as handoff.js's maybeGrant does.
 */
function stub (opts = {}) {
  const batches = []
  const c = {
    opts: { membershipBatchMs: 50, membershipBatchMaxMs: 500, membershipStormAt: 16, pristineRelayUpTo: 64, ...opts },
    active: true,
    target: null,
    pristine: true,
    generationFloor: 0,
    assignment: null,
    servers: new Map(),
    failureCounts: new Map(),
    frontends: new Map(),
    lastEntries: new Map(),
    leases: { now: () => Date.now(), delete () {} },
    pusher: { addTarget () {}, removeTarget () {}, history: new Map() },
    collector: { forget () {} },
    m: { batches: { inc () {} } },
    counts: { batches: 0 },
    log: { info () {}, warn () {}, error () {} },
    strategy: { initial: (members) => ({ servers: members, slices: [] }) },
    laid: null,
    layout: () => c.laid,
    serverMap: () => Object.fromEntries([...c.servers].map(([id, s]) => [id, { url: s.url }])),
    commit (a, reason) {
      c.laid = a
      batches.push({ at: Date.now(), reason, members: a ? Object.keys(a.servers).length : 0 })
    },
    changed () {},
    persist () {}
  }
  installMembership(c)
  const join = (id) => c.addServer(id, `http://${id}`, `http://${id}/control`, 0)
  const grant = () => { c.target = null; c.flushMembershipIfDue() }
  return { c, batches, join, grant }
}

describe('when membership batches go out', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }))
  afterEach(() => jest.useRealTimers())

  test('a lone join after a quiet spell goes out at once', () => {
    const { batches, join } = stub()
    join('a')
    expect(batches).toHaveLength(1)
    expect(batches[0].reason).toBe('membership +1 -0 (+a)')
  })

  test('joins trickling in below the storm rate go out once a window, each within it', () => {
    const { batches, join } = stub()
    const t0 = Date.now()
    for (let i = 0; i < 50; i++) { // one every 40 ms: 12 a window, under membershipStormAt
      join(`s${i}`)
      jest.advanceTimersByTime(40)
    }
    jest.advanceTimersByTime(500)
    // 2 s of joins: the first at once, then one batch a window.
    expect(batches.map((b) => b.at - t0)).toEqual([0, 500, 1000, 1500, 2000])
    expect(batches.at(-1).members).toBe(50)
  })

  test('a leave waits only membershipBatchMs after the last batch', () => {
    const { c, batches, join } = stub()
    join('a')
    join('b') // waits for the window
    jest.advanceTimersByTime(500)
    expect(batches).toHaveLength(2)
    c.pristine = false
    c.strategy.removeServer = (a, id) => ({ ...a, servers: Object.fromEntries(Object.entries(a.servers).filter(([k]) => k !== id)) })
    c.inputsFor = () => ({})
    c.effectiveStrategyOptions = {}
    const t = Date.now()
    c.removeServer('b', 'lease-lapsed')
    expect(batches).toHaveLength(2)
    jest.advanceTimersByTime(50)
    expect(batches).toHaveLength(3)
    expect(batches[2].at - t).toBe(50)
    expect(batches[2].reason).toBe('membership +0 -1 (lease-lapsed b)')
  })

  test('changes wait for a handoff in progress and go out at its grant, not at the end of their patience', () => {
    const { c, batches, join, grant } = stub({ membershipStormAt: 4 })
    join('a')
    c.target = {} // the first batch's handoff is in progress
    const t = Date.now()
    for (const id of ['b', 'c', 'd', 'e']) join(id) // a storm: patience is four windows
    jest.advanceTimersByTime(700)
    expect(batches).toHaveLength(1)
    grant()
    expect(batches).toHaveLength(2)
    expect(batches[1].at - t).toBe(700)
    expect(batches[1].members).toBe(5)
  })

  test('after the grant, changes still wait out the window since the last batch', () => {
    const { c, batches, join, grant } = stub({ membershipStormAt: 2 }) // a storm from the second change
    join('a')
    c.target = {}
    for (const id of ['b', 'c', 'd', 'e']) join(id)
    jest.advanceTimersByTime(100)
    grant()
    expect(batches).toHaveLength(1)
    jest.advanceTimersByTime(399)
    expect(batches).toHaveLength(1)
    jest.advanceTimersByTime(1)
    expect(batches).toHaveLength(2)
  })

  test('a handoff not granted within the patience is superseded: one window, four in a storm', () => {
    const calm = stub()
    calm.join('a')
    calm.c.target = {}
    calm.join('b')
    jest.advanceTimersByTime(499)
    expect(calm.batches).toHaveLength(1)
    jest.advanceTimersByTime(1)
    expect(calm.batches).toHaveLength(2)

    const storm = stub({ membershipStormAt: 4 })
    storm.join('a')
    storm.c.target = {}
    for (const id of ['b', 'c', 'd', 'e']) storm.join(id)
    jest.advanceTimersByTime(1999)
    expect(storm.batches).toHaveLength(1)
    jest.advanceTimersByTime(1)
    expect(storm.batches).toHaveLength(2)
  })

  test('a leave and a rejoin at the same URLs before the batch cancel out', () => {
    const { c, batches, join } = stub()
    join('a')
    join('b')
    jest.advanceTimersByTime(500)
    c.pristine = false
    c.removeServer('b', 'lease-lapsed')
    join('b')
    jest.advanceTimersByTime(1000)
    expect(batches).toHaveLength(2)
  })
})
