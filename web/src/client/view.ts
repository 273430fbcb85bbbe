// The reducer: a session's state materialized from a snapshot and the
// events that follow (spec §5.4), the TypeScript twin of the Go client's
// View (client/view.go, client/apply.go). It accepts, refuses and folds
// exactly what the Go View does; tests/streaming-conformance holds both
// to the same expected states.

import { isEventType } from './protocol.gen';
import { Reader, jsonEqual, type Json } from './decode';
import { shellExitCode } from './shellresult';
import type { PendingApproval, QueuedTurn, RawEnvelope, SessionSummary, Snapshot } from './protocol.gen';

export type { Json };

/** Usage of a model call as the view keeps it. */
export interface ViewUsage {
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/**
 * One content block of a rendered message: a canonical block plus
 * partial_input, the raw tool.use_input_delta fragments accumulated until
 * tool.use_end (or message.complete) supplies the parsed input. Render
 * partial_input as text; never parse it (spec §2.2.5). Fields that do not
 * apply to the block's type are empty.
 */
export interface ViewBlock {
  type: string; // text, thinking, tool_use, tool_result ('' for a gap)
  text: string;
  thinking: string;
  signature: string;
  id: string; // tool_use
  name: string; // tool_use
  /** tool_use: the parsed input; undefined until known. */
  input?: Json;
  partial_input: string;
  tool_use_id: string; // tool_result
  content: string; // tool_result
  is_error: boolean; // tool_result
  /** image: a reference; Api.image fetches the bytes (docs/conversation.md). */
  media_type?: string;
  sha256?: string;
  size?: number;
  width?: number;
  height?: number;
  /** tool_result: the images a tool returned (read_file of an image). */
  images?: ViewBlock[];
}

/** A message being rendered. A changed message is a new object. */
export interface ViewMessage {
  id: string;
  role: string;
  session_id: string;
  turn_id: string;
  model: string;
  blocks: ViewBlock[];
  /** streaming, complete, cancelled (render "(cancelled)"), failed */
  status: string;
  stop_reason: string;
  usage?: ViewUsage;
  /**
   * The snapshot carried this streaming message without its start (the
   * server no longer held it): blocks hold only what followed. Render it
   * as incomplete; message.complete clears it.
   */
  start_missing: boolean;
}

/** A tool call's state. A changed call is a new object. */
export interface ToolCall {
  id: string;
  name: string;
  input?: Json;
  /** pending, awaiting_approval, running, completed, failed, cancelled (render struck through) */
  status: string;
  summary: string;
  result: string;
  error_class: string;
  error: string;
  /** tool.completed of a tool that changes files: the paths it changed, their unified diff, and whether the diff was cut. */
  paths?: string[];
  diff?: string;
  diff_truncated?: boolean;
  /** How long the call ran (tool.completed / tool.failed duration_ms). */
  duration_ms?: number;
  /** A foreground shell command's exit code (tool.completed exit_code); non-zero: the command failed. */
  exit_code?: number;
  /** Images an MCP tool returned (tool.completed images; data in base64 while small enough). */
  images?: { media_type: string; bytes: number; data?: string }[];
}

/** What the view knows about one turn from its events (a turn seen only in a snapshot has none). */
export interface TurnInfo {
  id: string;
  /** The turn.started event's ts. */
  started_at: string;
  /** in_flight, completed, failed, cancelled */
  status: string;
  duration_ms: number;
  /** turn.completed / turn.cancelled usage: the sum of the turn's calls. */
  usage?: ViewUsage;
  llm_calls: number;
}

/** The conversation's size against the model's window (summary, llm.call_*, context.compacted). */
export interface ContextState {
  tokens: number;
  window: number;
  /** A compaction runs (context.compacting seen, not yet compacted or failed). */
  compacting: boolean;
  /** The last compaction's outcome, for display: "" before any. */
  last: string;
}

/** The status of a tool call waiting for an answer. */
export const TOOL_AWAITING_APPROVAL = 'awaiting_approval';

/** A delegation to a worker session. A changed worker is a new object. */
export interface Worker {
  session_id: string;
  task: string;
  model: string;
  /** running, completed, failed */
  status: string;
  summary: string;
  failure_mode: string;
  cost_usd: number;
}

/** The turn in flight, or the last one. */
export interface TurnState {
  id: string;
  /** idle, in_flight, completed, failed, cancelled */
  status: string;
  reason: string;
}

/** content_block_index must be below this (the Go View's bound). */
export const MAX_BLOCK_INDEX = 4096;

const DELTA_TYPES = new Set(['text.delta', 'thinking.delta', 'tool.use_start', 'tool.use_input_delta', 'tool.use_end']);

function emptyBlock(): ViewBlock {
  return { type: '', text: '', thinking: '', signature: '', id: '', name: '', partial_input: '', tool_use_id: '', content: '', is_error: false };
}

/** Decodes a block like Go's json.Unmarshal into client.Block; null → an empty block. */
function readBlock(v: unknown, parent: Reader): ViewBlock {
  const b = emptyBlock();
  if (v === null) return b;
  const r = new Reader(v, 'block');
  b.type = r.str('type');
  b.text = r.str('text');
  b.thinking = r.str('thinking');
  b.signature = r.str('signature');
  b.id = r.str('id');
  b.name = r.str('name');
  const input = r.raw('input');
  if (input !== undefined) b.input = input;
  b.partial_input = r.str('partial_input');
  b.tool_use_id = r.str('tool_use_id');
  b.content = r.str('content');
  b.is_error = r.bool('is_error');
  if (b.type === 'image' || r.present('sha256')) {
    b.media_type = r.str('media_type');
    b.sha256 = r.str('sha256');
    b.size = r.int('size');
    b.width = r.int('width');
    b.height = r.int('height');
  }
  const imgs = r.list('images', (v) => readBlock(v, r));
  if (imgs !== undefined && imgs.length > 0) b.images = imgs;
  parent.adopt(r);
  return b;
}

function readBlocks(r: Reader, k: string): ViewBlock[] {
  return r.list(k, (v) => readBlock(v, r)) ?? [];
}

/** Decodes a usage object, or undefined when missing or null (a Go *Usage). */
function readUsage(r: Reader, k: string): ViewUsage | undefined {
  if (!r.present(k)) {
    r.obj(k); // records a type error for a non-object
    return undefined;
  }
  const u = r.obj(k);
  const out = { input_tokens: u.int('input_tokens'), output_tokens: u.int('output_tokens'), cost_usd: u.num('cost_usd') };
  r.adopt(u);
  return out;
}

function addCost(total: number, c: number): number {
  const s = total + c;
  if (s === Infinity) return Number.MAX_VALUE;
  if (s === -Infinity) return -Number.MAX_VALUE;
  return s;
}

/** Streamed blocks against final_content: text, thinking, ids and tool inputs (as parsed JSON). */
function sameContent(got: ViewBlock[], final: ViewBlock[]): boolean {
  if (got.length !== final.length) return false;
  return got.every((g, i) => {
    const f = final[i]!;
    if (g.type !== f.type || g.text !== f.text || g.thinking !== f.thinking || g.id !== f.id) return false;
    if (g.type === 'tool_use' && (g.input === undefined || f.input === undefined || !jsonEqual(g.input, f.input))) return false;
    return true;
  });
}

/**
 * A session's materialized state. Pure: no I/O, no timers. Read it after
 * {@link version} changes; treat everything it returns as read-only (a
 * changed message, tool call or worker is replaced by a new object, so
 * identity comparison tells what changed).
 */
export class View {
  private _session: SessionSummary | undefined;
  private _messages: ViewMessage[] = [];
  private index = new Map<string, ViewMessage>();
  private pos = new Map<string, number>();
  private _tools = new Map<string, ToolCall>();
  private _workers = new Map<string, Worker>();
  private _turn: TurnState = { id: '', status: 'idle', reason: '' };
  private _cost = 0;
  private _errors: string[] = [];
  private _lastEventId = '';
  private _skipped = 0;
  private _mismatches = 0;
  private _feedback = new Map<string, string>();
  private _hasOlder = false;
  private _queued: QueuedTurn[] = [];
  private _mode = '';
  private _pending = new Map<string, PendingApproval>();
  private _turns = new Map<string, TurnInfo>();
  private _context: ContextState = { tokens: 0, window: 0, compacting: false, last: '' };
  private _version = 0;
  /** Objects created during the current change: mutated in place. */
  private fresh = new Set<object>();

  /** Bumps on every change. */
  get version(): number {
    return this._version;
  }
  /** The snapshot's session summary (undefined before one). */
  get session(): SessionSummary | undefined {
    return this._session;
  }
  /** Messages, oldest first. */
  get messages(): readonly ViewMessage[] {
    return this._messages;
  }
  /** Tool calls by tool_use_id, in the order first seen. */
  get tools(): ReadonlyMap<string, ToolCall> {
    return this._tools;
  }
  /** Workers by session id, in the order first seen. */
  get workers(): ReadonlyMap<string, Worker> {
    return this._workers;
  }
  get turn(): Readonly<TurnState> {
    return this._turn;
  }
  /** The snapshot's cost_so_far_usd plus the cost of every model call seen since. */
  get costUsd(): number {
    return this._cost;
  }
  /** "<error_class>: <message>" of each failed model call (cancellations excluded). */
  get errors(): readonly string[] {
    return this._errors;
  }
  /** The cursor: the id of the last event folded in, or the snapshot's seam. */
  get lastEventId(): string {
    return this._lastEventId;
  }
  /** Events of unknown types skipped (spec §9.2). */
  get skipped(): number {
    return this._skipped;
  }
  /** Messages whose streamed deltas disagreed with their final_content. */
  get mismatches(): number {
    return this._mismatches;
  }
  /** Ratings by turn id. */
  get feedback(): ReadonlyMap<string, string> {
    return this._feedback;
  }
  /** Messages older than the first one held exist (page them with Api.messages({before})). */
  get hasOlder(): boolean {
    return this._hasOlder;
  }

  /**
   * The turns waiting in the session's queue, the next first: from the
   * snapshot's queued_turns and turn.queued; a turn leaves at its
   * turn.started, or at its turn.cancelled (phase queued) when cancelled
   * before it started (Api.cancelTurn answers 'dequeued').
   */
  get queued(): readonly QueuedTurn[] {
    return this._queued;
  }
  /** The session's permission mode, as the snapshot and session.mode_changed tell it ('' before either). */
  get mode(): string {
    return this._mode;
  }
  /**
   * The approval requests waiting for an answer, oldest first: this
   * session's and its workers' (session_id tells). Api.approve answers one.
   */
  get pendingApprovals(): PendingApproval[] {
    return [...this._pending.values()].sort((a, b) => {
      const x = a.requested_at ?? '';
      const y = b.requested_at ?? '';
      if (x !== y) return x < y ? -1 : 1;
      return a.approval_id < b.approval_id ? -1 : a.approval_id > b.approval_id ? 1 : 0;
    });
  }
  /** Turns seen through their events, by id, in the order started. */
  get turns(): ReadonlyMap<string, TurnInfo> {
    return this._turns;
  }
  /** The context gauge: tokens against the window, and compaction. */
  get context(): Readonly<ContextState> {
    return this._context;
  }

  /** A message by id. */
  message(id: string): ViewMessage | undefined {
    return this.index.get(id);
  }

  /** Empties the view. */
  reset(): void {
    this.clear();
    this._version++;
  }

  private clear(): void {
    this._session = undefined;
    this._messages = [];
    this.index = new Map();
    this.pos = new Map();
    this._tools = new Map();
    this._workers = new Map();
    this._turn = { id: '', status: 'idle', reason: '' };
    this._cost = 0;
    this._errors = [];
    this._lastEventId = '';
    this._skipped = 0;
    this._mismatches = 0;
    this._feedback = new Map();
    this._hasOlder = false;
    this._queued = [];
    this._mode = '';
    this._pending = new Map();
    this._turns = new Map();
    this._context = { tokens: 0, window: 0, compacting: false, last: '' };
  }

  /** Moves the cursor without changing state (a resume point learned from an ack). */
  setCursor(id: string): void {
    if (id !== this._lastEventId) {
      this._lastEventId = id;
      this._version++;
    }
  }

  /**
   * Replaces the view with a snapshot (spec §3.4). A snapshot taken while
   * an assistant message streamed holds it with status streaming and its
   * content so far (tool input so far as partial_input); the deltas that
   * follow continue it.
   */
  applySnapshot(s: Snapshot): void {
    this.fresh = new Set();
    this.clear();
    const raw = s as unknown as Record<string, unknown>;
    if (raw['session'] !== undefined) this._session = raw['session'] as SessionSummary;
    const sum = new Reader(raw['session'] ?? null, 'session');
    this._cost = sum.num('cost_so_far_usd');
    const cur = sum.optStr('current_turn_id');
    if (cur !== undefined) this._turn = { id: cur, status: 'in_flight', reason: '' };
    this._queued = sum.list('queued_turns', (q) => readQueued(q, sum)) ?? [];
    this._mode = sum.str('mode');
    this._context = { tokens: sum.num('context_tokens'), window: sum.num('context_window'), compacting: false, last: '' };
    const pending = sum.list('pending_approvals', (v) => v) ?? [];
    for (const v of pending) {
      if (v !== null && typeof v === 'object' && typeof (v as PendingApproval).approval_id === 'string' && (v as PendingApproval).approval_id !== '') {
        const pa = v as PendingApproval;
        this._pending.set(pa.approval_id, pa);
      }
    }
    for (const m of Array.isArray(raw['messages']) ? raw['messages'] : []) {
      const msg = this.decodeMessage(m);
      if (msg) {
        this.addMessage(msg);
        this.indexTools(msg.blocks);
      }
    }
    // Calls that had started at the seam (tool.called): running, not waiting.
    for (const id of Array.isArray(raw['running_tools']) ? raw['running_tools'] : []) {
      const tc = typeof id === 'string' ? this._tools.get(id) : undefined;
      if (tc && tc.status === 'pending') this.ownTool(id as string, tc).status = 'running';
    }
    for (const w of Array.isArray(raw['workers']) ? raw['workers'] : []) {
      const r = new Reader(w, 'worker');
      const id = r.str('session_id');
      if (id !== '') {
        this._workers.set(id, {
          session_id: id, task: r.str('task'), model: r.str('model'), status: r.str('status'),
          summary: r.str('summary'), failure_mode: r.str('failure_mode'), cost_usd: r.num('cost_usd'),
        });
      }
    }
    this._hasOlder = raw['has_more_messages'] === true;
    this._lastEventId = typeof raw['snapshot_at_event_id'] === 'string' ? raw['snapshot_at_event_id'] : '';
    this._version++;
  }

  /**
   * Adds a page of older messages (oldest first, as GET
   * /sessions/{id}/messages?before= returns them) in front, skipping
   * those already held; returns how many were added.
   */
  prependMessages(page: readonly unknown[], hasMore: boolean): number {
    this.fresh = new Set();
    const older: ViewMessage[] = [];
    for (const raw of page) {
      const msg = this.decodeMessage(raw);
      if (msg && !this.index.has(msg.id)) {
        this.index.set(msg.id, msg);
        older.push(msg);
      }
    }
    const changed = this._hasOlder !== hasMore || older.length > 0;
    this._hasOlder = hasMore;
    if (older.length > 0) {
      this._messages = [...older, ...this._messages];
      this.pos = new Map(this._messages.map((m, i) => [m.id, i]));
      for (const m of this._messages) this.indexTools(m.blocks);
    }
    if (changed) this._version++;
    return older.length;
  }

  /**
   * Folds one event into the view; returns false for an event of a type
   * the catalog does not know, which is skipped and counted (spec §9.2).
   * Events at or before the cursor are ignored (a replay overlap never
   * doubles text). message.complete's final_content is authoritative.
   */
  apply(ev: RawEnvelope): boolean {
    const id = typeof ev.id === 'string' ? ev.id : '';
    if (id !== '' && id <= this._lastEventId) return true;
    this.fresh = new Set();
    this._version++;
    if (typeof ev.type !== 'string' || !isEventType(ev.type)) {
      this._skipped++;
      if (id > this._lastEventId) this._lastEventId = id;
      return false;
    }
    this.fold(ev);
    if (id > this._lastEventId) this._lastEventId = id;
    return true;
  }

  private decodeMessage(raw: unknown): ViewMessage | undefined {
    if (raw === null || raw === undefined) return undefined;
    const r = new Reader(raw, 'message');
    const m: ViewMessage = {
      id: r.str('id'), role: r.str('role'), session_id: r.str('session_id'), turn_id: r.str('turn_id'),
      model: r.str('model'), status: r.str('status'), blocks: readBlocks(r, 'content'), stop_reason: '',
      start_missing: r.bool('start_missing'),
    };
    const u = readUsage(r, 'usage');
    if (u) m.usage = u;
    if (r.err !== undefined || m.id === '') return undefined;
    return m;
  }

  private indexTools(blocks: readonly ViewBlock[]): void {
    for (const b of blocks) {
      if (b.type === 'tool_use') {
        if (!this._tools.has(b.id)) this._tools.set(b.id, this.newTool(b.id, b.name, b.input, 'pending'));
      } else if (b.type === 'tool_result') {
        const tc = this._tools.get(b.tool_use_id);
        if (tc && (tc.status === 'pending' || tc.status === 'running')) {
          const t = this.ownTool(b.tool_use_id, tc);
          t.result = b.content;
          t.status = 'completed';
          if (b.is_error) {
            t.status = 'failed';
            t.error = b.content;
          } else if (t.name === 'shell') {
            // A stored shell result begins with its exit code (the
            // snapshot's messages carry no tool.completed exit_code).
            const code = shellExitCode(b.content);
            if (code !== undefined) t.exit_code = code;
          }
        }
      }
    }
  }

  private newTool(id: string, name: string, input: Json | undefined, status: string): ToolCall {
    const t: ToolCall = { id, name, status, summary: '', result: '', error_class: '', error: '' };
    if (input !== undefined) t.input = input;
    this.fresh.add(t);
    return t;
  }

  private ownTool(id: string, t: ToolCall): ToolCall {
    if (this.fresh.has(t)) return t;
    const c = { ...t };
    this.fresh.add(c);
    this._tools.set(id, c);
    return c;
  }

  /** Takes a turn out of the queue. */
  private dequeue(turnId: string): void {
    if (this._queued.some((q) => q.turn_id === turnId)) this._queued = this._queued.filter((q) => q.turn_id !== turnId);
  }

  private addMessage(m: ViewMessage): void {
    this.fresh.add(m);
    const at = this.pos.get(m.id);
    if (at !== undefined && this.index.has(m.id)) {
      this._messages[at] = m;
    } else {
      this.pos.set(m.id, this._messages.length);
      this._messages.push(m);
    }
    this.index.set(m.id, m);
  }

  /** The message, as an object this change may mutate. */
  private own(m: ViewMessage): ViewMessage {
    if (this.fresh.has(m)) return m;
    const c = { ...m };
    this.addMessage(c);
    return c;
  }

  /** Block i of message m (owned), grown as needed, as an object this change may mutate. */
  private block(m: ViewMessage, i: number, type: string): ViewBlock {
    if (!this.fresh.has(m.blocks)) {
      m.blocks = [...m.blocks];
      this.fresh.add(m.blocks);
    }
    while (m.blocks.length <= i) {
      const b = emptyBlock();
      this.fresh.add(b);
      m.blocks.push(b);
    }
    let b = m.blocks[i]!;
    if (!this.fresh.has(b)) {
      b = { ...b };
      this.fresh.add(b);
      m.blocks[i] = b;
    }
    if (b.type === '') b.type = type;
    return b;
  }

  private newMessage(id: string, role: string, ev: RawEnvelope, turnId: string, status: string, model = ''): ViewMessage {
    return { id, role, session_id: str(ev.session_id), turn_id: turnId, model, blocks: [], status, stop_reason: '', start_missing: false };
  }

  /**
   * session.updated of the view's own session: the summary takes its
   * title and archived flag (false removes it, as the summary omits it),
   * as the Go View does. A worker's edit, a view without a summary, and a
   * payload whose title is not a string or archived not a boolean leave it.
   */
  private sessionEdit(ev: RawEnvelope): void {
    const s = this._session as unknown;
    const p = ev.payload as unknown;
    if (s === null || typeof s !== 'object' || Array.isArray(s) || p === null || typeof p !== 'object' || Array.isArray(p)) return;
    const id = (s as Record<string, unknown>)['id'];
    if (typeof id !== 'string' || id === '' || id !== str(ev.session_id)) return;
    const title = (p as Record<string, unknown>)['title'] ?? null;
    const archived = (p as Record<string, unknown>)['archived'] ?? null;
    if ((title !== null && typeof title !== 'string') || (archived !== null && typeof archived !== 'boolean')) return;
    if (title === null && archived === null) return;
    const next = { ...(s as SessionSummary) };
    if (title !== null) next.title = title;
    if (archived === true) next.archived = true;
    else if (archived === false) delete next.archived;
    this._session = next;
  }

  private fold(ev: RawEnvelope): void {
    const turnId = typeof ev.turn_id === 'string' ? ev.turn_id : '';
    const p = new Reader(ev.payload, 'payload');
    switch (ev.type) {
      case 'turn.started': {
        const u = p.obj('user_message');
        const id = u.str('id');
        u.str('role');
        u.str('status');
        const blocks = readBlocks(u, 'content');
        p.adopt(u);
        if (p.err !== undefined) return;
        this._turn = { id: turnId, status: 'in_flight', reason: '' };
        this.dequeue(turnId);
        this.setTurn({ id: turnId, started_at: str(ev.ts), status: 'in_flight', duration_ms: 0, llm_calls: 0 });
        const m = this.newMessage(id, 'user', ev, turnId, 'complete');
        m.blocks = blocks;
        this.addMessage(m);
        return;
      }
      case 'turn.completed': {
        const outcome = p.str('outcome');
        this._turn = { id: turnId, status: outcome === 'failed' ? 'failed' : 'completed', reason: p.str('error_class') };
        this.endTurn(ev, turnId, this._turn.status);
        return;
      }
      case 'turn.cancelled': {
        if (p.str('phase') === 'queued') {
          this.dequeue(turnId); // it never ran: the turn in flight is another's
          return;
        }
        this._turn = { id: turnId, status: 'cancelled', reason: p.str('reason') };
        this.endTurn(ev, turnId, 'cancelled');
        for (const m of this._messages) {
          if (m.turn_id === turnId && m.status === 'streaming') this.own(m).status = 'cancelled';
        }
        return;
      }
      case 'message.complete':
        this.complete(ev, p, turnId);
        return;
      case 'turn.queued':
      case 'turn.steered': {
        const u = p.obj('user_message');
        const id = u.str('id');
        const blocks = readBlocks(u, 'content');
        const source = p.str('source');
        p.adopt(u);
        if (p.err !== undefined) return;
        if (ev.type === 'turn.steered') {
          const m = this.newMessage(id, 'user', ev, turnId, 'complete');
          m.blocks = blocks;
          this.addMessage(m);
          return;
        }
        if (this._queued.some((q) => q.turn_id === turnId)) return;
        const q: QueuedTurn = {
          turn_id: turnId, message_id: id, preview: preview(blocks.filter((b) => b.type === 'text').map((b) => b.text).join('')),
          source: source as QueuedTurn['source'], queued_at: str(ev.ts),
        };
        const n = blocks.filter((b) => b.type === 'image').length;
        if (n > 0) q.images = n;
        this._queued = [...this._queued, q];
        return;
      }
      case 'llm.call_started': {
        const req = new Reader(ev.payload, 'payload').obj('request');
        this.setContext(req.num('context_tokens'), req.num('context_window'));
        return;
      }
      case 'context.compacting':
        this._context = { ...this._context, compacting: true };
        return;
      case 'context.compacted': {
        const before = p.num('tokens_before');
        const after = p.num('tokens_after');
        this._context = { ...this._context, tokens: after || this._context.tokens, compacting: false,
          last: `compacted ${before} → ${after} tokens (${p.str('method') || 'summary'})` };
        return;
      }
      case 'context.compaction_failed':
        this._context = { ...this._context, compacting: false, last: `compaction failed: ${p.str('error_class')}${p.str('message') ? ': ' + p.str('message') : ''}` };
        return;
      case 'approval.requested': {
        const aid = p.str('approval_id');
        if (p.err !== undefined || aid === '') return;
        const raw = ev.payload as Record<string, unknown>;
        const pa: PendingApproval = {
          approval_id: aid, tool_use_id: p.str('tool_use_id'), tool_name: p.str('tool_name'), input: raw['input'] ?? null,
          session_id: str(ev.session_id), turn_id: turnId, kind: p.str('kind'),
          targets: Array.isArray(raw['targets']) ? (raw['targets'] as unknown[]).filter((t): t is string => typeof t === 'string') : [],
          reason: p.str('reason'),
          session_rules: Array.isArray(raw['session_rules']) ? (raw['session_rules'] as unknown[]).filter((t): t is string => typeof t === 'string') : [],
          requested_at: str(ev.ts), expires_at: p.str('expires_at'),
        };
        const m = new Map(this._pending);
        m.set(aid, pa);
        this._pending = m;
        const tc = this._tools.get(pa.tool_use_id);
        if (tc && tc.status === 'pending') this.ownTool(pa.tool_use_id, tc).status = TOOL_AWAITING_APPROVAL;
        return;
      }
      case 'approval.resolved': {
        const aid = p.str('approval_id');
        const tid = p.str('tool_use_id');
        if (p.err !== undefined) return;
        if (this._pending.has(aid)) {
          const m = new Map(this._pending);
          m.delete(aid);
          this._pending = m;
        }
        const tc = this._tools.get(tid);
        if (tc && tc.status === TOOL_AWAITING_APPROVAL) this.ownTool(tid, tc).status = 'pending';
        return;
      }
      case 'session.mode_changed': {
        const mode = p.str('mode');
        const planner = p.str('planner_session_id');
        if (p.err !== undefined) return;
        const id = this._session?.id ?? '';
        if (id === str(ev.session_id) || (id === '' && planner === '')) this._mode = mode;
        return;
      }
      case 'session.updated':
        this.sessionEdit(ev);
        return;
      case 'llm.call_completed':
      case 'llm.call_failed': {
        if (ev.type === 'llm.call_completed') {
          const c = new Reader(ev.payload, 'payload');
          this.setContext(c.num('context_tokens'), c.num('context_window'));
        }
        const mid = p.str('message_id');
        const cls = p.str('error_class');
        const msg = p.str('message');
        const u = p.obj('usage');
        this._cost = addCost(this._cost, u.num('cost_usd'));
        if (ev.type === 'llm.call_failed' && cls !== 'cancelled') {
          this._errors = [...this._errors, `${cls}: ${msg}`];
          const m = this.index.get(mid);
          if (m && m.status === 'streaming') this.own(m).status = 'failed';
        }
        return;
      }
      case 'tool.called':
      case 'tool.completed':
      case 'tool.failed': {
        const id = p.str('tool_use_id');
        const name = p.str('tool_name');
        const input = p.raw('input');
        const summary = p.str('summary');
        const result = p.str('result');
        const cls = p.str('error_class');
        const message = p.str('message');
        if (p.err !== undefined) return;
        const old = this._tools.get(id);
        const tc = old ? this.ownTool(id, old) : this.newTool(id, name, undefined, '');
        if (!old) this._tools.set(id, tc);
        if (ev.type === 'tool.called') {
          tc.status = 'running';
          if (input !== undefined) tc.input = input;
        } else if (ev.type === 'tool.completed') {
          tc.status = 'completed';
          tc.summary = summary;
          tc.result = result;
          const raw = ev.payload as Record<string, unknown>;
          if (Array.isArray(raw['paths'])) tc.paths = (raw['paths'] as unknown[]).filter((x): x is string => typeof x === 'string');
          if (typeof raw['diff'] === 'string') tc.diff = raw['diff'];
          if (raw['diff_truncated'] === true) tc.diff_truncated = true;
          if (typeof raw['duration_ms'] === 'number') tc.duration_ms = raw['duration_ms'];
          if (typeof raw['exit_code'] === 'number') tc.exit_code = raw['exit_code'];
          if (Array.isArray(raw['images'])) {
            tc.images = (raw['images'] as unknown[]).flatMap((x) => {
              const o = x as Record<string, unknown> | null;
              if (!o || typeof o['media_type'] !== 'string') return [];
              return [{ media_type: o['media_type'], bytes: typeof o['bytes'] === 'number' ? o['bytes'] : 0, ...(typeof o['data'] === 'string' ? { data: o['data'] } : {}) }];
            });
          }
        } else {
          const d = (ev.payload as Record<string, unknown>)['duration_ms'];
          if (typeof d === 'number') tc.duration_ms = d;
          tc.status = cls === 'cancelled' ? 'cancelled' : 'failed';
          tc.error_class = cls;
          tc.error = message;
        }
        return;
      }
      case 'delegate.started':
      case 'delegate.completed':
      case 'delegate.failed': {
        const id = p.str('worker_session_id');
        const task = p.str('task');
        const model = p.str('model');
        const summary = p.str('summary');
        const mode = p.str('failure_mode');
        const cost = p.num('cost_usd');
        if (p.err !== undefined) return;
        const old = this._workers.get(id);
        const w: Worker = old ? { ...old } : { session_id: id, task: '', model: '', status: '', summary: '', failure_mode: '', cost_usd: 0 };
        if (ev.type === 'delegate.started') {
          w.task = task;
          w.model = model;
          w.status = 'running';
        } else if (ev.type === 'delegate.completed') {
          w.status = 'completed';
          w.summary = summary;
          w.cost_usd = cost;
        } else {
          w.status = 'failed';
          w.failure_mode = mode;
          w.cost_usd = cost;
        }
        this._workers.set(id, w);
        return;
      }
      case 'feedback.submitted': {
        const m = new Map(this._feedback);
        m.set(turnId, p.str('rating'));
        this._feedback = m;
        return;
      }
    }
    if (ev.type === 'message.start' || DELTA_TYPES.has(ev.type)) this.delta(ev, p, turnId);
  }

  private setTurn(t: TurnInfo): void {
    const m = new Map(this._turns);
    m.set(t.id, t);
    this._turns = m;
  }

  private endTurn(ev: RawEnvelope, turnId: string, status: string): void {
    const r = new Reader(ev.payload, 'payload');
    const old = this._turns.get(turnId);
    const t: TurnInfo = old ? { ...old } : { id: turnId, started_at: '', status, duration_ms: 0, llm_calls: 0 };
    t.status = status;
    t.duration_ms = r.num('duration_ms');
    t.llm_calls = r.int('llm_calls');
    const u = readUsage(r, 'usage');
    if (u && r.err === undefined) t.usage = u;
    this.setTurn(t);
  }

  private setContext(tokens: number, window: number): void {
    if (tokens <= 0 && window <= 0) return;
    this._context = { ...this._context, tokens: tokens > 0 ? tokens : this._context.tokens, window: window > 0 ? window : this._context.window };
  }

  /** message.start and the block deltas; the payload is decoded whole first, as the Go View does. */
  private delta(ev: RawEnvelope, p: Reader, turnId: string): void {
    const d = {
      messageId: p.str('message_id'), index: p.int('content_block_index'), text: p.str('text'),
      signature: p.optStr('signature'), toolUseId: p.str('tool_use_id'), toolName: p.str('tool_name'),
      partial: p.str('partial_json'), finalInput: p.raw('final_input'), role: p.str('role'), model: p.str('model'),
    };
    if (p.err !== undefined) return;
    if (ev.type === 'message.start') {
      this.addMessage(this.newMessage(d.messageId, d.role || 'assistant', ev, turnId, 'streaming', d.model));
      return;
    }
    if (d.index < 0 || d.index >= MAX_BLOCK_INDEX) return;
    const old = this.index.get(d.messageId);
    let m: ViewMessage;
    if (old) {
      m = this.own(old);
    } else {
      // A delta whose message.start was missed (a streaming gap).
      m = this.newMessage(d.messageId, 'assistant', ev, turnId, 'streaming');
      this.addMessage(m);
    }
    switch (ev.type) {
      case 'text.delta':
        this.block(m, d.index, 'text').text += d.text;
        return;
      case 'thinking.delta': {
        const b = this.block(m, d.index, 'thinking');
        b.thinking += d.text;
        if (d.signature !== undefined) b.signature = d.signature;
        return;
      }
      case 'tool.use_start': {
        const b = this.block(m, d.index, 'tool_use');
        b.id = d.toolUseId;
        b.name = d.toolName;
        this._tools.set(d.toolUseId, this.newTool(d.toolUseId, d.toolName, undefined, 'pending'));
        return;
      }
      case 'tool.use_input_delta':
        this.block(m, d.index, 'tool_use').partial_input += d.partial;
        return;
      case 'tool.use_end': {
        const b = this.block(m, d.index, 'tool_use');
        if (d.finalInput === undefined) delete b.input;
        else b.input = d.finalInput;
        b.partial_input = '';
        const tc = this._tools.get(d.toolUseId);
        if (tc) {
          const t = this.ownTool(d.toolUseId, tc);
          if (d.finalInput === undefined) delete t.input;
          else t.input = d.finalInput;
        }
        return;
      }
    }
  }

  private complete(ev: RawEnvelope, p: Reader, turnId: string): void {
    const mid = p.str('message_id');
    const stop = p.str('stop_reason');
    const final = readBlocks(p, 'final_content');
    const usage = readUsage(p, 'usage');
    if (p.err !== undefined) return;
    const old = this.index.get(mid);
    let m: ViewMessage;
    if (old) {
      m = this.own(old);
    } else {
      m = this.newMessage(mid, 'assistant', ev, turnId, '');
      this.addMessage(m);
    }
    if (!m.start_missing && !sameContent(m.blocks, final)) this._mismatches++;
    m.start_missing = false;
    m.blocks = final;
    this.fresh.add(final);
    m.stop_reason = stop;
    if (usage) m.usage = usage;
    else delete m.usage;
    m.status = stop === 'cancelled' ? 'cancelled' : stop === 'error' ? 'failed' : 'complete';
    for (const b of final) {
      if (b.type !== 'tool_use') continue;
      const tc = this._tools.get(b.id);
      if (tc) {
        const t = this.ownTool(b.id, tc);
        if (b.input === undefined) delete t.input;
        else t.input = b.input;
      } else {
        this._tools.set(b.id, this.newTool(b.id, b.name, b.input, 'pending'));
      }
    }
  }

  /**
   * The view in the Go View's JSON shape (client.View encoded): what the
   * conformance suite's expected.json holds.
   */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (this._session !== undefined) out['session'] = this._session;
    out['messages'] = this._messages.length === 0 ? null : this._messages.map(messageJSON);
    out['tools'] = Object.fromEntries([...this._tools].map(([k, t]) => [k, toolJSON(t)]));
    out['workers'] = Object.fromEntries([...this._workers].map(([k, w]) => [k, workerJSON(w)]));
    out['turn'] = omitEmpty({ id: this._turn.id, status: this._turn.status, reason: this._turn.reason }, ['id', 'reason']);
    out['cost_usd'] = this._cost;
    out['errors'] = this._errors.length === 0 ? null : [...this._errors];
    out['last_event_id'] = this._lastEventId;
    out['skipped_unknown_events'] = this._skipped;
    out['delta_mismatches'] = this._mismatches;
    if (this._feedback.size > 0) out['feedback'] = Object.fromEntries(this._feedback);
    if (this._hasOlder) out['has_older_messages'] = true;
    if (this._queued.length > 0) out['queued_turns'] = this._queued.map((q) => ({ ...q }));
    if (this._mode !== '') out['mode'] = this._mode;
    if (this._pending.size > 0) out['pending_approvals'] = Object.fromEntries([...this._pending].map(([k, a]) => [k, approvalJSON(a)]));
    return out;
  }
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function omitEmpty(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  for (const k of keys) {
    const v = o[k];
    if (v === '' || v === false || v === 0 || v === undefined) delete o[k];
  }
  return o;
}

function messageJSON(m: ViewMessage): Record<string, unknown> {
  const o: Record<string, unknown> = {
    id: m.id, role: m.role, session_id: m.session_id, turn_id: m.turn_id, model: m.model,
    blocks: m.blocks.map(blockJSON), status: m.status, stop_reason: m.stop_reason,
  };
  if (m.usage) o['usage'] = { ...m.usage };
  if (m.start_missing) o['start_missing'] = true;
  return omitEmpty(o, ['session_id', 'turn_id', 'model', 'stop_reason']);
}

function blockJSON(b: ViewBlock): Record<string, unknown> {
  const o: Record<string, unknown> = {
    type: b.type, text: b.text, thinking: b.thinking, signature: b.signature, id: b.id, name: b.name,
    partial_input: b.partial_input, tool_use_id: b.tool_use_id, content: b.content, is_error: b.is_error,
  };
  omitEmpty(o, ['text', 'thinking', 'signature', 'id', 'name', 'partial_input', 'tool_use_id', 'content', 'is_error']);
  if (b.input !== undefined) o['input'] = b.input;
  for (const k of ['media_type', 'sha256', 'size', 'width', 'height'] as const) {
    const v = b[k];
    if (v !== undefined && v !== '' && v !== 0) o[k] = v;
  }
  if (b.images !== undefined && b.images.length > 0) o['images'] = b.images.map(blockJSON);
  return o;
}

function toolJSON(t: ToolCall): Record<string, unknown> {
  const o: Record<string, unknown> = {
    id: t.id, name: t.name, status: t.status, summary: t.summary, result: t.result, error_class: t.error_class, error: t.error,
  };
  omitEmpty(o, ['summary', 'result', 'error_class', 'error']);
  if (t.input !== undefined) o['input'] = t.input;
  if (t.exit_code !== undefined) o['exit_code'] = t.exit_code;
  return o;
}

function approvalJSON(a: PendingApproval): Record<string, unknown> {
  const o: Record<string, unknown> = { ...a };
  for (const k of ['targets', 'session_rules']) if (Array.isArray(o[k]) && (o[k] as unknown[]).length === 0) delete o[k];
  return omitEmpty(o, ['turn_id', 'kind', 'reason', 'requested_at', 'expires_at']);
}

function workerJSON(w: Worker): Record<string, unknown> {
  return omitEmpty({ ...w }, ['model', 'summary', 'failure_mode']);
}

/** A queued turn of a snapshot's queued_turns, as Go decodes it. */
function readQueued(v: unknown, parent: Reader): QueuedTurn {
  const r = new Reader(v, 'queued_turn');
  const q: QueuedTurn = {
    turn_id: r.str('turn_id'), message_id: r.str('message_id'), preview: r.str('preview'),
    source: r.str('source') as QueuedTurn['source'], queued_at: r.str('queued_at'),
  };
  const n = r.int('images');
  if (n > 0) q.images = n;
  parent.adopt(r);
  return q;
}

/** A queued message's preview, as the Go client makes it: white space collapsed, cut at 80 characters. */
function preview(s: string): string {
  const t = s.split(/\s+/).filter((w) => w !== '').join(' ');
  const r = [...t];
  return r.length > 80 ? r.slice(0, 79).join('') + '\u2026' : t;
}
