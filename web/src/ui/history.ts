// Trace history: a one-shot replay of a session's stored events from its
// start, so trace mode also lists what happened before the page opened.
// It opens its own WebSocket, subscribes with `since` just before the
// session's creation and no snapshot, takes the replayed events (the ack
// says exactly how many) and closes; the live subscription is untouched.
import type { RawEnvelope } from '../client/index';
import { api } from './api';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** The millisecond time of a prefixed ULID ("sess_01J…"), 0 if it is not one. */
export function ulidTime(id: string): number {
  const u = id.slice(id.indexOf('_') + 1).toUpperCase();
  if (u.length < 10) return 0;
  let t = 0;
  for (let i = 0; i < 10; i++) {
    const v = CROCKFORD.indexOf(u[i]);
    if (v < 0) return 0;
    t = t * 32 + v;
  }
  return t;
}

/** An event id that sorts before every event of a session created at ms. */
export function cursorBefore(ms: number): string {
  let t = Math.max(0, Math.floor(ms));
  let s = '';
  for (let i = 0; i < 10; i++) {
    s = CROCKFORD[t % 32] + s;
    t = Math.floor(t / 32);
  }
  return 'evt_' + s + '0'.repeat(16);
}

export interface History {
  events: RawEnvelope[];
  /** The server no longer holds some streaming events of the range. */
  gap: boolean;
}

/** Replays the session's events from its start; rejects with the server's code. */
export async function loadHistory(sessionId: string, includeWorkers: boolean, timeoutMs = 30_000): Promise<History> {
  const start = ulidTime(sessionId);
  if (!start) throw new Error('not a session id');
  const info = await api.attach(sessionId);
  const ws = new WebSocket(api.streamUrl(info.ws_url));
  return new Promise<History>((resolve, reject) => {
    const events: RawEnvelope[] = [];
    let left = -1;
    let gap = false;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.onclose = null;
      ws.close();
      if (err) reject(err);
      else resolve({ events, gap });
    };
    const timer = setTimeout(() => finish(new Error('timed out')), timeoutMs);
    ws.onopen = () =>
      ws.send(
        JSON.stringify({
          type: 'subscribe',
          filter: { event_types: null, actors: null, include_worker_sessions: includeWorkers },
          since: cursorBefore(start - 1000),
          snapshot: false,
        }),
      );
    ws.onclose = () => finish(new Error('the connection closed'));
    ws.onerror = () => finish(new Error('the connection failed'));
    ws.onmessage = (m) => {
      let f: { type?: string; [k: string]: unknown };
      try {
        f = JSON.parse(String(m.data));
      } catch {
        return;
      }
      switch (f.type) {
        case 'subscribe_ack':
          gap = f.streaming_gap === true;
          left = typeof f.replay_event_count === 'number' ? f.replay_event_count : 0;
          if (left === 0) finish();
          break;
        case 'subscribe_error':
          finish(new Error(String(f.code ?? 'subscribe_error')));
          break;
        case 'event':
          if (left > 0 && f.event && typeof f.event === 'object') {
            events.push(f.event as RawEnvelope);
            if (--left === 0) finish();
          }
          break;
        case 'ping':
          ws.send(JSON.stringify({ type: 'pong', nonce: f.nonce }));
          break;
      }
    };
  });
}

/** The union of two event lists by id, in id order. */
export function mergeById(a: readonly RawEnvelope[], b: readonly RawEnvelope[]): RawEnvelope[] {
  const byId = new Map<string, RawEnvelope>();
  for (const e of a) byId.set(e.id, e);
  for (const e of b) if (!byId.has(e.id)) byId.set(e.id, e);
  return [...byId.values()].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
}
