// Type declarations for @chopper/client, written from client/*.js and the
// core/ modules it uses. The package is CommonJS; these describe its
// exports: createClient, ChopperClient, defaults and readCredential.

import type { Dispatcher } from 'undici'
import type { AxiosAdapter } from 'axios'
import type { Logger } from 'pino'

/** Replica choice for reads of a slice several servers admit (docs/replication.md). */
export type ReplicaChoice = 'p2c' | 'jsq' | 'lc' | 'lcstar' | 'random' | 'first'

/** What a request looks like to `sizeOf`: its target (path and query) and method. */
export interface SizedRequest {
  url: string
  method: string
}

export interface ClientOptions {
  /** The controller, or a leader and its standbys: one URL, a comma-separated list or an array. */
  controllerUrl?: string | string[]
  /** Members' control URLs (front ends', app servers'): their GET /v1/assignment is open. Tried after the controller. */
  members?: string | string[]
  /** With a cluster token: the read credential (`readCredential(token)`), for the controller's GET /v1/assignment. */
  readCredential?: string
  /** How often the map is read (a 304 when unchanged); 0: only when a request meets a 421 or a dead owner. Default 1000. */
  pollIntervalMs?: number
  /** One map read. Default 2000. */
  mapTimeoutMs?: number
  /** A request that meets a handoff, a 421 or a dead owner waits this long for a newer map, then fails. Default 3000. */
  holdMs?: number
  /** Keep-alive connections per app server. Default 64. */
  connections?: number
  upstreamTimeoutMs?: number
  /** Streamed bodies with a Content-Length up to this are read whole, so a 421 can replay them. Default 1 MiB. */
  bufferLimit?: number
  replicaChoice?: ReplicaChoice
  /** A request's estimated cost, for jsq and lcstar. */
  sizeOf?: (req: SizedRequest) => number
  /** Or: the size is this query parameter's value ... */
  replicaSizeParam?: string
  /** ... to this power. */
  replicaSizePower?: number
  lcstarThreshold?: number
  lcstarMaxDeferred?: number
  lcstarMaxWaitMs?: number
  /** Uniform in [0, 1), for p2c and random. */
  replicaRng?: () => number
  serverReportTtlMs?: number
  serverReportDecay?: boolean
  /** pino; silent by default. */
  logger?: Logger
}

/** One server of a lookup. */
export interface ServerRef {
  id: string
  /** Its data URL, e.g. http://10.0.0.7:9100 */
  url: string
}

export interface Lookup {
  key: string
  /** fingerprint32 of the key: its place in the keyspace. */
  sliceKey: number
  /** The map generation the answer comes from. */
  generation: number
  /** Preferred first: for a read every server that admits the slice, for a write the one that takes it. */
  servers: ServerRef[]
}

/**
 * A key-routing client: an undici Dispatcher that sends each request to the
 * app server owning its key (`?key=` or the X-Chopper-Key header).
 */
export declare class ChopperClient extends Dispatcher {
  constructor (options: ClientOptions)
  /** The generation of the map held; 0 before the first. */
  readonly generation: number
  /** An axios adapter routing through this client: `axios.create({ adapter: client.axiosAdapter })`. */
  readonly axiosAdapter: AxiosAdapter
  /** Resolves the map's generation once the client holds one; rejects (CHOPPER_ERR_NO_ASSIGNMENT) after `timeoutMs` (default 10000). */
  ready (options?: { timeoutMs?: number }): Promise<number>
  /** The servers for `key` under the map held; throws CHOPPER_ERR_NO_ASSIGNMENT before the first map. */
  lookup (key: string, options?: { read?: boolean }): Lookup
}

/** Build a client; it starts reading the map at once. */
export declare function createClient (options: ClientOptions): ChopperClient

/** Every option's default. */
export declare const defaults: Readonly<ClientOptions & {
  pollIntervalMs: number
  mapTimeoutMs: number
  holdMs: number
  connections: number
  upstreamTimeoutMs: number
  bufferLimit: number
  replicaChoice: ReplicaChoice
}>

/** The read credential of a cluster, derived one way from its token: it reads the map and signs nothing else. */
export declare function readCredential (clusterToken: string): string

/** What a failure carries: a stable code (CHOPPER_ERR_UPSTREAM_UNAVAILABLE, ...) and, where it maps to HTTP, a status. */
export interface ChopperError extends Error {
  code: string
  status?: number
}
