/**
 * The layering rules `npm run check` enforces (`npm run check:layers`). Dependencies point
 * one way: api/ → app/ → queues/producer.ts and lib/; queues/ → functions/ → lib/.
 * Type-only imports count: a layer that needs another's types depends on it.
 */
const ABOVE_LIB = '^(app|api|queues|functions|agent|infra)/'

/**
 * What the model (lib/model/) may import: itself, and the pure helpers below, which may
 * import only the same. Anything else (a Redis client, a store, a socket, a file) is I/O.
 */
const MODEL_PURE = [
  '^lib/model/',
  '^lib/errors[.]ts$',
  '^lib/ipam/(address|errors|public-ranges)[.]ts$',
  '^lib/ovn/topology/addresses[.]ts$',
  '^node_modules/(valibot|ip-cidr)/',
  '^(net|crypto)$',
]

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import circle anywhere, type-only imports included.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'lib-imports-nothing-above-it',
      severity: 'error',
      comment: 'lib/ imports only lib/, proto/ and packages, never a folder built on it.',
      from: { path: '^lib/' },
      to: { path: ABOVE_LIB },
    },
    {
      name: 'model-does-no-io',
      severity: 'error',
      comment: 'lib/model/ is the model without I/O: it and its helpers import only MODEL_PURE.',
      from: { path: MODEL_PURE.slice(0, 4), pathNot: '[.]test[.]ts$' },
      to: { pathNot: MODEL_PURE },
    },
    {
      name: 'functions-import-only-lib',
      severity: 'error',
      comment: 'A job handler imports lib/ and packages; its wiring lives in queues/.',
      from: { path: '^functions/', pathNot: '\\.test\\.ts$' },
      to: { pathNot: '^(functions|lib|node_modules)/', dependencyTypesNot: ['core'] },
    },
    {
      name: 'functions-tests-import-only-lib-and-helpers',
      severity: 'error',
      comment: 'A test beside a handler may also use the shared test helpers.',
      from: { path: '^functions/.+\\.test\\.ts$' },
      to: {
        pathNot: '^(functions|lib|node_modules|test/helpers)/',
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'app-imports-only-lib-and-producer',
      severity: 'error',
      comment: 'The application layer imports lib/ and the queue producer, nothing else above lib.',
      from: { path: '^app/', pathNot: '\\.test\\.ts$' },
      to: {
        pathNot: '^(app|lib|node_modules)/|^queues/producer\\.ts$',
        dependencyTypesNot: ['core'],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
}
