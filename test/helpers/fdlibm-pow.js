'use strict'

/**
 * `x ** y` as V8's legacy pow (base::ieee754::legacy::pow, after fdlibm's
 * e_pow.c) computes it, for finite x >= 0 and finite y: the same double on
 * every Node.js line. Math.pow was that function up to Node 22; Node 24's V8
 * calls the C library's pow instead (flag --use-std-math-pow, on by default),
 * and about one result in ten differs in the last bit. Seeded test inputs that go through a power
 * (test/strategies/golden-cases.js) use this one, so that a fixture recorded
 * on one line holds on all of them.
 */

const f64 = new Float64Array(1)
const i32 = new Int32Array(f64.buffer) // little-endian: [low word, high word]
const hi = (d) => { f64[0] = d; return i32[1] }
const lo = (d) => { f64[0] = d; return i32[0] >>> 0 }
const withLow = (d, low) => { f64[0] = d; i32[0] = low; return f64[0] }
const withHigh = (d, high) => { f64[0] = d; i32[1] = high; return f64[0] }

const bp = [1.0, 1.5]
const dpH = [0.0, 5.84962487220764160156e-01]
const dpL = [0.0, 1.35003920212974897128e-08]
const two53 = 9007199254740992.0
const L1 = 5.99999999999994648725e-01
const L2 = 4.28571428578550184252e-01
const L3 = 3.33333329818377432918e-01
const L4 = 2.72728123808534006489e-01
const L5 = 2.30660745775561754067e-01
const L6 = 2.06975017800338417784e-01
const P1 = 1.66666666666666019037e-01
const P2 = -2.77777777770155933842e-03
const P3 = 6.61375632143793436117e-05
const P4 = -1.65339022054652515390e-06
const P5 = 4.13813679705723846039e-08
const lg2 = 6.93147180559945286227e-01
const lg2H = 6.93147182464599609375e-01
const lg2L = -1.90465429995776804525e-09
const cp = 9.61796693925975554329e-01
const cpH = 9.61796700954437255859e-01
const cpL = -7.02846165095275826516e-09

/**
 * @param {number} x finite, >= 0
 * @param {number} y finite, |y| <= 2 ** 31
 * @returns {number}
 */
function pow (x, y) {
  if (!(x >= 0) || !Number.isFinite(x) || !Number.isFinite(y) || Math.abs(y) > 2 ** 31) {
    throw new RangeError(`fdlibm-pow covers finite x >= 0 and |y| <= 2 ** 31, got ${x} ** ${y}`)
  }
  if (x === 0) return y > 0 ? 0 : (y < 0 ? Infinity : 1)
  if (y === 0 || x === 1) return 1
  if (y === 1) return x
  if (y === -1) return 1 / x
  if (y === 2) return x * x
  if (y === 0.5) return Math.sqrt(x)

  // log2(x) = t1 + t2, t1 with its low word cleared
  let ax = x
  let ix = hi(ax)
  let n = 0
  if (ix < 0x00100000) { // subnormal x
    ax *= two53
    n -= 53
    ix = hi(ax)
  }
  n += (ix >> 20) - 0x3ff
  const j0 = ix & 0x000fffff
  ix = j0 | 0x3ff00000
  let k
  if (j0 <= 0x3988E) k = 0 // |x| < sqrt(3/2)
  else if (j0 < 0xBB67A) k = 1 // |x| < sqrt(3)
  else {
    k = 0
    n += 1
    ix -= 0x00100000
  }
  ax = withHigh(ax, ix)

  // ss = s_h + s_l = (x - 1) / (x + 1) or (x - 1.5) / (x + 1.5)
  let u = ax - bp[k]
  let v = 1 / (ax + bp[k])
  const ss = u * v
  const sH = withLow(ss, 0)
  let tH = withHigh(0, ((ix >> 1) | 0x20000000) + 0x00080000 + (k << 18))
  let tL = ax - (tH - bp[k])
  const sL = v * ((u - sH * tH) - sH * tL)
  let s2 = ss * ss
  let r = s2 * s2 * (L1 + s2 * (L2 + s2 * (L3 + s2 * (L4 + s2 * (L5 + s2 * L6)))))
  r += sL * (sH + ss)
  s2 = sH * sH
  tH = withLow(3.0 + s2 + r, 0)
  tL = r - ((tH - 3.0) - s2)
  u = sH * tH
  v = (sL * tH) + (tL * ss)
  let pH = withLow(u + v, 0)
  let pL = v - (pH - u)
  const zH = cpH * pH
  const zL = cpL * pH + pL * cp + dpL[k]
  let t = n
  const t1 = withLow(((zH + zL) + dpH[k]) + t, 0)
  const t2 = zL - (((t1 - t) - dpH[k]) - zH)

  // y * log2(x) = p_h + p_l, with y split into y1 + (y - y1)
  const y1 = withLow(y, 0)
  pL = (y - y1) * t1 + y * t2
  pH = y1 * t1
  let z = pL + pH
  const j = hi(z)
  const i = lo(z)
  if (j >= 0x40900000) { // z >= 1024
    if (((j - 0x40900000) | i) !== 0 || pL + 8.008566259537294e-17 > z - pH) return Infinity
  } else if ((j & 0x7fffffff) >= 0x4090cc00) { // z <= -1075
    if (((j - 0xc090cc00) | i) !== 0 || pL <= z - pH) return 0
  }

  // 2 ** (p_h + p_l)
  const ai = j & 0x7fffffff
  k = (ai >> 20) - 0x3ff
  n = 0
  if (ai > 0x3fe00000) { // |z| > 0.5: n = [z + 0.5]
    n = j + (0x00100000 >> (k + 1))
    k = ((n & 0x7fffffff) >> 20) - 0x3ff
    t = withHigh(0, n & ~(0x000fffff >> k))
    n = ((n & 0x000fffff) | 0x00100000) >> (20 - k)
    if (j < 0) n = -n
    pH -= t
  }
  t = withLow(pL + pH, 0)
  u = t * lg2H
  v = (pL - (t - pH)) * lg2 + t * lg2L
  z = u + v
  const w = v - (z - u)
  t = z * z
  const e1 = z - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
  r = (z * e1) / ((e1 - 2) - (w + z * w)) // V8's grouping, not fdlibm's
  z = 1 - (r - z)
  const hz = hi(z) + (n << 20)
  if ((hz >> 20) <= 0) return z * 2 ** n // subnormal result
  return withHigh(z, hz)
}

module.exports = { pow }
