// The same-origin HTTP API of contract §3.

import type {
  ApprovalAnswer, ApprovalConflict, ApprovalResolution, CompactAccepted, ForkRequest, ForkResult, ImageInput, MCPServerConfig, MCPStatus,
  Message, Mode, ModelList, RevertResult, SessionSummary, SystemPrompt, TurnAccepted, TurnDiff, TurnList, TurnRequest,
} from './protocol.gen';

/**
 * An image to send (a pasted or dropped File, a Blob): its media type
 * told from its first bytes (PNG, JPEG, GIF, WebP; never from its name
 * or the browser's guess) and its bytes in base64. Anything else
 * rejects; the server checks the image again, fully.
 */
export async function imageInput(blob: Blob): Promise<ImageInput> {
  const bytes = new Uint8Array(await blob.arrayBuffer());
  const mt = sniffImage(bytes);
  if (mt === '') throw new Error('metis: not a PNG, JPEG, GIF or WebP image');
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return { media_type: mt, data: btoa(bin) };
}

/** The media type an image's first bytes announce, or ''. */
export function sniffImage(b: Uint8Array): string {
  const at = (s: string, off = 0) => [...s].every((c, i) => b[off + i] === c.charCodeAt(0));
  if (at('\x89PNG\r\n\x1a\n')) return 'image/png';
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (at('GIF87a') || at('GIF89a')) return 'image/gif';
  if (b.length >= 12 && at('RIFF') && at('WEBP', 8)) return 'image/webp';
  return '';
}

/** PATCH /sessions/{id}: the fields to change (at least one). */
export interface SessionChange {
  mode?: Mode;
  max_turn_cost_usd?: number;
  max_session_cost_usd?: number;
  /** A new title (replaces the derived one for good). */
  title?: string;
  archived?: boolean;
}

/** One page of GET /sessions. */
export interface SessionsPage {
  sessions: SessionSummary[];
  has_more: boolean;
  /** The cursor of the next page; '' on the last one. */
  next: string;
}

/** An error answer of the API (or a network failure: status 0, code 'network'). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  /** The decoded JSON body of the error answer, if any (a 409 approval_resolved holds the resolution). */
  readonly body: unknown;
  constructor(status: number, code: string, message: string, body?: unknown) {
    super(message || `metis: HTTP ${status}${code ? ' ' + code : ''}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export interface ApiOptions {
  /** The server's base URL (http://host:port); default the page's origin. */
  baseUrl?: string;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** The answer of GET /sessions/{id} (spec §3.1). */
export interface AttachInfo {
  session_id: string;
  active_model: string;
  attach_token: string;
  ws_url: string;
  session: SessionSummary;
}

/** A page of history, oldest first. */
export interface MessagesPage {
  messages: Message[];
  has_more: boolean;
}

function defaultBase(): string {
  const loc = (globalThis as { location?: { origin?: string } }).location;
  if (loc?.origin && loc.origin !== 'null') return loc.origin;
  throw new Error('metis: Api needs a baseUrl outside a browser page');
}

/** The HTTP API client. Every method rejects with ApiError on an error answer. */
export class Api {
  readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ApiOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? defaultBase()).replace(/\/+$/, '');
    const f = opts.fetch ?? globalThis.fetch;
    this.fetchFn = (input, init) => f(input, init);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method, headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers = { Accept: 'application/json', 'Content-Type': 'application/json' };
      init.body = JSON.stringify(body);
    }
    let resp: Response;
    try {
      resp = await this.fetchFn(this.baseUrl + path, init);
    } catch (e) {
      throw new ApiError(0, 'network', `metis: ${method} ${path}: ${e instanceof Error ? e.message : String(e)}`);
    }
    const text = await resp.text().catch(() => '');
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!resp.ok) {
      const err = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
      const code = typeof err?.code === 'string' ? err.code : '';
      const msg = typeof err?.message === 'string' ? err.message : '';
      throw new ApiError(resp.status, code, msg || `metis: ${method} ${path}: HTTP ${resp.status}${code ? ' ' + code : ''}`, json);
    }
    return json as T;
  }

  private static seg(s: string): string {
    return encodeURIComponent(s);
  }

  /**
   * GET /sessions, one page: newest first, at most `limit` summaries (0 or
   * omitted: the server's default, 100), after the cursor `before` (the
   * `next` of the page before; '' or omitted: the first page).
   */
  async sessionsPage(opts: { before?: string; limit?: number } = {}): Promise<SessionsPage> {
    const q = new URLSearchParams();
    if (opts.limit) q.set('limit', String(opts.limit));
    if (opts.before) q.set('before', opts.before);
    const qs = q.toString();
    const out = await this.call<{ sessions?: SessionSummary[]; has_more?: boolean; next?: string }>('GET', '/sessions' + (qs ? '?' + qs : ''));
    return { sessions: out?.sessions ?? [], has_more: out?.has_more === true, next: typeof out?.next === 'string' ? out.next : '' };
  }

  /** GET /sessions: every session's summary, newest first, walking every page. */
  async listSessions(): Promise<SessionSummary[]> {
    const all: SessionSummary[] = [];
    let before = '';
    for (;;) {
      const p = await this.sessionsPage({ before, limit: 1000 });
      all.push(...p.sessions);
      if (!p.has_more) return all;
      if (p.next === '' || p.next === before) {
        throw new ApiError(0, 'invalid_response', `metis: GET /sessions: the server's next cursor ${JSON.stringify(p.next)} does not advance`);
      }
      before = p.next;
    }
  }

  /**
   * POST /sessions: a session on an existing absolute directory; model '' or omitted: the server's default.
   * The root and system directories are refused (400 workspace_forbidden), the home directory unless
   * allow_home (400 workspace_home).
   */
  createSession(req: { workspace_path: string; model?: string; allow_home?: boolean }): Promise<SessionSummary> {
    const body: Record<string, unknown> = { workspace_path: req.workspace_path, model: req.model ?? '' };
    if (req.allow_home) body['allow_home'] = true; // the home directory is refused without it (code workspace_home)
    return this.call('POST', '/sessions', body);
  }

  /** GET /sessions/{id}: the summary and a single-use attach token (404: code session_not_found). */
  attach(sessionId: string): Promise<AttachInfo> {
    return this.call('GET', '/sessions/' + Api.seg(sessionId));
  }

  /** Same as attach. */
  getSession(sessionId: string): Promise<AttachInfo> {
    return this.attach(sessionId);
  }

  /** POST /sessions/{id}/turns: starts a turn. 409: ApiError code 'turn_in_flight'. */
  submitTurn(sessionId: string, content: string): Promise<TurnAccepted> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/turns`, { content });
  }

  /**
   * POST /sessions/{id}/turns with everything it takes (docs/conversation.md):
   * images (base64, see imageInput), queue (wait behind the running turn:
   * queued, position) or steer (enter the running turn at its next model
   * call: steered). Errors: 409 'turn_in_flight' (busy, neither set),
   * 'queue_full', 'turn_cancelling', 'turn_mismatch'; 400 'invalid_image'.
   */
  sendTurn(sessionId: string, req: TurnRequest): Promise<TurnAccepted> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/turns`, req);
  }

  /** sendTurn with queue: starts now when the session is idle, else waits in its queue. */
  queueTurn(sessionId: string, content: string, images?: ImageInput[]): Promise<TurnAccepted> {
    return this.sendTurn(sessionId, { content, queue: true, ...(images && images.length > 0 ? { images } : {}) });
  }

  /**
   * sendTurn with steer: the message enters the running turn (expected, if
   * given, must be it); a turn that ends first leaves it as the next queued
   * turn; an idle session starts a turn with it.
   */
  steerTurn(sessionId: string, content: string, opts: { images?: ImageInput[]; expectedTurnId?: string } = {}): Promise<TurnAccepted> {
    const req: TurnRequest = { content, steer: true };
    if (opts.images && opts.images.length > 0) req.images = opts.images;
    if (opts.expectedTurnId) req.expected_turn_id = opts.expectedTurnId;
    return this.sendTurn(sessionId, req);
  }

  /**
   * POST /sessions/{id}/turns/{turn_id}/cancel (idempotent), running or
   * queued: 'cancelling', 'already_cancelling', 'already_ended', or
   * 'dequeued' for a queued turn (it never starts).
   */
  async cancelTurn(sessionId: string, turnId: string, reason?: string): Promise<string> {
    const out = await this.call<{ status?: unknown } | undefined>('POST', `/sessions/${Api.seg(sessionId)}/turns/${Api.seg(turnId)}/cancel`, reason ? { reason } : {});
    return typeof out?.status === 'string' ? out.status : '';
  }

  /** The URL of an image a session holds (an image block's sha256): for an <img src>, same origin. */
  imageUrl(sessionId: string, sha256: string): string {
    return `${this.baseUrl}/sessions/${Api.seg(sessionId)}/images/${Api.seg(sha256)}`;
  }

  /** GET /sessions/{id}/images/{sha256}: the image's bytes and media type (404: 'image_not_found'). */
  async image(sessionId: string, sha256: string): Promise<Blob> {
    const path = `/sessions/${Api.seg(sessionId)}/images/${Api.seg(sha256)}`;
    let resp: Response;
    try {
      resp = await this.fetchFn(this.baseUrl + path, { method: 'GET' });
    } catch (e) {
      throw new ApiError(0, 'network', `metis: GET ${path}: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!resp.ok) {
      const json = (await resp.json().catch(() => undefined)) as { error?: { code?: unknown; message?: unknown } } | undefined;
      const code = typeof json?.error?.code === 'string' ? json.error.code : '';
      throw new ApiError(resp.status, code, typeof json?.error?.message === 'string' ? json.error.message : '');
    }
    return resp.blob();
  }

  /** GET /sessions/{id}/messages: a page of history before a message id (none: the newest), oldest first. */
  async messages(sessionId: string, opts: { before?: string; limit?: number } = {}): Promise<MessagesPage> {
    const q = new URLSearchParams();
    if (opts.before) q.set('before', opts.before);
    if (opts.limit !== undefined && opts.limit > 0) q.set('limit', String(opts.limit));
    const qs = q.toString();
    const out = await this.call<Partial<MessagesPage>>('GET', `/sessions/${Api.seg(sessionId)}/messages${qs ? '?' + qs : ''}`);
    return { messages: out?.messages ?? [], has_more: out?.has_more === true };
  }

  /** POST /sessions/{id}/turns/{turn_id}/feedback. */
  async submitFeedback(sessionId: string, turnId: string, rating: string, comment?: string): Promise<void> {
    await this.call('POST', `/sessions/${Api.seg(sessionId)}/turns/${Api.seg(turnId)}/feedback`, { rating, comment: comment ?? '' });
  }

  /**
   * GET /sessions/{id}/turns, one page: turns oldest first, at most `limit`
   * (omitted: the server's default, 50), before the turn id `before` (the
   * `next` of the page after; omitted: the newest). Each turn says whether
   * it can be reverted (`revertible`) and what files it changed
   * (`changes`); `checkpoints` says whether the server takes any, and why not.
   */
  async listTurns(sessionId: string, opts: { before?: string; limit?: number } = {}): Promise<TurnList> {
    const q = new URLSearchParams();
    if (opts.before) q.set('before', opts.before);
    if (opts.limit !== undefined && opts.limit > 0) q.set('limit', String(opts.limit));
    const qs = q.toString();
    return this.call('GET', `/sessions/${Api.seg(sessionId)}/turns${qs ? '?' + qs : ''}`);
  }

  /** GET /sessions/{id}/turns/{turn_id}/changes: the files a turn changed, each with its unified diff. */
  turnChanges(sessionId: string, turnId: string): Promise<TurnDiff> {
    return this.call('GET', `/sessions/${Api.seg(sessionId)}/turns/${Api.seg(turnId)}/changes`);
  }

  /**
   * POST /sessions/{id}/turns/{turn_id}/revert: puts the workspace's files
   * back as they were before the turn (later turns' changes too). Show the
   * answer's `warning` (commands' other effects stay); its
   * `undo_checkpoint_id` undoes the revert (restoreCheckpoint). 409:
   * 'nothing_to_revert', 'turn_in_flight' or 'checkpoints_unavailable'.
   */
  revertTurn(sessionId: string, turnId: string): Promise<RevertResult> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/turns/${Api.seg(turnId)}/revert`, {});
  }

  /** POST /sessions/{id}/checkpoints/{checkpoint_id}/restore: undoes a revert (its undo_checkpoint_id). */
  restoreCheckpoint(sessionId: string, checkpointId: string): Promise<RevertResult> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/checkpoints/${Api.seg(checkpointId)}/restore`, {});
  }

  /**
   * POST /sessions/{id}/fork: a new session holding the conversation up to
   * and including `message_id` (omitted: all of it) on the same workspace;
   * `checkpoint: true` also puts the files back as they were at that message.
   */
  fork(sessionId: string, req: ForkRequest = {}): Promise<ForkResult> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/fork`, req);
  }

  /**
   * POST /sessions/{id}/approvals/{approval_id}: answers a waiting
   * request (a worker's through its planner's id too). A request another
   * client answered first resolves with that winning resolution and
   * `won: false` (the server's 409 approval_resolved); other errors throw.
   */
  async approve(sessionId: string, approvalId: string, answer: ApprovalAnswer): Promise<ApprovalResolution & { won: boolean }> {
    const path = `/sessions/${Api.seg(sessionId)}/approvals/${Api.seg(approvalId)}`;
    try {
      const r = await this.call<ApprovalResolution>('POST', path, answer);
      return { ...r, won: true };
    } catch (e) {
      const body = e instanceof ApiError ? e.body : undefined;
      const res = (body as ApprovalConflict | undefined)?.resolution;
      if (e instanceof ApiError && e.code === 'approval_resolved' && res) return { ...res, won: false };
      throw e;
    }
  }

  /** PATCH /sessions/{id}: mode, cost limits, title, archived; answers the summary. */
  updateSession(sessionId: string, change: SessionChange): Promise<SessionSummary> {
    return this.call('PATCH', '/sessions/' + Api.seg(sessionId), change);
  }

  /** PATCH /sessions/{id} {"mode"}: default, accept_edits, plan or auto (400 invalid_mode). */
  setMode(sessionId: string, mode: Mode): Promise<SessionSummary> {
    return this.updateSession(sessionId, { mode });
  }

  /** PATCH /sessions/{id}: the cost limits in USD (0: none; an omitted one is left). */
  setLimits(sessionId: string, limits: { max_turn_cost_usd?: number; max_session_cost_usd?: number }): Promise<SessionSummary> {
    return this.updateSession(sessionId, limits);
  }

  /** PATCH /sessions/{id} {"title"}. */
  renameSession(sessionId: string, title: string): Promise<SessionSummary> {
    return this.updateSession(sessionId, { title });
  }

  /** PATCH /sessions/{id} {"archived"}. */
  archiveSession(sessionId: string, archived = true): Promise<SessionSummary> {
    return this.updateSession(sessionId, { archived });
  }

  /** DELETE /sessions/{id}: the session and its workers, whole (409 turn_in_flight while one runs). */
  async deleteSession(sessionId: string): Promise<void> {
    // Every state-changing request carries Content-Type: application/json (the server's guard against cross-site requests).
    await this.call('DELETE', '/sessions/' + Api.seg(sessionId), {});
  }

  /** POST /sessions/{id}/compact: compacts now (202); 409 turn_in_flight while a turn runs. */
  compact(sessionId: string, instructions?: string): Promise<CompactAccepted> {
    return this.call('POST', `/sessions/${Api.seg(sessionId)}/compact`, instructions ? { instructions } : {});
  }

  /** GET /sessions/{id}/system-prompt: what the next model call is told. */
  systemPrompt(sessionId: string): Promise<SystemPrompt> {
    return this.call('GET', `/sessions/${Api.seg(sessionId)}/system-prompt`);
  }

  /** GET /models: the models sessions can be created with, the default first. */
  async models(): Promise<ModelList> {
    const m = await this.call<Partial<ModelList>>('GET', '/models');
    return { default: m?.default ?? '', models: m?.models ?? [], unavailable: m?.unavailable ?? [] };
  }

  /** GET /mcp: the MCP servers (config.yaml's and the sessions'), their state and tools. */
  async mcp(): Promise<MCPStatus> {
    const m = await this.call<Partial<MCPStatus>>('GET', '/mcp');
    return { version: m?.version ?? 0, servers: m?.servers ?? [], ...(m?.config_error ? { config_error: m.config_error } : {}) };
  }

  /** GET /sessions/{id}/mcp_servers: the MCP servers a session's turns use. */
  sessionMcp(sessionId: string): Promise<MCPStatus> {
    return this.call('GET', `/sessions/${Api.seg(sessionId)}/mcp_servers`);
  }

  /** PUT /sessions/{id}/mcp_servers: gives the session its own MCP servers (replacing those it had). */
  setSessionMcp(sessionId: string, servers: MCPServerConfig[]): Promise<MCPStatus> {
    return this.call('PUT', `/sessions/${Api.seg(sessionId)}/mcp_servers`, { servers });
  }

  /**
   * The stream URL to open: ws_url as the server wrote it, resolved
   * against baseUrl, upgraded to wss: when the API is served over https.
   */
  streamUrl(wsUrl: string): string {
    const u = new URL(wsUrl, this.baseUrl);
    if (u.protocol === 'http:') u.protocol = 'ws:';
    if (u.protocol === 'https:') u.protocol = 'wss:';
    if (this.baseUrl.startsWith('https:') && u.protocol === 'ws:') u.protocol = 'wss:';
    return u.toString();
  }
}
