'use strict'

// Builds <package>/dist/, the self-contained code of one of this
// repository's npm packages (@chopper/appserver-lib, @chopper/client):
// `npm pack` runs this (or the package's scripts/build.js) as `prepack`, in
// the package's folder, and `postpack` (with --clean) removes dist/ again.
//
// A package requires shared modules from ../core/. A tarball of the folder
// alone would be broken, so this copies the package folder and every repository
// file it reaches through relative requires into dist/, at the same paths
// relative to the repository root (dist/appserver-lib/index.js,
// dist/core/keyspace.js, ...). The copies are byte for byte: `../core/x` from
// dist/appserver-lib/ resolves to dist/core/x exactly as it does in the
// repository, so nothing is rewritten and stack traces name the same lines.
//
// It also checks package.json against what the copied code requires: every
// third-party package must be listed in `dependencies` with the root
// package.json's range (the versions the repository's tests run against),
// and nothing listed may go unused (@types/* packages are for index.d.ts).
// No dependencies of its own.

const fs = require('node:fs')
const path = require('node:path')
const { builtinModules } = require('node:module')

const REPO_ROOT = path.resolve(__dirname, '..')

const builtins = new Set(builtinModules)
// Literal requires only: the walk must see every module the package loads.
const REQUIRE = /\brequire\s*\(\s*(['"])([^'"]+)\1\s*\)/g
const DYNAMIC_REQUIRE = /\brequire\s*\(\s*(?!['"])/

class BuildError extends Error {
  constructor (message) {
    super(message)
    this.name = 'BuildError'
    this.code = 'CHOPPER_ERR_BUILD'
  }
}

/** Resolve a relative require the way Node does for our sources (file, .js, .json, dir/index.js). */
function resolveRelative (from, spec) {
  const base = path.resolve(path.dirname(from), spec)
  for (const candidate of [base, base + '.js', base + '.json', path.join(base, 'index.js')]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate
  }
  throw new BuildError(`${path.relative(REPO_ROOT, from)}: cannot resolve require('${spec}')`)
}

/** Package name of a bare specifier: `pino`, `@scope/name`, `express/lib/x` -> `express`. */
function packageName (spec) {
  const parts = spec.split('/')
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/**
 * Walk relative requires from `entry`.
 * @returns {{ files: string[], packages: Map<string, string[]> }} absolute paths of
 *   every repository file reached, and each third-party package with the files requiring it
 */
function collect (entry) {
  const files = new Set()
  const packages = new Map()
  const queue = [entry]
  while (queue.length > 0) {
    const file = queue.shift()
    if (files.has(file)) continue
    const rel = path.relative(REPO_ROOT, file)
    if (rel.startsWith('..') || path.isAbsolute(rel) || rel.split(path.sep).includes('node_modules')) {
      throw new BuildError(`${rel}: only files of this repository (outside node_modules) can be bundled`)
    }
    files.add(file)
    if (!file.endsWith('.js')) continue
    const source = fs.readFileSync(file, 'utf8')
    if (DYNAMIC_REQUIRE.test(source)) throw new BuildError(`${rel}: a require() without a string literal cannot be followed`)
    for (const [, , spec] of source.matchAll(REQUIRE)) {
      if (spec.startsWith('.')) {
        queue.push(resolveRelative(file, spec))
      } else if (!spec.startsWith('node:') && !builtins.has(spec)) {
        const name = packageName(spec)
        if (!packages.has(name)) packages.set(name, [])
        packages.get(name).push(rel)
      }
    }
  }
  return { files: [...files].sort(), packages }
}

/** Fail unless `dependencies` lists exactly the packages the code requires, at the root's ranges. */
function checkDependencies (packages, pkg, rootPkg, name = pkg.name) {
  const deps = pkg.dependencies || {}
  const rootDeps = { ...rootPkg.devDependencies, ...rootPkg.dependencies }
  const faults = []
  for (const [name, by] of packages) {
    if (!Object.hasOwn(deps, name)) faults.push(`${name} is required by ${by.join(', ')} but not listed in dependencies`)
  }
  for (const [name, range] of Object.entries(deps)) {
    if (name.startsWith('@types/')) continue
    if (!packages.has(name)) faults.push(`${name} is listed in dependencies but nothing in the package requires it`)
    else if (rootDeps[name] !== range) faults.push(`${name}: dependencies has ${range}, the root package.json ${rootDeps[name] || 'nothing'}; keep them equal so the package runs what the tests ran`)
  }
  if (faults.length > 0) throw new BuildError(`${name} package.json dependencies:\n  ` + faults.join('\n  '))
}

/** Remove `pkgDir`/dist/. */
function clean (pkgDir) {
  fs.rmSync(path.join(pkgDir, 'dist'), { recursive: true, force: true })
}

/** Build `pkgDir`/dist/; returns the repository-relative paths copied and the third-party packages required. */
function build (pkgDir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'))
  const rootPkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8'))
  const { files, packages } = collect(path.join(pkgDir, 'index.js'))
  checkDependencies(packages, pkg, rootPkg)
  clean(pkgDir)
  const dist = path.join(pkgDir, 'dist')
  for (const file of files) {
    const target = path.join(dist, path.relative(REPO_ROOT, file))
    fs.mkdirSync(path.dirname(target), { recursive: true })
    fs.copyFileSync(file, target)
  }
  const main = path.resolve(pkgDir, pkg.main)
  if (!fs.existsSync(main)) throw new BuildError(`package.json main ${pkg.main} was not built`)
  return { files: files.map((f) => path.relative(REPO_ROOT, f)), packages: [...packages.keys()].sort() }
}

/** A package's scripts/build.js: `build`, or `--clean`. Reports on stderr; sets the exit code. */
function main (pkgDir, argv = process.argv) {
  const name = path.basename(pkgDir)
  try {
    if (argv.includes('--clean')) {
      clean(pkgDir)
    } else {
      const { files, packages } = build(pkgDir)
      // stderr: `npm pack --json` prints its report on stdout.
      process.stderr.write(`${name}: dist/ holds ${files.length} files (${files.join(', ')}); requires ${packages.join(', ')}\n`)
    }
  } catch (err) {
    process.stderr.write(`${name} build failed: ${err.message}\n`)
    process.exitCode = 1
  }
}

module.exports = { build, clean, collect, checkDependencies, main }

// `node ../cli/package-build.js [--clean]` from a package's folder (its npm scripts).
if (require.main === module) main(process.cwd())
