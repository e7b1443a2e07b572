/** The API tokens the ingress tests use: an operator and two tenants. */
export const OPERATOR = 'operator-token-0123456789abcdef'
export const TENANT_A = 'tenant-a-token-0123456789abcdef'
export const TENANT_B = 'tenant-b-token-0123456789abcdef'

/** The tokens file those tokens make (`HYDRAZINE_TOKENS_FILE`'s shape). */
export const TEST_TOKENS = {
  operator: [OPERATOR],
  tenants: { 'tenant-a': [TENANT_A], 'tenant-b': [TENANT_B] },
}
