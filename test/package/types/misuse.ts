// Each line after a @ts-expect-error is a misuse the declarations must reject:
// `tsc` fails on an expected error that does not occur, so this file checks
// that the types are precise, not merely present.
import express from 'express'
import type { Request } from 'express'
import { createAppServer, defaultKeyFrom, ShardGuard, shardGuardMiddleware, setRequestCost, CONSISTENCY, type AppServer } from '@chopper/appserver-lib'

const app = express.Router()

// @ts-expect-error unknown consistency mode
createAppServer({ id: 'a', app, consistency: 'eventual' })
// @ts-expect-error id is required
createAppServer({ app })
// @ts-expect-error timings are numbers
createAppServer({ id: 'a', app, holdMs: '100' })
// @ts-expect-error keyFrom returns a string or undefined
createAppServer({ id: 'a', app, keyFrom: () => 42 })
// @ts-expect-error app must be a handler or an Express app
createAppServer({ id: 'a', app: 'router' })
// @ts-expect-error unknown option
createAppServer({ id: 'a', app, controlerUrl: 'http://127.0.0.1:7070' })
// @ts-expect-error unknown cost mode
createAppServer({ id: 'a', app, cost: 'gpu' })

declare const server: AppServer
// @ts-expect-error urls is null until start() resolved
console.log(server.urls.url)
// @ts-expect-error readonly
server.guard.generation = 3

// @ts-expect-error serverId is required
new ShardGuard({}) // eslint-disable-line no-new
const guard = new ShardGuard({ serverId: 's', holdMs: 0, now: () => 0 })
// @ts-expect-error admit takes the application key (a string)
guard.admit(42)
// @ts-expect-error admitSliceKey takes the 32-bit slice key
guard.admitSliceKey('k')
// @ts-expect-error an assignment needs slices and servers
guard.setAssignment({ generation: 1 })
// @ts-expect-error enforce is a boolean
shardGuardMiddleware(guard, { enforce: 'no' })
// @ts-expect-error CONSISTENCY is read-only
CONSISTENCY.push('strict')

declare const req: Request
// @ts-expect-error sliceKey is set only behind the shard guard: number | undefined
const s: number = req.sliceKey
// @ts-expect-error chopperGeneration is a number
const g: string | undefined = req.chopperGeneration
const k: string | undefined = defaultKeyFrom(req)
const admitted: number = guard.admit('user-1')
const verdict: Promise<number> = guard.admitOrHold(admitted, 2)
const drained: Promise<boolean> = guard.waitDrained(10)
// @ts-expect-error a cost is a number of ms
setRequestCost(req, '5')
// @ts-expect-error chopperReplicas is read-only
req.chopperReplicas?.push('x')
const token = guard.begin()
const replicas: readonly string[] = token.map.replicas[0]
guard.end(token, 0, 1.5)
setRequestCost(req, 2)
console.log(s, g, k, verdict, drained, replicas, guard.report({ instance: 'x', seq: 1 }).entries[0]?.cost)
