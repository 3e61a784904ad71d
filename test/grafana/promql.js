'use strict'

/**
 * Just enough PromQL to know what a dashboard asks of the exporters: a
 * tokenizer, and a walk over the tokens that finds every metric name with the
 * labels matched on it, every function called, and the labels each
 * aggregation groups by. Grafana's variables ($__rate_interval, ${var}) are
 * tokens of their own. Not a validator of the whole grammar; `promtool check
 * rules` is, where Prometheus is installed.
 */

const FUNCTIONS = new Set([
  'abs', 'absent', 'absent_over_time', 'acos', 'acosh', 'asin', 'asinh', 'atan', 'atanh', 'avg_over_time', 'ceil', 'changes',
  'clamp', 'clamp_max', 'clamp_min', 'cos', 'cosh', 'count_over_time', 'day_of_month', 'day_of_week', 'day_of_year',
  'days_in_month', 'deg', 'delta', 'deriv', 'end', 'exp', 'floor', 'histogram_avg', 'histogram_count', 'histogram_fraction',
  'histogram_quantile', 'histogram_stddev', 'histogram_stdvar', 'histogram_sum', 'holt_winters', 'hour', 'idelta', 'increase',
  'irate', 'label_join', 'label_replace', 'last_over_time', 'ln', 'log10', 'log2', 'mad_over_time', 'max_over_time',
  'min_over_time', 'minute', 'month', 'pi', 'predict_linear', 'present_over_time', 'quantile_over_time', 'rad', 'rate',
  'resets', 'round', 'scalar', 'sgn', 'sin', 'sinh', 'sort', 'sort_desc', 'sqrt', 'start', 'stddev_over_time',
  'stdvar_over_time', 'sum_over_time', 'tan', 'tanh', 'time', 'timestamp', 'vector', 'year'
])
const AGGREGATIONS = new Set(['sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile'])
const GROUPING = new Set(['by', 'without'])
const MATCHING = new Set(['on', 'ignoring', 'group_left', 'group_right'])
const OPERATORS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'atan2'])

const TOKEN = new RegExp([
  /(\s+)/.source,
  /("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)/.source, // string
  /(\$\{\w+(?::\w+)?\}|\$\w+)/.source, // Grafana variable
  /([a-zA-Z_:][\w:]*)/.source, // identifier
  /((?:\d+(?:ms|[smhdwy]))+|(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)/.source, // duration or number
  /(=~|!~|!=|==|<=|>=|[-+*/%^(){}[\],=<>@:])/.source // punctuation and operators
].join('|'), 'y')
const TYPES = [null, 'space', 'string', 'variable', 'ident', 'number', 'punct']

/** @returns {{ type: string, value: string, pos: number }[]} */
function tokenize (expr) {
  const tokens = []
  TOKEN.lastIndex = 0
  while (TOKEN.lastIndex < expr.length) {
    const pos = TOKEN.lastIndex
    const m = TOKEN.exec(expr)
    if (!m) throw new Error(`cannot read ${JSON.stringify(expr.slice(pos, pos + 10))} at ${pos} in ${expr}`)
    const type = TYPES[m.findIndex((g, i) => i > 0 && g !== undefined)]
    if (type !== 'space') tokens.push({ type, value: m[0], pos })
  }
  return tokens
}

/** Index of the closing bracket for each opening one, and back. */
function pairs (tokens, expr) {
  const close = { '(': ')', '{': '}', '[': ']' }
  const stack = []
  const match = new Map()
  tokens.forEach((t, i) => {
    if (t.type !== 'punct') return
    if (close[t.value]) stack.push(i)
    else if (Object.values(close).includes(t.value)) {
      const open = stack.pop()
      if (open === undefined || close[tokens[open].value] !== t.value) throw new Error(`unbalanced ${t.value} at ${t.pos} in ${expr}`)
      match.set(open, i)
      match.set(i, open)
    }
  })
  if (stack.length) throw new Error(`unclosed ${tokens[stack[0]].value} at ${tokens[stack[0]].pos} in ${expr}`)
  return match
}

/** The identifiers of a parenthesised list starting at `open`. */
function labelList (tokens, open, match, expr) {
  if (!tokens[open] || tokens[open].value !== '(') throw new Error(`expected a label list after ${tokens[open - 1].value} in ${expr}`)
  const inner = tokens.slice(open + 1, match.get(open))
  const labels = inner.filter((t) => t.value !== ',')
  if (labels.some((t) => t.type !== 'ident')) throw new Error(`bad label list in ${expr}`)
  return labels.map((t) => t.value)
}

/**
 * @returns {{
 *   selectors: { name: string, labels: string[], index: number }[],
 *   groupings: { keyword: string, labels: string[], from: number, to: number }[],
 *   calls: { name: string, from: number, to: number, args: object[] }[],
 *   tokens: object[]
 * }} `from`/`to` are token indices of the argument's parentheses
 */
function analyse (expr) {
  const tokens = tokenize(expr)
  const match = pairs(tokens, expr)
  const selectors = []
  const groupings = []
  const calls = []
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]
    if (t.type !== 'ident') continue
    const word = t.value
    const next = tokens[i + 1]
    if (GROUPING.has(word)) {
      // `sum by (l) (expr)` or `sum (expr) by (l)`: the labels apply to that expr.
      const labels = labelList(tokens, i + 1, match, expr)
      const end = match.get(i + 1)
      const prev = tokens[i - 1]
      let from, to
      if (prev && AGGREGATIONS.has(prev.value)) {
        from = end + 1
        to = match.get(from)
      } else if (prev && prev.value === ')' && tokens[match.get(i - 1) - 1] && AGGREGATIONS.has(tokens[match.get(i - 1) - 1].value)) {
        to = i - 1
        from = match.get(to)
      }
      if (from === undefined || to === undefined || tokens[from].value !== '(') throw new Error(`"${word}" not attached to an aggregation in ${expr}`)
      groupings.push({ keyword: word, labels, from, to })
      i = end
      continue
    }
    if (MATCHING.has(word)) {
      // Vector matching: the labels must exist on both sides, i.e. anywhere in the expression.
      if (next && next.value === '(') {
        groupings.push({ keyword: word, labels: labelList(tokens, i + 1, match, expr), from: 0, to: tokens.length - 1 })
        i = match.get(i + 1)
      }
      continue
    }
    if (OPERATORS.has(word) || /^(inf|nan)$/i.test(word)) continue
    if (AGGREGATIONS.has(word) && next && GROUPING.has(next.value)) {
      // `sum by (l) (expr)`: the call's argument follows the label list.
      const from = match.get(i + 2) + 1
      calls.push({ name: word, from, to: match.get(from), args: tokens.slice(from + 1, match.get(from)) })
      continue
    }
    if (next && next.value === '(') {
      if (!FUNCTIONS.has(word) && !AGGREGATIONS.has(word)) throw new Error(`unknown function ${word} in ${expr}`)
      calls.push({ name: word, from: i + 1, to: match.get(i + 1), args: tokens.slice(i + 2, match.get(i + 1)) })
      continue
    }
    const selector = { name: word, labels: [], index: i }
    if (next && next.value === '{') {
      const close = match.get(i + 1)
      for (let j = i + 2; j < close; j++) {
        const [label, op, value] = tokens.slice(j, j + 3)
        if (label.type !== 'ident' || !['=', '!=', '=~', '!~'].includes(op && op.value) || !value || value.type !== 'string') throw new Error(`bad label matcher at ${label.pos} in ${expr}`)
        selector.labels.push(label.value)
        j += 3 // past the comma, if any
      }
      i = close
    }
    selectors.push(selector)
  }
  return { selectors, groupings, calls, tokens }
}

/** Metric names an expression reads, in order of first use. */
function metricNames (expr) {
  return [...new Set(analyse(expr).selectors.map((s) => s.name))]
}

module.exports = { tokenize, analyse, metricNames, FUNCTIONS, AGGREGATIONS }
