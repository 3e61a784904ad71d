// A counter service in TypeScript behind Chopper: POST /hits?key=K counts a
// hit for K on the server that owns K. It shows the typed API: options,
// ownership hooks, req.sliceKey / req.chopperGeneration, the ShardGuard
// without Express, and drain on SIGTERM. With CHOPPER_PROFILES_CONTROLLER_URL
// it also names the user, read from the profile service
// (examples/profile-service) through @chopper/client: straight to the
// profile server that owns the key, no front end in between.
import express from 'express'
import type { Request, Response } from 'express'
import {
  createAppServer,
  defaults,
  ShardGuard,
  type AppServerOptions,
  type Assignment,
  type ChopperError,
  type KeyFrom,
  type KeyRange,
  type OwnershipHook
} from '@chopper/appserver-lib'
import { createClient, type ChopperClient, type ClientOptions, type Lookup } from '@chopper/client'

interface Counter {
  sliceKey: number
  generation: number
  hits: number
}

const counters = new Map<string, Counter>()

// The key may come from a tenant header as well; the front end forwards
// X-Chopper-Key, so routing and admission agree.
const keyFrom: KeyFrom = (req) => {
  const q = req.query.key
  if (typeof q === 'string' && q.length > 0) return q
  const tenant = req.get('x-tenant')
  return tenant !== undefined && tenant.length > 0 ? tenant : defaults.keyFrom(req)
}

// The profile service's client, when its controller is known.
const profilesOptions: ClientOptions | null = process.env.CHOPPER_PROFILES_CONTROLLER_URL !== undefined
  ? { controllerUrl: process.env.CHOPPER_PROFILES_CONTROLLER_URL, readCredential: process.env.CHOPPER_PROFILES_READ_CREDENTIAL, holdMs: 1000 }
  : null
const profiles: ChopperClient | null = profilesOptions === null ? null : createClient(profilesOptions)

/** The user's profile name through the client (any URL host: the key routes), or null. */
async function nameOf (user: string): Promise<string | null> {
  if (profiles === null) return null
  const res = await profiles.request({ method: 'GET', path: `/profile?key=${encodeURIComponent(user)}` })
  if (res.statusCode !== 200) {
    await res.body.dump()
    return null
  }
  const body = await res.body.json() as { profile?: { name?: unknown } }
  return typeof body.profile?.name === 'string' ? body.profile.name : null
}

const app = express.Router()
app.post('/hits', async (req: Request, res: Response) => {
  const key = keyFrom(req) as string // admitted, so present
  // Both are set by the shard guard before the app runs.
  const sliceKey = req.sliceKey ?? 0
  const generation = req.chopperGeneration ?? 0
  const c = counters.get(key) ?? { sliceKey, generation, hits: 0 }
  c.hits++
  c.generation = Math.max(c.generation, generation)
  counters.set(key, c)
  res.json({ key, hits: c.hits, generation, name: await nameOf(key).catch(() => null) })
})

const onRelease: OwnershipHook = (ranges: KeyRange[], { generation }) => {
  for (const [key, c] of counters) {
    if (ranges.some((r) => c.sliceKey >= r.start && c.sliceKey < r.end)) counters.delete(key)
  }
  console.log(JSON.stringify({ msg: 'released', generation, ranges: ranges.length }))
}

const options: AppServerOptions = {
  id: process.env.CHOPPER_SERVER_ID ?? 'ts-counter-1',
  app,
  controllerUrl: process.env.CHOPPER_CONTROLLER_URL,
  port: Number(process.env.CHOPPER_APP_PORT ?? 0),
  controlPort: Number(process.env.CHOPPER_APP_CONTROL_PORT ?? 0),
  consistency: 'strict',
  holdMs: 1000,
  keyFrom,
  onAcquire: async (ranges, { assignment }) => {
    console.log(JSON.stringify({ msg: 'acquired', ranges: ranges.length, servers: Object.keys(assignment.servers) }))
  },
  onRelease,
  // every map installed, also one that moves only other servers' slices
  onAssignment: ({ generation, assignment }) => {
    console.log(JSON.stringify({ msg: 'assignment', generation, slices: assignment.slices.length }))
  }
}

/** Without Express: the framework-free guard decides and counts. */
function guardDemo (): void {
  const guard = new ShardGuard({ serverId: 'solo' })
  const whole: Assignment = { generation: 1, slices: [{ start: 0, end: 2 ** 32, servers: ['solo'] }], servers: { solo: { url: 'http://127.0.0.1:1' } } }
  const { changed, acquired } = guard.setAssignment(whole)
  const token = guard.begin()
  try {
    const slice: number = guard.admit('user-42')
    console.log(JSON.stringify({ changed, acquired, slice, generation: guard.generation }))
  } catch (err) {
    const e = err as ChopperError
    if (e.code !== 'CHOPPER_ERR_NOT_OWNER') throw err
  } finally {
    guard.end(token)
  }
  console.log(JSON.stringify(guard.report()))
}

async function main (): Promise<void> {
  guardDemo()
  if (profiles !== null) {
    // It routes once it has the map; until then names are null.
    const generation: number = await profiles.ready({ timeoutMs: 5000 }).catch(() => 0)
    if (generation > 0) {
      const where: Lookup = profiles.lookup('user-42')
      console.log(JSON.stringify({ msg: 'profiles map', generation, owner: where.servers[0]?.id }))
    }
  }
  const server = createAppServer(options)
  const { url, controlUrl } = await server.start()
  console.log(JSON.stringify({ msg: 'listening', url, controlUrl, generation: server.guard.generation }))
  process.once('SIGTERM', async () => {
    const { drained } = await server.drain()
    await server.close()
    if (profiles !== null) await profiles.close()
    console.log(JSON.stringify({ msg: 'stopped', drained }))
  })
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
