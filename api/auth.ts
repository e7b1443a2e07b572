/**
 * Bearer-token authentication shared by the HTTP and gRPC ingress: the same tokens, the
 * same lookup (`api/http/tokens.ts`), the same `Authorization: Bearer <token>` syntax.
 */
import { createTokenLookup, type Principal, type Tokens } from './http/tokens.ts'

export type { Principal, Tokens }

/**
 * Builds a function from an `Authorization` value (header or gRPC metadata) to the
 * principal it authenticates, or undefined when it is missing, malformed or unknown.
 *
 * @example
 * const authenticate = bearerAuthenticator(tokens)
 * authenticate('Bearer 3f1c…') // { kind: 'operator' }
 */
export function bearerAuthenticator(
  tokens: Tokens,
): (authorization: string | undefined) => Principal | undefined {
  const lookup = createTokenLookup(tokens)
  return function authenticate(authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')
    return match?.[1] ? lookup(match[1]) : undefined
  }
}

/** The tenant a principal is confined to; undefined for an operator. */
export function tenantOf(principal: Principal): string | undefined {
  return principal.kind === 'tenant' ? principal.tenant : undefined
}
