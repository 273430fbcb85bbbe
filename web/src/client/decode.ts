// Lenient field readers that decode untrusted JSON the way Go's
// encoding/json decodes it into a struct: a missing or null field is the
// zero value, a field of the wrong type is the zero value AND an error
// (recorded in the Reader, decoding goes on), a value that is not an
// object where an object is expected is an error. The View uses them so
// that it accepts and refuses exactly what the Go client's View does.

/** A JSON value as JSON.parse returns it. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Reads the fields of one object, recording the first type error. */
export class Reader {
  err: string | undefined;
  private readonly o: Record<string, unknown>;

  /**
   * v is the object to read. undefined (no payload at all) is an error,
   * as Go fails on empty input; null is an empty object.
   */
  constructor(v: unknown, what = 'value') {
    if (v === undefined) {
      this.err = `${what}: missing`;
      this.o = {};
    } else if (v === null) {
      this.o = {};
    } else if (typeof v === 'object' && !Array.isArray(v)) {
      this.o = v as Record<string, unknown>;
    } else {
      this.err = `${what}: not an object`;
      this.o = {};
    }
  }

  fail(msg: string): void {
    this.err ??= msg;
  }

  private get(k: string): unknown {
    return Object.prototype.hasOwnProperty.call(this.o, k) ? this.o[k] : undefined;
  }

  str(k: string): string {
    const v = this.get(k);
    if (v === undefined || v === null) return '';
    if (typeof v === 'string') return v;
    this.fail(`${k}: not a string`);
    return '';
  }

  /** A *string: undefined when missing or null. */
  optStr(k: string): string | undefined {
    const v = this.get(k);
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v;
    this.fail(`${k}: not a string`);
    return undefined;
  }

  int(k: string): number {
    const v = this.get(k);
    if (v === undefined || v === null) return 0;
    if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= 2 ** 63) return v;
    this.fail(`${k}: not an integer`);
    return 0;
  }

  num(k: string): number {
    const v = this.get(k);
    if (v === undefined || v === null) return 0;
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    this.fail(`${k}: not a number`);
    return 0;
  }

  bool(k: string): boolean {
    const v = this.get(k);
    if (v === undefined || v === null) return false;
    if (typeof v === 'boolean') return v;
    this.fail(`${k}: not a boolean`);
    return false;
  }

  /** A raw JSON value (Go's json.RawMessage): undefined only when missing; null is kept. */
  raw(k: string): Json | undefined {
    return this.get(k) as Json | undefined;
  }

  /** A nested object, read with its own Reader whose errors count as ours. */
  obj(k: string): Reader {
    const v = this.get(k);
    const r = new Reader(v === undefined ? null : v, k);
    if (r.err) this.fail(r.err);
    return r;
  }

  /** Whether the field is present and not null (a Go pointer would be set). */
  present(k: string): boolean {
    const v = this.get(k);
    return v !== undefined && v !== null;
  }

  /** Merges a nested reader's error (after reading from it). */
  adopt(r: Reader): void {
    if (r.err) this.fail(r.err);
  }

  /** A list: undefined when missing or null, each element passed to fn. */
  list<T>(k: string, fn: (v: unknown, i: number) => T): T[] | undefined {
    const v = this.get(k);
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) {
      this.fail(`${k}: not a list`);
      return undefined;
    }
    return v.map(fn);
  }
}

/** Deep equality of two JSON values, object key order ignored. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao);
  if (ak.length !== Object.keys(bo).length) return false;
  return ak.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEqual(ao[k], bo[k]));
}
