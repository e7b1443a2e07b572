/**
 * Bearer tokens for the HTTP API: who may call it and as whom.
 *
 * An operator token sees and changes everything; a tenant token sees and changes only
 * its own tenant's resource groups and managed resources. Tokens come from a JSON file
 * (`HYDRAZINE_TOKENS_FILE`) or, embedded, from the single operator token in
 * `<dataDir>/operator-token`.
 *
 * @example tokens file
 * { "operator": ["3f1c…"], "tenants": { "tenant-a": ["9a7e…"] } }
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import * as v from 'valibot'
import { ConfigError } from '../../lib/errors.ts'
import { ADMIN_TENANT } from '../../lib/model/admin-network.ts'
import { Rfc1123Label } from '../../lib/model/objects.ts'

export interface Tokens {
  readonly operator: readonly string[]
  readonly tenants: Readonly<Record<string, readonly string[]>>
}

/** Who a request acts as once its token is recognised. */
export type Principal =
  | { readonly kind: 'operator' }
  | { readonly kind: 'tenant'; readonly tenant: string }

const Token = v.pipe(v.string(), v.minLength(16, 'a token must have at least 16 characters'))

export const TokensFile = v.strictObject({
  operator: v.optional(v.array(Token), []),
  tenants: v.optional(
    v.record(
      v.pipe(
        Rfc1123Label,
        v.check((t) => t !== ADMIN_TENANT, `${ADMIN_TENANT} is reserved for the admin network`),
      ),
      v.array(Token),
    ),
    {},
  ),
})

/** Parses a tokens document; a ConfigError names every bad field. */
export function parseTokens(input: unknown): Tokens {
  const result = v.safeParse(TokensFile, input)
  if (!result.success) {
    const issues = result.issues.map((i) => ({
      path: v.getDotPath(i) ?? '(file)',
      message: i.message,
    }))
    throw new ConfigError(
      `invalid tokens file: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      issues,
    )
  }
  return result.output
}

/**
 * Loads the tokens: from `tokensFile` when given, else the embedded default (just the
 * operator token in `<dataDir>/operator-token`).
 */
export async function loadTokens(options: {
  readonly tokensFile?: string
  readonly dataDir: string
}): Promise<Tokens> {
  if (options.tokensFile) {
    const text = await readFile(options.tokensFile, 'utf8')
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      throw new ConfigError(`tokens file ${options.tokensFile} is not JSON: ${String(error)}`)
    }
    return parseTokens(json)
  }
  const operator = (await readFile(join(options.dataDir, 'operator-token'), 'utf8')).trim()
  return parseTokens({ operator: [operator] })
}

const digest = (token: string) => createHash('sha256').update(token).digest()

/** Every known token's SHA-256 with its principal. */
function knownTokens(tokens: Tokens): { hash: Buffer; principal: Principal }[] {
  return [
    ...tokens.operator.map((t) => ({ hash: digest(t), principal: { kind: 'operator' } as const })),
    ...Object.entries(tokens.tenants).flatMap(([tenant, list]) =>
      list.map((t) => ({ hash: digest(t), principal: { kind: 'tenant', tenant } as const })),
    ),
  ]
}

/** A token's SHA-256 in hex: what a UI session keeps of the token it was opened with. */
export function tokenDigest(token: string): string {
  return digest(token).toString('hex')
}

/**
 * Whom each known token (by `tokenDigest`) stands for now: a UI session is over when its
 * token is gone or now stands for another principal (`samePrincipal`).
 */
export function principalsByDigest(tokens: Tokens): ReadonlyMap<string, Principal> {
  return new Map(
    knownTokens(tokens).map(({ hash, principal }) => [hash.toString('hex'), principal]),
  )
}

/** Whether two principals are the same operator, or the same tenant. */
export function samePrincipal(a: Principal, b: Principal): boolean {
  return a.kind === b.kind && (a.kind === 'operator' || a.tenant === (b as typeof a).tenant)
}

/**
 * Builds the lookup from a presented token to its principal. Tokens are compared as
 * SHA-256 digests with `timingSafeEqual`, against every known token, so neither the
 * content nor the position of a match shows in the time taken.
 */
export function createTokenLookup(tokens: Tokens): (presented: string) => Principal | undefined {
  const known = knownTokens(tokens)
  return function lookupToken(presented) {
    const hash = digest(presented)
    let found: Principal | undefined
    for (const entry of known) {
      if (timingSafeEqual(hash, entry.hash) && !found) found = entry.principal
    }
    return found
  }
}
