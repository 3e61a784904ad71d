'use strict'

const { controllerSurfaces, controllerSignedRoutes } = require('./controller')
const { memberControlSurfaces, memberSignedRoutes } = require('./members')
const { computeDataSurfaces } = require('./data')
const { kvDataSurfaces, kvSignedRoutes } = require('./kv-cache')
const { signedRouteAbuse } = require('./auth')

/**
 * The surfaces of each target (fuzz/targets.js), by target name, built from
 * the target's `ctx`. Each surface is `{ name, request, weight? }`: an
 * arbitrary of malformed requests `{ origin, method, path, headers, body?,
 * chunked?, auth? }` and its share of the component's calls (default 1).
 * With a cluster token (`ctx.signed`), every request to a signed route is
 * signed when sent, and one more surface spoils the signatures.
 */
const SURFACES = {
  controller: (ctx) => withAuth(ctx, controllerSurfaces(ctx), () => controllerSignedRoutes(ctx)),
  appserver: (ctx) => withAuth(ctx, [...memberControlSurfaces(ctx), ...computeDataSurfaces(ctx)], () => memberSignedRoutes(ctx)),
  frontend: (ctx) => withAuth(ctx, [...memberControlSurfaces(ctx, { load: false }), ...computeDataSurfaces(ctx)], () => memberSignedRoutes(ctx, { load: false })),
  'kv-cache': (ctx) => withAuth(ctx, [...memberControlSurfaces(ctx).filter((s) => s.name === 'PUT /v1/assignment'), ...kvDataSurfaces(ctx)], () => [...memberSignedRoutes(ctx, { load: false }), ...kvSignedRoutes(ctx)])
}

function withAuth (ctx, surfaces, signedRoutes) {
  if (!ctx.signed) return surfaces
  return [...surfaces, { name: 'signatures: missing, garbled, truncated, wrong token, skewed, tampered, replayed', request: signedRouteAbuse(signedRoutes()), weight: 2 }]
}

module.exports = { SURFACES }
