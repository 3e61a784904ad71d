// Type declarations for @chopper/appserver-lib, written from appserver-lib/*.js
// and the core/ modules it uses. The package is CommonJS; these describe its
// exports: createAppServer, defaults, ShardGuard, CONSISTENCY,
// shardGuardMiddleware, defaultKeyFrom, setRequestCost and COST_MODES.

import type { Server } from 'node:http'
import type { Application, Request, RequestHandler } from 'express'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'

/**
 * 'strict': admit only under a live lease from the controller (exclusive
 * admission; a controller outage longer than a lease stops the server).
 * 'available': keep serving the last map without a controller.
 */
export type Consistency = 'strict' | 'available'

/**
 * How a request's cost (busy ms, reported per slice) is measured. 'wall': from
 * admission until the response closes. 'cpu': the process's CPU time across
 * the synchronous part of the handler (CPU-bound apps). `setRequestCost`
 * overrides either.
 */
/** 'writes': methods other than GET, HEAD and OPTIONS; 'all': every request. */
export type HandoffDrain = 'writes' | 'all'
export type CostMode = 'wall' | 'cpu'

/** One slice of the keyspace: half-open [start, end) of 32-bit slice keys. */
export interface AssignmentSlice {
  start: number
  end: number
  /** Every server holding the slice, primary first; all of them admit it (replicas) outside a handoff. */
  servers: string[]
  /** A fenced handoff is in progress: only `holders` (if any) admit the slice until the next generation. */
  moving?: boolean
  /** With `moving`: the servers that keep admitting the slice during the handoff. */
  holders?: string[]
}

/**
 * The assignment, as the controller pushes it: sorted slices tiling [0, 2^32)
 * exactly, every owner named in `servers`, `generation` a non-negative integer.
 */
export interface Assignment {
  generation: number
  slices: AssignmentSlice[]
  servers: Record<string, { url: string }>
}

/** A half-open range [start, end) of slice keys. */
export interface KeyRange {
  start: number
  end: number
}

/** What the ownership hooks receive besides the ranges. */
export interface AssignmentContext {
  /** Generation of the assignment being installed. */
  generation: number
  assignment: Assignment
  /**
   * The parsed map of `assignment` (core/slice-map.js): the one the guard checks requests
   * against once the install completes (onRelease runs just before the switch).
   */
  map: unknown
}

/**
 * Called synchronously while an assignment is installed, before any request is
 * checked against it, with the normalized ranges gained (onAcquire) or lost
 * (onRelease). A returned promise is awaited before the push is acknowledged;
 * a rejection is logged and reported to the controller as `hookError`.
 */
export type OwnershipHook = (ranges: KeyRange[], context: AssignmentContext) => unknown

/**
 * Called synchronously with every assignment installed, also one that changes only other
 * servers' part of a slice this server holds. Its return value is ignored; a throw or a
 * rejected promise is logged, never propagated.
 */
export type AssignmentHook = (context: AssignmentContext) => unknown

/** Extracts the application key of a request; undefined answers 400 CHOPPER_ERR_MISSING_KEY. */
export type KeyFrom = (req: Request) => string | undefined

/** Anything pino-compatible; libraries default to a silent pino logger. */
export type ChopperLogger = Logger

/**
 * An error from the library. Every one carries a stable `code` and an HTTP
 * `status`; the 421s (`CHOPPER_ERR_NOT_OWNER`, `CHOPPER_ERR_LEASE_EXPIRED`)
 * also carry the server's `generation`. The classes themselves are not
 * exported: test `code`, not `instanceof`.
 */
export interface ChopperError extends Error {
  code: string
  status: number
  generation?: number
}

export interface AppServerOptions {
  /** Server id as registered with the controller: a non-empty string of [A-Za-z0-9._-]. */
  id: string
  /** Express app or router for the data routes; only requests for keys this server may admit reach it. */
  app: RequestHandler | Application
  /** Data listener host. Default '127.0.0.1'. */
  host?: string
  /** Data port; 0 picks a free one. Default 0. */
  port?: number
  /** Control port (pushes, load reports, /metrics); 0 picks a free one. Default 0. */
  controlPort?: number
  /** Host other members use to reach this server. Default '127.0.0.1'. */
  advertiseHost?: string
  /** http(s) URL of the controller. Without it the server does not register, and assignments must be pushed. */
  controllerUrl?: string
  /** Deadline for the first registration (the controller may start later). Default 30000. */
  registerTimeoutMs?: number
  /** Re-register (idempotent) this often so a restarted controller relearns the server; 0 disables. Default 10000. */
  reregisterMs?: number
  /** Application key of a request. Default `defaultKeyFrom`: `?key=`, then the X-Chopper-Key header. */
  keyFrom?: KeyFrom
  /** false: serve every key (no 421), still counting; for baselines without Chopper. Default true. */
  enforceOwnership?: boolean
  /** Requests and responses born with the properties Express and the shard guard set (request-shapes.js); false: Node's own classes. Default true. */
  requestShapes?: boolean
  /** How a request's cost is measured for the load report. Default 'wall'. */
  cost?: CostMode
  /** Default 'available'. */
  consistency?: Consistency
  /** Lease renewal period in ms (integer >= 1). Default: the period the controller's grants name. */
  renewMs?: number
  /** Renew over one long-lived connection (a lease stream) rather than one HTTP call each. Default true. */
  leaseStream?: boolean
  /** How long a request for a slice in handoff waits for its grant, in ms (integer >= 0). Default 2000. */
  holdMs?: number
  /** How long a revoke push waits for in-flight requests before answering, in ms (integer >= 1). Default 1000. */
  drainTimeoutMs?: number
  /** Which requests admitted under an older map a handoff waits for. Default 'writes'. */
  handoffDrain?: HandoffDrain
  /**
   * Requests for which it returns true are admitted at once for a slice this server is joining (a handoff
   * that adds it; the grant is still on its way) instead of held until the grant: coordination requests
   * that are safe to take early, such as kv-cache's write holds. Default null: none.
   */
  admitJoining?: ((req: import('express').Request) => boolean) | null
  /** drain() stops waiting for the controller to move this server's slices after this, in ms (integer >= 1). Default 15000. */
  drainDeadlineMs?: number
  /**
   * The shared cluster secret (at least 16 characters; CHOPPER_CLUSTER_TOKEN): calls to the controller are
   * signed with it, and the control port takes signed pushes and load collections only. Default: none
   * (unauthenticated, with a warning at start).
   */
  clusterToken?: string
  /** Default: silent. */
  logger?: ChopperLogger
  /** Called with the ranges this server gained. */
  onAcquire?: OwnershipHook
  /** Called with the ranges this server lost. */
  onRelease?: OwnershipHook
  /** Called with every map installed (kv-cache follows the newest map with it). */
  onAssignment?: AssignmentHook
  /** prom-client registry served on the control port's /metrics. Default: a new Registry. */
  registry?: Registry
}

export interface AppServerUrls {
  /** Data URL, as advertised to the controller. */
  url: string
  /** Control URL (pushes, /v1/load, /healthz, /metrics). */
  controlUrl: string
}

/** What drain() resolved: whether the controller moved every slice away before the deadline. */
export interface DrainResult {
  drained: boolean
  /** Why the drain did not happen or failed (a controller error code or message, or 'no controller'). */
  reason?: string
}

/** Renews the lease with the controller (present once started with a controllerUrl). */
export interface LeaseKeeper {
  readonly renewMs: number
  /** Consecutive failed renewals. */
  readonly failures: number
  readonly stats: { renewals: number, failures: number }
  start (): void
  stop (): void
}

export interface AppServer {
  /** Listen on both ports, register with the controller and start renewing the lease. */
  start (): Promise<AppServerUrls>
  /** Stop renewing, deregister and close both listeners. */
  close (): Promise<void>
  /**
   * Graceful drain (SIGTERM): ask the controller to hand this server's slices
   * to others, wait until they are granted elsewhere and every admitted request
   * finished, then deregister. Idempotent. Call close() afterwards.
   */
  drain (): Promise<DrainResult>
  readonly guard: ShardGuard
  readonly registry: Registry
  /** The raw listeners (fault injection in benches). */
  readonly listeners: { data: Server, control: Server }
  /** null until start() resolved. */
  readonly urls: AppServerUrls | null
  /** null until start() resolved, and without a controllerUrl. */
  readonly leases: LeaseKeeper | null
}

/**
 * Host an app behind Chopper: a data listener (the shard guard, then the app)
 * and a separate control listener (pushes, load reports, metrics). Options are
 * validated at once; an invalid one throws a ChopperError with code
 * CHOPPER_ERR_INVALID_ARG naming it.
 */
export function createAppServer (options: AppServerOptions): AppServer

/** Every option of createAppServer that has a default, and its value. */
export const defaults: Readonly<{
  host: string
  port: number
  controlPort: number
  advertiseHost: string
  controllerUrl: undefined
  registerTimeoutMs: number
  reregisterMs: number
  keyFrom: KeyFrom
  enforceOwnership: boolean
  cost: CostMode
  consistency: Consistency
  renewMs: number | undefined
  leaseStream: boolean
  holdMs: number
  drainTimeoutMs: number
  drainDeadlineMs: number
  clusterToken: undefined
  requestShapes: boolean
  logger: ChopperLogger
}>

/** The consistency modes, in the order the error messages list them. */
export const CONSISTENCY: readonly Consistency[]

export interface ShardGuardOptions {
  /** This server's id, as registered. */
  serverId: string
  onAcquire?: OwnershipHook
  onRelease?: OwnershipHook
  onAssignment?: AssignmentHook
  /** Default 'available'. */
  consistency?: Consistency
  /** Leases are in force from the start (a controller grants them); otherwise from the first grant. Default false. */
  leases?: boolean
  /** How long admitOrHold waits for the map that decides a request, in ms (integer >= 0). Default 2000. */
  holdMs?: number
  /** Which requests admitted under an older map a handoff waits for. Default 'writes'. */
  handoffDrain?: HandoffDrain
  /** Monotonic clock in ms. Default performance.now. */
  now?: () => number
  logger?: ChopperLogger
}

/** Read-only lookup over an installed assignment. */
export interface SliceMap {
  readonly assignment: Assignment
  readonly generation: number
  readonly size: number
  readonly starts: Uint32Array
  readonly owners: string[]
  /** Every server listed for each slice, primary first. */
  readonly replicas: string[][]
  /** 1 where the slice is in a fenced handoff. */
  readonly moving: Uint8Array
  readonly hasMoving: boolean
  /** Index of the slice holding slice key `key`. */
  indexOf (key: number): number
  /** Primary owner of the slice holding slice key `key`. */
  ownerOf (key: number): string
  urlOf (serverId: string): string | undefined
}

/** Returned by begin(), passed back to end(): one per installed map, shared by the requests admitted under it. */
export interface InflightToken {
  /** The generation the request was admitted under. */
  readonly generation: number
  /** The map the request was admitted under (its slice's replicas, its range for the cost). */
  readonly map: SliceMap
}

export interface SetAssignmentResult {
  /** false for a repeat of the current generation with the same layout (pushes are retried). */
  changed: boolean
  acquired: KeyRange[]
  released: KeyRange[]
  /** Settles when the ownership hooks have; rejects when one failed. */
  hooks: Promise<unknown>
}

export interface ShardGuardStats {
  admitted: number
  misdirected: number
  staleRouted: number
  held: number
  leaseRefused: number
  assignmentsAccepted: number
  assignmentsRejected: number
}

/** A load report: per-range request counts and cost (busy ms) the controller has not acknowledged yet. */
export interface LoadReport {
  serverId: string
  generation: number
  /** Changes with every process, so an acknowledgement for an earlier incarnation is ignored. */
  instance: string
  seq: number
  /** How many collection periods the report spans. */
  frames: number
  /**
   * `count` requests and their `cost` in ms (rounded to the µs); a request's cost is reported once it finished, so an entry may carry cost and no count.
   * `done`: requests that finished here (carried their cost), when some did. `hot`: the range's majority vote over its
   * requests' slice keys, when it has a candidate (`votes` is at most that key's requests), for the controller's hot-key cuts.
   */
  entries: Array<{ start: number, end: number, count: number, cost: number, done?: number, hot?: { key: number, votes: number } }>
}

/**
 * The framework-free core: this server's view of the assignment, admission per
 * key, in-flight tracking per map generation (for fenced handoff), the lease
 * (strict mode) and per-slice request counts.
 */
export class ShardGuard {
  /** Throws a ChopperError (CHOPPER_ERR_INVALID_ARG) naming the first invalid option. */
  constructor (options: ShardGuardOptions)
  readonly serverId: string
  readonly consistency: Consistency
  readonly holdMs: number
  /** The installed map; null before the first assignment. */
  readonly map: SliceMap | null
  /** Whether a lease is required (strict mode) yet. */
  readonly leasesEnforced: boolean
  readonly stats: ShardGuardStats
  /** Requests begun and not yet ended, under any map (what X-Chopper-Inflight reports). */
  readonly running: number
  /** Current generation; 0 before the first assignment. */
  readonly generation: number
  /**
   * The highest generation g such that no request admitted under a map older
   * than g is still running: what the controller waits for before it grants a
   * revoked slice to its next owner.
   */
  readonly drainedGeneration: number
  /** True while the lease is live. */
  leaseValid (): boolean
  /**
   * A lease grant from the controller; `sentAt` is when the request that
   * produced it left (this guard's clock). Returns whether the lease was extended.
   */
  applyLease (lease: { leaseMs: number, minGeneration?: number }, sentAt: number): boolean
  /** Give up the lease at once. */
  dropLease (): void
  /**
   * Install an assignment. An invalid or stale one throws a ChopperError
   * (CHOPPER_ERR_INVALID_ASSIGNMENT, CHOPPER_ERR_STALE_GENERATION) and the old map is kept.
   */
  setAssignment (assignment: Assignment): SetAssignmentResult
  /**
   * Check and count an application key: returns its slice key when this server
   * may admit it; throws the 421 ChopperError (CHOPPER_ERR_NOT_OWNER or
   * CHOPPER_ERR_LEASE_EXPIRED) otherwise. No in-flight tracking: wrap the work
   * in begin()/end() so a handoff waits for it.
   */
  admit (appKey: string): number
  /**
   * Check and count a slice key: the slice index (>= 0) when this server may
   * admit it now, -1 when it does not own it, -2 when the lease ran out (strict).
   * `joining`: also admit it while this server is joining its slice (a handoff that adds it), for the
   * requests createAppServer's admitJoining picks.
   */
  admitSliceKey (key: number, joining?: boolean): number
  /** Whether a refused request should wait for a newer map (routed with a newer generation, or our slice is moving). */
  shouldHold (key: number, routedGeneration: number): boolean
  /** admitSliceKey, waiting up to holdMs for the map that decides it when shouldHold says so; `joining` as admitSliceKey's. */
  admitOrHold (key: number, routedGeneration: number, abandoned?: () => boolean, joining?: boolean): Promise<number>
  /** Mark a request admitted under the current map as running. */
  /** `write`: a request a handoff must drain (handoffDrain 'writes'). */
  begin (write?: boolean): InflightToken
  /**
   * The request admitted under `token`'s map finished. With `slice` (the index
   * admitSliceKey returned) and `costMs`, its busy time is added to that slice's
   * range in the map that admitted it, even when the map changed since.
   */
  end (token: InflightToken, slice?: number, costMs?: number, write?: boolean): void
  /** A write admitted under `token` applied its effects: a handoff stops waiting for it (then end it with write = false). */
  settle (token: InflightToken): void
  /** Resolves true once every request admitted under older maps finished, false on timeout. */
  waitDrained (timeoutMs: number): Promise<boolean>
  /** The servers the current map lists for slice key `key`, primary first (read-only), or null without a map: what a 421 names in X-Chopper-Owner. */
  serversOf (key: number): readonly string[] | null
  /** The 421 error for a key this server does not own, carrying the generation. */
  notOwnerError (appKey: string): ChopperError
  /** The 421 error for a strict server whose lease ran out. */
  leaseExpiredError (): ChopperError
  /** Note the generation a front end routed with (counts stale routing). */
  observeRoutedGeneration (generation: number): void
  /** Counts and cost not yet acknowledged; pass the last report the controller used as `ack`. Reading loses nothing. */
  report (ack?: { instance?: string, seq?: number }): LoadReport
}

export interface ShardGuardMiddlewareOptions {
  /** Default `defaultKeyFrom`. */
  keyFrom?: KeyFrom
  /** false: serve every key and only count. Default true. */
  enforce?: boolean
  /** How a request's cost is measured for the load report. Default 'wall'. */
  cost?: CostMode
}

/**
 * Express middleware enforcing ownership: 400 without a key; 421 (with the
 * generation, and an X-Chopper-Generation header) for a key this server may not
 * admit, after holding it up to holdMs when the deciding map is on its way;
 * otherwise counts the request, tracks it in flight until the response closes,
 * sets `req.sliceKey`, `req.chopperGeneration`, `req.chopperReplicas` and
 * X-Served-By, and calls next(). When the response closes, the request's cost
 * goes to its slice in the map that admitted it. Throws a ChopperError
 * (CHOPPER_ERR_INVALID_ARG) for an unknown `cost` mode.
 */
export function shardGuardMiddleware (guard: ShardGuard, options?: ShardGuardMiddlewareOptions): RequestHandler

/**
 * State a request's cost in ms (a finite number >= 0) instead of what the
 * middleware measures, e.g. a modelled service time. The last call before the
 * response closes wins. Throws a ChopperError (CHOPPER_ERR_INVALID_ARG) for an
 * invalid cost.
 */
export function setRequestCost (req: Request, ms: number): void

/**
 * The request's effects are complete (writes applied) although its response is
 * not finished: a handoff stops waiting for it. A no-op for reads.
 */
export function settleRequest (req: Request): void

/** The handoffDrain modes. */
export const HANDOFF_DRAIN: readonly HandoffDrain[]

/** The cost modes, in the order the error messages list them. */
export const COST_MODES: readonly CostMode[]

/** `?key=` when non-empty, else the X-Chopper-Key header, else undefined. */
export function defaultKeyFrom (req: Request): string | undefined

declare global {
  namespace Express {
    interface Request {
      /** 32-bit slice key (FarmHash fingerprint32) of the request's key; set by the shard guard. */
      sliceKey?: number
      /**
       * Generation the request was admitted under; set by the shard guard. Use it
       * as a fencing token in writes: a store that saw a newer generation for the
       * key should refuse the write.
       */
      chopperGeneration?: number
      /**
       * The admitted slice's servers (primary first) under the map that admitted
       * the request; set by the shard guard. Undefined when the request was not
       * admitted (enforceOwnership: false serving a key this server does not hold).
       */
      chopperReplicas?: readonly string[]
      /** Servers that admit the request's slice now (a subset of chopperReplicas during a handoff). */
      chopperAdmitters?: readonly string[]
      /** Every server's URL in the map that admitted the request. */
      chopperServers?: Readonly<Record<string, { url: string }>>
    }
  }
}
