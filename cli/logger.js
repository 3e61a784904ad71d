'use strict'

const pino = require('pino')
const { prettyFactory } = require('pino-pretty')
const { InvalidArgumentError } = require('../core/errors')

const FORMATS = Object.freeze(['pretty', 'json'])
const LEVELS = Object.freeze([...Object.keys(pino.levels.values), 'silent'])

/** Every option of createCliLogger and its default. */
const defaults = Object.freeze({
  level: 'info',
  // 'pretty' or 'json'; undefined (or '') picks pretty exactly when `isTTY`.
  format: undefined,
  // Read when the logger is created, not when this module loads.
  isTTY: undefined, // defaults to process.stdout.isTTY
  // undefined: pino-pretty decides (colorette: a terminal, NO_COLOR, FORCE_COLOR).
  colorize: undefined,
  // A file descriptor or a stream with write(string). The default (fd 1) is
  // what pino writes to when given no destination.
  destination: 1
})

/**
 * pino-pretty options for a terminal: short local time, no pid/hostname, and
 * the component with its server or front-end id as a compact prefix of the
 * message ("[appserver app-1] assignment installed") rather than three more
 * fields on every line.
 */
const prettyOptions = Object.freeze({
  translateTime: 'SYS:HH:MM:ss.l',
  ignore: 'pid,hostname,component,serverId,frontendId',
  singleLine: true,
  messageFormat: formatMessage
})

// C0/C1 controls except tab and newline: a message (e.g. with a client's key
// in it) must not move the cursor or recolour the operator's terminal.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

function formatMessage (log, messageKey, levelLabel, { colors }) {
  const id = log.serverId || log.frontendId
  const tag = log.component ? `[${log.component}${id ? ' ' + id : ''}] ` : id ? `[${id}] ` : ''
  const msg = log[messageKey] === undefined ? '' : String(log[messageKey])
  return colors.bold(tag.replace(UNSAFE, '')) + msg.replace(UNSAFE, '')
}

/**
 * The logger of a command-line entry point: pino JSON lines, exactly as
 * `pino({ level })` writes them, unless the output is a terminal (or
 * `format: 'pretty'`), where lines go through pino-pretty.
 *
 * pino-pretty runs in this thread and writes synchronously (not as a
 * worker-thread transport, and not through its own buffered stream): a line
 * logged right before process.exit, e.g. on Ctrl-C, is on the terminal, and no
 * thread is left to keep the process alive.
 * @param {Partial<typeof defaults>} [options]
 * @returns {import('pino').Logger}
 */
function createCliLogger (options = {}) {
  const { level, format, isTTY, colorize, destination } = { ...defaults, ...withoutUndefined(options) }
  if (!LEVELS.includes(level)) throw new InvalidArgumentError(`invalid log level: expected one of ${LEVELS.join(', ')}, got ${JSON.stringify(level)}`)
  if (format !== undefined && format !== '' && !FORMATS.includes(format)) throw new InvalidArgumentError(`invalid log format: expected one of ${FORMATS.join(', ')}, got ${JSON.stringify(format)}`)
  const tty = isTTY === undefined ? process.stdout.isTTY === true : isTTY
  const pretty = format === 'pretty' || (!format && tty)
  if (!pretty) return destination === 1 ? pino({ level }) : pino({ level }, destination)
  const dest = typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination
  const prettify = prettyFactory({ ...prettyOptions, ...(colorize === undefined ? {} : { colorize }) })
  return pino({ level }, { write: (line) => dest.write(prettify(line)) })
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

/**
 * Send process warnings (a dependency's deprecation or support notice) through
 * `logger` instead of Node's own stderr printer, so machine-read output stays
 * one JSON object per line and people see them in the same format as the rest.
 */
function routeWarnings (logger) {
  process.removeAllListeners('warning') // Node's default printer
  process.on('warning', (w) => logger.warn({ warning: { name: w.name, code: w.code } }, String(w.message).replace(/\s+/g, ' ').trim()))
}

module.exports = { createCliLogger, routeWarnings, defaults, prettyOptions, FORMATS }
