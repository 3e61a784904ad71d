'use strict'

const { readEnv } = require('../../core/settings')

describe('readEnv', () => {
  test('a front end reads serverReportDecay as true or false, true when unset', () => {
    expect(readEnv('frontend', {}).serverReportDecay).toBe(true)
    expect(readEnv('frontend', { CHOPPER_SERVER_REPORT_DECAY: 'false' }).serverReportDecay).toBe(false)
    expect(readEnv('frontend', { CHOPPER_SERVER_REPORT_DECAY: 'true' }).serverReportDecay).toBe(true)
    expect(() => readEnv('frontend', { CHOPPER_SERVER_REPORT_DECAY: 'no' })).toThrow(/CHOPPER_SERVER_REPORT_DECAY must be true or false, got "no"/)
  })
})
