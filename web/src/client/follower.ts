// One live subscription to a session's stream, the TypeScript twin of
// the Go client's Follow (client/follow.go): attach, subscribe, fold into
// a View, answer pings, reconnect with the cursor, resync from a snapshot
// when the server cannot replay.

import { Api, ApiError } from './api';
import { View } from './view';
import {
  PRESETS, type PresetName, type RawEnvelope, type Snapshot, type SubscribeAck, type SubscribeFrame, type Filter,
} from './protocol.gen';

/** The connection's state, for a banner. */
export type ConnState = 'connecting' | 'live' | 'reconnecting' | 'closed';

/** What came with a state change. */
export interface StateInfo {
  /** 'live' after a resume: how many events were replayed to catch up. */
  replayed?: number;
  /** 'live' after a fresh snapshot replaced the view: why (cursor_expired, replay_too_large, invalid_cursor, streaming_gap). */
  resynced?: string;
  /** 'live' on a reconnect rather than the first attach. */
  resumed?: boolean;
  /** 'reconnecting': the WebSocket close code (1008 too slow or heartbeat, 1001 shutdown, 1006 lost). */
  closeCode?: number;
  /** 'reconnecting': the close reason's code (client_too_slow, storage_failure, resync, owner_changed, server_shutdown, ...). */
  closeReason?: string;
  /** 'reconnecting': consecutive failed attempts so far. */
  attempt?: number;
  /** 'reconnecting': the wait before the next attempt. */
  delayMs?: number;
  /** What went wrong; on 'closed', the permanent refusal (session_not_found, invalid_filter: ...). */
  error?: string;
}

/** What to subscribe to. */
export interface FollowerFilter {
  /** A preset (default preset:chat). Ignored when types is set. */
  preset?: PresetName;
  /** Explicit event types (either family). */
  types?: string[];
  /** Only events of these actors. */
  actors?: string[];
  /** Also the events of every worker session below this one (spec §7.2). */
  include_worker_sessions?: boolean;
}

export interface FollowerOptions {
  api: Api;
  sessionId: string;
  filter?: FollowerFilter;
  /** The view to fold into (default a new one). */
  view?: View;
  /** The WebSocket constructor (default globalThis.WebSocket). */
  WebSocket?: typeof WebSocket;
  /** Resume after this event id instead of starting with a snapshot. */
  since?: string;
  /** Reconnect waits: exponential from min to max with jitter (100 ms, 5 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Drop and resume a connection that received nothing for this long
   * (the server pings every 30 s when idle; default 100 s; 0: never).
   */
  idleTimeoutMs?: number;
  /** The jitter source, in [0, 1) (default Math.random). */
  random?: () => number;
}

/**
 * The wait before reconnect attempt n (1-based): exponential from min,
 * capped at max, with jitter between half and all of it (the Go client's
 * backoff).
 */
export function backoffDelay(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  let d = minMs * 2 ** Math.min(Math.max(attempt - 1, 0), 20);
  if (d > maxMs || d <= 0) d = maxMs;
  return d / 2 + random() * (d / 2);
}

/** The subscribe filter for the wire: a preset name when that says it all. */
export function wireFilter(f: FollowerFilter): Filter | PresetName {
  const preset = f.preset ?? 'preset:chat';
  if (!f.types && !f.actors && !f.include_worker_sessions) return preset;
  return {
    event_types: f.types ? [...f.types] : [...PRESETS[preset]],
    actors: f.actors ? [...f.actors] : null,
    include_worker_sessions: f.include_worker_sessions === true,
  };
}

const RESYNC = new Set(['cursor_expired', 'replay_too_large', 'invalid_cursor']);

/** Close reasons after which the follower resumes at once, live or not: the server asks for a replay. */
const RESUME_AT_ONCE = new Set(['client_too_slow', 'storage_failure', 'resync', 'owner_changed']);

/** A decoded close reason's code (the server sends compact JSON). */
function closeReasonCode(reason: string): string {
  try {
    const r = JSON.parse(reason) as { code?: unknown };
    return typeof r.code === 'string' ? r.code : '';
  } catch {
    return '';
  }
}

/** Whether v is an envelope the View can take (the Go decoder's checks). */
function isEnvelope(v: unknown): v is RawEnvelope {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const e = v as Record<string, unknown>;
  const strOrAbsent = (k: string) => e[k] === undefined || e[k] === null || typeof e[k] === 'string';
  return strOrAbsent('id') && strOrAbsent('type') && strOrAbsent('session_id') && strOrAbsent('turn_id') &&
    strOrAbsent('ts') && strOrAbsent('actor');
}

interface Conn {
  ws: WebSocket | undefined;
  live: boolean;
  replayLeft: number; // events before live; -1 before the ack
  replayed: number;
  resumed: boolean;
  snapshot: boolean; // the last subscribe asked for a snapshot
  lastRx: number;
}

/**
 * One WebSocket subscription with reconnect. Callbacks run synchronously
 * as frames arrive; onChange fires after every frame that changed the
 * view (batch renders to one per animation frame).
 */
export class Follower {
  readonly view: View;
  readonly sessionId: string;
  private readonly api: Api;
  private readonly WS: typeof WebSocket;
  private filter: FollowerFilter;
  private readonly minBackoff: number;
  private readonly maxBackoff: number;
  private readonly idleTimeout: number;
  private readonly random: () => number;
  private _state: ConnState = 'closed';
  private started = false;
  private stopped = false;
  private fresh: boolean;
  private resyncReason = '';
  private attempt = 0;
  private everLive = false;
  private conn: Conn | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private idleTimer: ReturnType<typeof setInterval> | undefined;
  private readonly eventFns = new Set<(e: RawEnvelope) => void>();
  private readonly stateFns = new Set<(s: ConnState, info: StateInfo) => void>();
  private readonly changeFns = new Set<() => void>();

  constructor(opts: FollowerOptions) {
    this.api = opts.api;
    this.sessionId = opts.sessionId;
    this.view = opts.view ?? new View();
    const WS = opts.WebSocket ?? (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;
    if (!WS) throw new Error('metis: no WebSocket implementation (in Node 20, run with --experimental-websocket)');
    this.WS = WS;
    this.filter = { ...(opts.filter ?? {}) };
    this.minBackoff = opts.minBackoffMs ?? 100;
    this.maxBackoff = opts.maxBackoffMs ?? 5000;
    this.idleTimeout = opts.idleTimeoutMs ?? 100_000;
    this.random = opts.random ?? Math.random;
    this.fresh = !opts.since;
    if (opts.since) this.view.setCursor(opts.since);
  }

  get state(): ConnState {
    return this._state;
  }

  /** Connects; a no-op once started. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.setState('connecting', {});
    if (this.idleTimeout > 0) {
      this.idleTimer = setInterval(() => this.checkIdle(), Math.max(10, Math.floor(this.idleTimeout / 4)));
    }
    void this.connect();
  }

  /** Closes for good: state 'closed', no more callbacks. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.idleTimer);
    const c = this.conn;
    this.conn = undefined;
    if (c?.ws) closeQuietly(c.ws, 1000, 'stopped');
    this.setState('closed', {});
    this.eventFns.clear();
    this.stateFns.clear();
    this.changeFns.clear();
  }

  /**
   * Sends the WebSocket cancel frame for turnId (default the view's turn
   * in flight). Its effect arrives as events, never as a reply. Returns
   * false when not live or no turn is known (use Api.cancelTurn then).
   */
  cancel(turnId?: string, reason?: string): boolean {
    const id = turnId ?? (this.view.turn.status === 'in_flight' ? this.view.turn.id : '');
    const ws = this.conn?.ws;
    if (!id || !ws || !this.conn?.live || ws.readyState !== 1) return false;
    const frame: Record<string, string> = { type: 'cancel', turn_id: id };
    if (reason) frame['reason'] = reason;
    ws.send(JSON.stringify(frame));
    return true;
  }

  /** Re-subscribes with a new filter on a new connection, from a fresh snapshot. */
  setFilter(f: FollowerFilter): void {
    this.filter = { ...f };
    this.fresh = true;
    if (this.started && !this.stopped) this.restart(0);
  }

  /** Drops the connection and resumes with the cursor at once. */
  reconnect(): void {
    if (this.started && !this.stopped) this.restart(0);
  }

  onEvent(fn: (e: RawEnvelope) => void): () => void {
    this.eventFns.add(fn);
    return () => this.eventFns.delete(fn);
  }

  onState(fn: (s: ConnState, info: StateInfo) => void): () => void {
    this.stateFns.add(fn);
    return () => this.stateFns.delete(fn);
  }

  onChange(fn: () => void): () => void {
    this.changeFns.add(fn);
    return () => this.changeFns.delete(fn);
  }

  private setState(s: ConnState, info: StateInfo): void {
    this._state = s;
    for (const fn of [...this.stateFns]) fn(s, info);
  }

  private changed(): void {
    for (const fn of [...this.changeFns]) fn();
  }

  /** Ends the current connection (if any) and connects again after delay ms. */
  private restart(delay: number, info: StateInfo = {}): void {
    const c = this.conn;
    this.conn = undefined;
    if (c?.ws) closeQuietly(c.ws, 1000, 'reconnecting');
    clearTimeout(this.timer);
    this.setState('reconnecting', { ...info, attempt: this.attempt, delayMs: delay });
    this.timer = setTimeout(() => void this.connect(), delay);
  }

  /** A connection failed or dropped: back off (or not, after a 1008 on a live stream), then connect again. */
  private dropped(info: StateInfo, wasLive: boolean): void {
    if (this.stopped) return;
    this.attempt++;
    let delay = backoffDelay(this.attempt, this.minBackoff, this.maxBackoff, this.random);
    // "Too slow", "storage failure", "resync", "owner changed" (cluster mode): resume at once, with the cursor.
    if ((info.closeCode === 1008 && wasLive) || RESUME_AT_ONCE.has(info.closeReason ?? '')) delay = 0;
    this.restart(delay, info);
  }

  private fail(error: string): void {
    if (this.stopped) return;
    const c = this.conn;
    this.conn = undefined;
    if (c?.ws) closeQuietly(c.ws, 1000, 'refused');
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.idleTimer);
    this.setState('closed', { error });
  }

  private checkIdle(): void {
    const c = this.conn;
    if (c?.ws && Date.now() - c.lastRx > this.idleTimeout) {
      this.dropped({ error: 'no frame from the server for too long' }, c.live);
    }
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const conn: Conn = { ws: undefined, live: false, replayLeft: -1, replayed: 0, resumed: this.everLive, snapshot: false, lastRx: Date.now() };
    this.conn = conn;
    let url: string;
    try {
      const a = await this.api.attach(this.sessionId);
      url = this.api.streamUrl(a.ws_url);
    } catch (e) {
      if (this.conn !== conn) return;
      if (e instanceof ApiError && e.status === 404) {
        this.fail('session_not_found');
        return;
      }
      this.conn = undefined;
      this.dropped({ error: e instanceof Error ? e.message : String(e) }, false);
      return;
    }
    if (this.conn !== conn || this.stopped) return;
    let ws: WebSocket;
    try {
      ws = new this.WS(url);
    } catch (e) {
      this.conn = undefined;
      this.dropped({ error: e instanceof Error ? e.message : String(e) }, false);
      return;
    }
    conn.ws = ws;
    conn.lastRx = Date.now();
    ws.onopen = () => {
      if (this.conn === conn) this.subscribe(conn);
    };
    ws.onmessage = (m: MessageEvent) => {
      if (this.conn !== conn) return;
      conn.lastRx = Date.now();
      if (typeof m.data === 'string') this.frame(conn, m.data);
    };
    ws.onclose = (c: CloseEvent) => {
      if (this.conn !== conn) return;
      this.conn = undefined;
      this.dropped({ closeCode: c.code, closeReason: closeReasonCode(c.reason) }, conn.live);
    };
    ws.onerror = () => {
      // A close event follows; it carries what is known.
    };
  }

  private subscribe(conn: Conn): void {
    const since = !this.fresh && this.view.lastEventId !== '' ? this.view.lastEventId : null;
    const f: SubscribeFrame = { type: 'subscribe', filter: wireFilter(this.filter), since, snapshot: this.fresh };
    conn.replayLeft = -1;
    conn.snapshot = this.fresh;
    conn.ws?.send(JSON.stringify(f));
  }

  private goLive(conn: Conn): void {
    conn.live = true;
    this.everLive = true;
    this.attempt = 0;
    const info: StateInfo = { resumed: conn.resumed };
    if (this.resyncReason) {
      info.resynced = this.resyncReason;
      this.resyncReason = '';
    } else if (conn.resumed && !conn.snapshot) {
      info.replayed = conn.replayed;
    }
    this.setState('live', info);
  }

  private frame(conn: Conn, data: string): void {
    let f: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(data);
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return;
      f = v as Record<string, unknown>;
    } catch {
      return; // not JSON: skipped, as the Go client does
    }
    switch (f['type']) {
      case 'subscribe_ack': {
        const ack = f as unknown as SubscribeAck;
        if (typeof ack.replay_event_count !== 'number' || ack.replay_event_count < 0) {
          this.dropped({ error: 'malformed subscribe_ack' }, false);
          return;
        }
        if (ack.streaming_gap === true) {
          // Deltas after the cursor are gone: rebuild from a snapshot.
          this.fresh = true;
          this.resyncReason = 'streaming_gap';
          this.restart(0, { error: 'streaming gap: resubscribing with a snapshot' });
          return;
        }
        conn.replayLeft = ack.replay_event_count;
        if (ack.snapshot !== true && conn.replayLeft === 0) {
          if (typeof ack.seam_event_id === 'string' && ack.seam_event_id > this.view.lastEventId) {
            this.view.setCursor(ack.seam_event_id); // resume after the seam if we drop before an event
          }
          this.goLive(conn);
        }
        return;
      }
      case 'subscribe_error': {
        const code = typeof f['code'] === 'string' ? f['code'] : '';
        if (RESYNC.has(code)) {
          this.fresh = true;
          this.resyncReason = code;
          this.subscribe(conn);
          return;
        }
        const msg = typeof f['message'] === 'string' ? f['message'] : '';
        if (code === 'internal') {
          this.dropped({ error: `${code}: ${msg}` }, false); // the server's trouble: try again
          return;
        }
        // session_not_found, invalid_filter, or a code from a newer server: retrying cannot help.
        this.fail(code === 'session_not_found' ? code : `${code}: ${msg}`);
        return;
      }
      case 'snapshot': {
        const s = f as unknown as Snapshot;
        if (typeof s.snapshot_at_event_id !== 'string') {
          this.dropped({ error: 'malformed snapshot' }, false);
          return;
        }
        this.view.applySnapshot(s);
        this.fresh = false;
        this.changed();
        this.goLive(conn);
        return;
      }
      case 'event': {
        const e = f['event'];
        if (!isEnvelope(e)) return;
        // An event at or before the cursor is one the view already holds
        // (a replay overlap): neither folded nor passed on again.
        if (!(typeof e.id === 'string' && e.id !== '' && e.id <= this.view.lastEventId)) {
          const before = this.view.version;
          this.view.apply(e);
          for (const fn of [...this.eventFns]) fn(e);
          if (this.view.version !== before) this.changed();
        }
        if (conn.replayLeft > 0) {
          conn.replayed++;
          if (--conn.replayLeft === 0) this.goLive(conn);
        }
        return;
      }
      case 'ping': {
        const nonce = typeof f['nonce'] === 'string' ? f['nonce'] : '';
        conn.ws?.send(JSON.stringify({ type: 'pong', nonce }));
        return;
      }
      default:
        // pong, error (a refused frame: the connection stays open), and
        // frame types from a newer server: nothing to do.
        return;
    }
  }
}

function closeQuietly(ws: WebSocket, code: number, reason: string): void {
  ws.onopen = null;
  ws.onmessage = null;
  ws.onclose = null;
  ws.onerror = null;
  try {
    ws.close(code, reason);
  } catch {
    // already closed
  }
}
