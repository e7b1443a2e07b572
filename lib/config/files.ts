/**
 * What the configuration's checks share: the error naming one variable, and the PEM files
 * some variables name (read and parsed at start-up, so a bad one stops it at once).
 */
import { createPrivateKey, X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { ConfigError } from '../errors.ts'

/** The ConfigError of one variable: `invalid configuration: <variable>: <message>`. */
export function invalid(path: string, message: string): never {
  throw new ConfigError(`invalid configuration: ${path}: ${message}`, [{ path, message }])
}

/** Reads and parses one PEM file, or throws ConfigError naming `variable`. */
export function pemFile<T>(
  variable: string,
  path: string,
  parse: (pem: string) => T,
  what: string,
): T {
  let pem = ''
  try {
    pem = readFileSync(path, 'utf8')
  } catch (error) {
    invalid(variable, `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`)
  }
  try {
    return parse(pem)
  } catch {
    return invalid(variable, `${path} is not ${what}`)
  }
}

/** `HYDRAZINE_TLS_CERT` and `_KEY`: both or neither, readable, and the key the cert's. */
export function tlsFiles(
  certFile: string | undefined,
  keyFile: string | undefined,
): { certFile: string; keyFile: string } | undefined {
  if (certFile === undefined && keyFile === undefined) return undefined
  if (certFile === undefined || keyFile === undefined) {
    const missing = certFile === undefined ? 'HYDRAZINE_TLS_CERT' : 'HYDRAZINE_TLS_KEY'
    invalid(missing, 'required when the other of HYDRAZINE_TLS_CERT / HYDRAZINE_TLS_KEY is set')
  }
  const cert = pemFile(
    'HYDRAZINE_TLS_CERT',
    certFile,
    (pem) => new X509Certificate(pem),
    'a PEM certificate',
  )
  const key = pemFile('HYDRAZINE_TLS_KEY', keyFile, (pem) => createPrivateKey(pem), 'a PEM key')
  if (!cert.checkPrivateKey(key)) {
    invalid('HYDRAZINE_TLS_KEY', `${keyFile} is not the key of ${certFile}`)
  }
  return { certFile: resolve(certFile), keyFile: resolve(keyFile) }
}
