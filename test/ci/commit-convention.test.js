'use strict'

const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const CHECK = path.join(ROOT, '.ci', 'commit-message.sh')

function check (message) {
  return spawnSync('bash', [CHECK, '-'], { input: message, encoding: 'utf8' })
}

describe('.ci/commit-message.sh', () => {
  test.each([
    'frontend: hold a 421 until the new map arrives\n\nWhy it matters.\n',
    'kv-cache, core: share one wait-list\n\nWhy.\n# a comment git strips\n',
    "Merge branch 'wip'\n",
    'fixup! frontend: hold\n'
  ])('accepts %j', (message) => {
    expect(check(message).status).toBe(0)
  })

  test.each([
    ['a paragraph for a subject', 'Rewrote the front end so that it holds requests, which took a while and many steps across files\n\nWhy.\n', 'at most 72'],
    ['no area', 'hold requests longer\n\nWhy.\n', "'area: imperative summary'"],
    ['no body', 'frontend: hold requests longer\n', 'no body'],
    ['no blank line', 'frontend: hold requests longer\nWhy.\n', 'second line must be blank']
  ])('refuses %s', (_, message, reason) => {
    const r = check(message)
    expect(r.status).toBe(1)
    expect(r.stderr).toContain(reason)
  })
})

describe('the hook and the CI check in a repository', () => {
  let dir
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-commits-'))
    fs.cpSync(path.join(ROOT, '.ci'), path.join(dir, '.ci'), { recursive: true })
    fs.cpSync(path.join(ROOT, '.githooks'), path.join(dir, '.githooks'), { recursive: true })
    const git = (...args) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' })
    git('init', '-q')
    git('config', 'user.email', 'test@example.invalid')
    git('config', 'user.name', 'test')
    git('add', '.')
    git('commit', '-q', '-m', 'an old commit whose subject is a paragraph, as before the convention')
    const base = git('rev-parse', 'HEAD').trim()
    fs.writeFileSync(path.join(dir, '.ci', 'commit-baseline'), `${base} ${git('log', '-1', '--format=%at').trim()}\n`)
    git('add', '.')
    git('commit', '-q', '-m', 'ci: record the baseline', '-m', 'Commits before it are not checked.')
  })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  const run = (cmd, args) => spawnSync(cmd, args, { cwd: dir, encoding: 'utf8' })

  test('the commit-msg hook refuses a bad message and takes a good one', () => {
    expect(run('git', ['config', 'core.hooksPath', '.githooks']).status).toBe(0)
    fs.writeFileSync(path.join(dir, 'a.txt'), 'a')
    run('git', ['add', 'a.txt'])
    const bad = run('git', ['commit', '-q', '-m', 'added a file'])
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain('no body')
    expect(run('git', ['commit', '-q', '-m', 'test: add a file', '-m', 'Because.']).status).toBe(0)
  })

  test('.ci/check-commits.sh checks only the commits after the baseline', () => {
    const ok = run('bash', ['.ci/check-commits.sh'])
    expect(ok.stdout).toContain('1 commit messages checked')
    expect(ok.status).toBe(0)
    fs.writeFileSync(path.join(dir, 'b.txt'), 'b')
    run('git', ['add', 'b.txt'])
    run('git', ['commit', '-q', '--no-verify', '-m', 'added b'])
    const bad = run('bash', ['.ci/check-commits.sh'])
    expect(bad.status).toBe(1)
    expect(bad.stdout).toContain('breaks the commit convention')
  })
})
