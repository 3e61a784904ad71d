'use strict'

const express = require('express')
const { sliceKey } = require('../../core/keyspace')
const { jsonErrorHandler } = require('../../core/http')
const { kvServiceMs } = require('../capacity')
const { defaultKeyFrom } = require('../../core/request-key')
const {
  InvalidArgumentError,
  MalformedBodyError,
  MethodNotAllowedError,
  MissingKeyError,
  NotFoundError,
  PayloadTooLargeError
} = require('../../core/errors')

/** DynamoDB's partition-key limit; longer keys would fail there with a vaguer message. */
const MAX_KEY_BYTES = 2048
const DEFAULT_CONTENT_TYPE = 'application/octet-stream'

/**
 * The data routes: GET, PUT and DELETE on /kv?key=K (or X-Chopper-Key, the
 * same precedence as appserver-lib's shard guard, which normally runs first
 * and sets req.sliceKey and req.chopperGeneration). The value is the PUT body,
 * stored byte for byte with its Content-Type and returned as such. Writes carry
 * the generation they were admitted under: one fenced off by a newer owner
 * answers 421 CHOPPER_ERR_FENCED_WRITE, and the front end refreshes its map
 * and retries.
 * With a modelled capacity, the real work is done on arrival and its modelled
 * cost is then charged in FIFO order before the response leaves.
 * @param {{ service: import('./kv-service').KvService, maxValueBytes: number, capacity?: ReturnType<import('../capacity').createCapacity>, logger }} options
 */
function createRoutes ({ service, maxValueBytes, capacity, logger }) {
  const router = express.Router()
  const charge = capacity && capacity.modelled
    ? (outcome) => capacity.serve(kvServiceMs(outcome, capacity.options))
    : async () => {}
  const tooLarge = (n) => new PayloadTooLargeError(`value too large${Number.isFinite(n) ? ` (${n} bytes)` : ''}: the limit (maxValueBytes) is ${maxValueBytes} bytes`)

  const readBody = express.raw({ type: () => true, limit: maxValueBytes })

  function keyOf (req) {
    const key = defaultKeyFrom(req)
    if (key === undefined) throw new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header')
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new InvalidArgumentError(`key too long: ${Buffer.byteLength(key)} bytes; DynamoDB allows ${MAX_KEY_BYTES}`)
    return { key, slice: typeof req.sliceKey === 'number' ? req.sliceKey : sliceKey(key) }
  }

  router.route('/kv')
    .get(async (req, res) => {
      const { key, slice } = keyOf(req)
      const item = await service.get(key, slice)
      await charge(item && item.cached ? 'hit' : 'miss')
      if (!item) throw new NotFoundError(`no value for key ${JSON.stringify(key)}`)
      res.status(200)
      res.setHeader('Content-Type', item.contentType)
      res.setHeader('Content-Length', item.value.length)
      res.setHeader('X-Chopper-Cache', item.cached ? 'hit' : 'miss')
      res.end(item.value)
    })
    .put((req, res, next) => {
      // Refuse a declared oversize before reading a byte of it.
      const declared = Number(req.headers['content-length'])
      if (declared > maxValueBytes) return next(tooLarge(declared))
      keyOf(req)
      readBody(req, res, (err) => next(err && bodyError(err, tooLarge)))
    }, async (req, res) => {
      const { key, slice } = keyOf(req)
      const value = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)
      const contentType = req.headers['content-type'] || DEFAULT_CONTENT_TYPE
      if (req.is('application/json', '+json')) {
        try {
          JSON.parse(value.toString('utf8'))
        } catch (err) {
          throw new MalformedBodyError(`malformed JSON value: ${err.message}`)
        }
      }
      await service.put(key, slice, value, contentType, { generation: generationOf(req) })
      await charge('write')
      res.status(204).end()
    })
    .delete(async (req, res) => {
      const { key, slice } = keyOf(req)
      await service.delete(key, slice, { generation: generationOf(req) })
      await charge('write')
      res.status(204).end()
    })
    .all((req, res, next) => {
      res.setHeader('Allow', 'GET, HEAD, PUT, DELETE')
      next(new MethodNotAllowedError(`method ${req.method} not allowed on /kv; use GET, PUT or DELETE`))
    })

  router.use(jsonErrorHandler(logger))
  return router
}

/**
 * The assignment generation the shard guard admitted the request under; 0
 * standalone (no guard), where versions are then ordered by the clock alone.
 */
function generationOf (req) {
  return req.chopperGeneration ?? 0
}

/** body-parser errors as ours, with messages that say what to fix. */
function bodyError (err, tooLarge) {
  if (err.type === 'entity.too.large') return tooLarge(err.length)
  if (err.status === 400) return new MalformedBodyError(`malformed body: ${err.message}`)
  return err // 415 (unsupported content encoding) keeps its status
}

module.exports = { createRoutes, MAX_KEY_BYTES }
