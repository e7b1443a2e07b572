import { JsonStreamError } from './errors.ts'

/**
 * Splits a byte stream of concatenated JSON texts into whole messages.
 *
 * OVSDB (RFC 7047) sends JSON-RPC messages back to back with no newline or length
 * framing, so a reader must find where each top-level value ends. The splitter tracks
 * bracket depth and string/escape state byte by byte; the structural characters it
 * looks at are ASCII and never occur inside a multi-byte UTF-8 sequence, so a chunk
 * boundary may fall anywhere, even inside a character.
 *
 * @example
 * const split = new JsonStreamSplitter()
 * for (const msg of split.push(Buffer.from('{"id":1}{"id"'))) handle(msg) // {"id":1}
 * for (const msg of split.push(Buffer.from(':2}'))) handle(msg)          // {"id":2}
 */
export class JsonStreamSplitter {
  private pending: Buffer[] = []
  private depth = 0
  private inString = false
  private escaped = false
  private pendingBytes = 0

  constructor(private readonly maxMessageBytes = 64 * 1024 * 1024) {}

  /** Feeds one chunk; returns the messages it completed, parsed, in order. */
  push(chunk: Buffer): unknown[] {
    const out: unknown[] = []
    let start = 0
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]
      if (this.inString) {
        if (this.escaped) this.escaped = false
        else if (c === BACKSLASH) this.escaped = true
        else if (c === QUOTE) this.inString = false
        continue
      }
      if (this.depth === 0) {
        if (c === SPACE || c === TAB || c === LF || c === CR) {
          start = i + 1
          continue
        }
        if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
          throw new JsonStreamError(`unexpected byte 0x${(c ?? 0).toString(16)} between messages`)
        }
      }
      if (c === QUOTE) this.inString = true
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) this.depth++
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        this.depth--
        if (this.depth === 0) {
          const tail = chunk.subarray(start, i + 1)
          const bytes = this.pending.length === 0 ? tail : Buffer.concat([...this.pending, tail])
          this.pending = []
          this.pendingBytes = 0
          start = i + 1
          out.push(parse(bytes))
        }
      }
    }
    if (start < chunk.length && this.depth > 0) {
      this.pending.push(chunk.subarray(start))
      this.pendingBytes += chunk.length - start
      if (this.pendingBytes > this.maxMessageBytes) {
        throw new JsonStreamError(`message exceeds ${this.maxMessageBytes} bytes`)
      }
    }
    return out
  }

  /** Forgets any partial message (after a reconnect). */
  reset(): void {
    this.pending = []
    this.pendingBytes = 0
    this.depth = 0
    this.inString = false
    this.escaped = false
  }
}

function parse(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'))
  } catch (err) {
    throw new JsonStreamError(`invalid JSON message: ${(err as Error).message}`)
  }
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const SPACE = 0x20
const TAB = 0x09
const LF = 0x0a
const CR = 0x0d
