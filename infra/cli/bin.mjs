#!/usr/bin/env node
// `hz` (package.json "bin"): runs infra/cli/main.ts through tsx, as `npm start` runs the controller.
import { register } from 'tsx/esm/api'

register()
const { runCli } = await import('./main.ts')
process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
})
