/**
 * Every `.proto` of Hydrazine's own obeys buf's DEFAULT lint rules (`lint.ts`), and the
 * lint catches each kind of breach.
 */
import t from 'tap'
import { lintProto, lintProtoDir } from './lint.ts'

t.test("Hydrazine's protos pass the lint", async (t) => {
  t.same(await lintProtoDir(), [])
})

t.test('each rule reports its breach', async (t) => {
  const cases: [string, string, string, RegExp][] = [
    [
      'package not versioned',
      'hydrazine/hydrazine.proto',
      'package hydrazine;',
      /does not end in a version/,
    ],
    [
      'package in another folder',
      'proto/x.proto',
      'package hydrazine.v1;',
      /must live in hydrazine\/v1\//,
    ],
    [
      'file name',
      'hydrazine/v1/MyFile.proto',
      'package hydrazine.v1;',
      /file is not lower_snake_case/,
    ],
    [
      'message name',
      'a/v1/a.proto',
      'package a.v1; message bad_name {}',
      /message bad_name is not PascalCase/,
    ],
    [
      'field name',
      'a/v1/a.proto',
      'package a.v1; message M { string hostMac = 1; }',
      /field M.hostMac is not lower_snake_case/,
    ],
    [
      'enum value prefix',
      'a/v1/a.proto',
      'package a.v1; enum Phase { PHASE_UNSPECIFIED = 0; READY = 1; }',
      /READY is not prefixed PHASE_/,
    ],
    [
      'enum zero value',
      'a/v1/a.proto',
      'package a.v1; enum Phase { PHASE_NONE = 0; }',
      /zero value must be PHASE_UNSPECIFIED/,
    ],
    [
      'enum value case',
      'a/v1/a.proto',
      'package a.v1; enum Phase { PHASE_UNSPECIFIED = 0; Phase_ready = 1; }',
      /is not UPPER_SNAKE_CASE/,
    ],
    ['service suffix', 'a/v1/a.proto', 'package a.v1; service Agent {}', /is not suffixed Service/],
    [
      'request and response names',
      'a/v1/a.proto',
      'package a.v1; message Req {} message GetResponse {} service AService { rpc Get(Req) returns (GetResponse); }',
      /request must be GetRequest, not Req/,
    ],
    [
      'shared messages',
      'a/v1/a.proto',
      'package a.v1; message GetRequest {} message GetResponse {} service AService { rpc Get(GetRequest) returns (GetResponse); rpc AServiceGet(GetRequest) returns (GetResponse); }',
      /shares GetRequest with rpc AService.Get/,
    ],
  ]
  for (const [name, path, source, problem] of cases) {
    const problems = lintProto(path, `syntax = "proto3"; ${source}`)
    t.ok(
      problems.some((p) => problem.test(p)),
      `${name}: ${problems.join('; ')}`,
    )
  }
  t.same(
    lintProto(
      'a/v1/a.proto',
      'syntax = "proto3"; package a.v1; message M { optional string host_ip = 1; }',
    ),
    [],
    'proto3 optional fields are fine',
  )
})
