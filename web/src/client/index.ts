/**
 * The TypeScript client of a metis server: the dashboard's data layer,
 * usable alone in a browser or in Node 20 (started with
 * `--experimental-websocket`, or given a WebSocket implementation).
 *
 * Three parts, each usable without the others:
 *
 * - {@link Api}: the same-origin HTTP API of the contract (sessions,
 *   attach, turns, cancel, message history). Error answers throw
 *   {@link ApiError} with the HTTP status and the API's error `code`.
 * - {@link View}: a pure reducer (no I/O, no timers) that materializes a
 *   session from a snapshot and the events that follow, exactly like the
 *   Go client's `client.View`: messages with streaming text, thinking and
 *   tool input, tool states, the turn, the cost, the workers. It passes
 *   every case of `tests/streaming-conformance/`.
 * - {@link Follower}: one live subscription. It attaches (GET
 *   /sessions/{id} for a single-use token), opens the WebSocket,
 *   subscribes, folds everything into its View, answers the server's
 *   pings, and after any drop reconnects with `since` = the view's last
 *   event id (exponential backoff with jitter; a 1008 close, the server
 *   saying "too slow, replay", resumes at once). When the server cannot
 *   replay (`cursor_expired`, `replay_too_large`, `invalid_cursor`) or the
 *   ack reports a `streaming_gap`, it resubscribes with a fresh snapshot.
 *
 * The wire types (`Envelope`, the frames, `EventType`, payloads,
 * `Snapshot`, `SessionSummary`, `Message`, `Block`) and the catalog
 * (`EVENT_TYPES`, `EVENT_FAMILY`, `PRESETS`) come from `protocol.gen.ts`,
 * which `web/tsgen` generates from the Go catalog; a Go test fails when it
 * drifts.
 *
 * A complete program:
 *
 * ```ts
 * import { Api, Follower } from './client';
 * const api = new Api();                       // same origin; or { baseUrl: 'http://127.0.0.1:8421' }
 * const s = await api.createSession({ workspace_path: '/path/to/workspace' });
 * const f = new Follower({ api, sessionId: s.id });
 * f.onState((state, info) => console.log(state, info));
 * f.onChange(() => render(f.view));            // batch to one render per animation frame
 * f.start();
 * const { turn_id } = await api.submitTurn(s.id, 'What is in this workspace?');
 * // ... f.cancel(turn_id) sends the WebSocket cancel frame; f.stop() closes.
 * ```
 *
 * ## API
 *
 * ```ts
 * class ApiError extends Error { status: number; code: string }   // code '' when the body had none; status 0: network
 * class Api {
 *   constructor(opts?: { baseUrl?: string; fetch?: typeof fetch });  // baseUrl default: the page's origin
 *   listSessions(): Promise<SessionSummary[]>;            // every page, newest first
 *   sessionsPage(opts?: { before?: string; limit?: number }): Promise<SessionsPage>;  // one page: { sessions, has_more, next }
 *   createSession(req: { workspace_path: string; model?: string }): Promise<SessionSummary>;
 *   getSession(sessionId): Promise<AttachInfo>;            // alias: attach()
 *   attach(sessionId): Promise<AttachInfo>;                // { session_id, active_model, attach_token, ws_url, session }
 *   submitTurn(sessionId, content): Promise<TurnAccepted>; // 409 -> ApiError code 'turn_in_flight'
 *   sendTurn(sessionId, req: TurnRequest): Promise<TurnAccepted>;  // images, queue, steer (docs/conversation.md)
 *   queueTurn(sessionId, content, images?): Promise<TurnAccepted>; // { turn_id, queued, position, message_id }
 *   steerTurn(sessionId, content, opts?: { images?; expectedTurnId? }): Promise<TurnAccepted>;  // { steered: true }
 *   cancelTurn(sessionId, turnId, reason?): Promise<string>;      // 'cancelling' | 'already_cancelling' | 'already_ended' | 'dequeued'
 *   imageUrl(sessionId, sha256): string;                   // for <img src>
 *   image(sessionId, sha256): Promise<Blob>;               // 404 -> 'image_not_found'
 *   messages(sessionId, opts?: { before?: string; limit?: number }): Promise<{ messages: Message[]; has_more: boolean }>;
 *   submitFeedback(sessionId, turnId, rating, comment?): Promise<void>;
 *   listTurns(sessionId, opts?: { before?: string; limit?: number }): Promise<TurnList>;  // turns oldest first, each
 *                                                       // with revertible, checkpoint ids and changes (files, +/-)
 *   turnChanges(sessionId, turnId): Promise<TurnDiff>;     // the files a turn changed, with unified diffs
 *   revertTurn(sessionId, turnId): Promise<RevertResult>; // files back as before the turn; show .warning; 409 ->
 *                                                       // 'nothing_to_revert' | 'turn_in_flight' | 'checkpoints_unavailable'
 *   restoreCheckpoint(sessionId, checkpointId): Promise<RevertResult>;  // undo a revert: its undo_checkpoint_id
 *   fork(sessionId, req?: { message_id?: string; checkpoint?: boolean; mode?: Mode }): Promise<ForkResult>;  // 201
 *   approve(sessionId, approvalId, { decision: 'allow'|'deny', scope?: 'once'|'session', reason? }): Promise<ApprovalResolution & { won }>;
 *                                                          // won false: another client answered first (409); its resolution
 *   updateSession(sessionId, { mode?, max_turn_cost_usd?, max_session_cost_usd?, title?, archived? }): Promise<SessionSummary>;
 *   setMode(sessionId, mode): Promise<SessionSummary>;     // PATCH {"mode"}
 *   setLimits(sessionId, { max_turn_cost_usd?, max_session_cost_usd? }): Promise<SessionSummary>;
 *   renameSession(sessionId, title): Promise<SessionSummary>;
 *   archiveSession(sessionId, archived = true): Promise<SessionSummary>;
 *   deleteSession(sessionId): Promise<void>;               // the session and its workers; 409 turn_in_flight while one runs
 *   compact(sessionId, instructions?): Promise<{ compaction_id }>;  // 409 turn_in_flight while a turn runs
 *   systemPrompt(sessionId): Promise<SystemPrompt>;
 *   mcp(): Promise<MCPStatus>;                             // GET /mcp: MCP servers, state, tools
 *   sessionMcp(sessionId): Promise<MCPStatus>;             // GET /sessions/{id}/mcp_servers
 *   setSessionMcp(sessionId, servers): Promise<MCPStatus>; // PUT /sessions/{id}/mcp_servers
 *   models(): Promise<ModelList>;                          // { default, models: [{ id, provider }], unavailable: [{ provider, reason }] }
 *   streamUrl(wsUrl: string): string;                      // ws_url resolved against baseUrl (wss under https)
 * }
 * function imageInput(blob: Blob): Promise<ImageInput>;    // a pasted/dropped file: type from its bytes, data in base64
 *
 * class View {                    // read-only from outside; every change bumps version
 *   applySnapshot(s: Snapshot): void;
 *   apply(e: RawEnvelope): boolean;                        // false: unknown type, skipped (and counted); an Envelope fits
 *   prependMessages(msgs: Message[], hasMore: boolean): number;   // older history, oldest first; returns how many were new
 *   reset(): void;
 *   setCursor(id: string): void;                           // move the cursor without changing state
 *   readonly version: number;
 *   readonly session: SessionSummary | undefined;          // the snapshot's summary
 *   readonly messages: readonly ViewMessage[];             // oldest first; a changed message is a NEW object
 *   message(id: string): ViewMessage | undefined;
 *   readonly tools: ReadonlyMap<string, ToolCall>;         // by tool_use_id, first seen first; changed → new object
 *   readonly workers: ReadonlyMap<string, Worker>;         // by worker session id, first seen first
 *   readonly turn: TurnState;                              // { id, status: idle|in_flight|completed|failed|cancelled, reason }
 *   readonly costUsd: number;                              // snapshot's cost_so_far_usd + calls seen since
 *   readonly errors: readonly string[];                    // "<error_class>: <message>" of llm.call_failed (not cancelled)
 *   readonly feedback: ReadonlyMap<string, string>;        // turn id → rating
 *   readonly hasOlder: boolean;                            // older messages exist: page them with api.messages({before})
 *   readonly queued: readonly QueuedTurn[];                // the session's queue, next first (turn.queued, snapshot)
 *   readonly lastEventId: string;                          // the cursor
 *   readonly skipped: number;                              // unknown event types skipped
 *   readonly mismatches: number;                           // messages whose deltas disagreed with final_content
 *   readonly mode: string;                                 // permission mode ('' before the snapshot says)
 *   readonly pendingApprovals: PendingApproval[];          // waiting requests (this session's and its workers'), oldest first
 *   readonly turns: ReadonlyMap<string, TurnInfo>;         // turns seen through events: started_at, status, duration_ms, usage, llm_calls
 *   readonly context: ContextState;                        // { tokens, window, compacting, last }: the context gauge
 *   toJSON(): object;                                      // the Go View's JSON shape (what the conformance suite compares)
 * }
 * // ViewMessage: { id, role, session_id, turn_id, model, blocks: ViewBlock[], status: streaming|complete|cancelled|failed,
 * //                stop_reason, usage?: { input_tokens, output_tokens, cost_usd } }
 * // ViewBlock: a canonical Block (text | thinking+signature | tool_use id,name,input | tool_result tool_use_id,content,is_error)
 * //            plus partial_input: the raw tool.use_input_delta fragments until tool.use_end gives input (never parse it)
 * // ToolCall: { id, name, input?, status: pending|awaiting_approval|running|completed|failed|cancelled, summary, result,
 * //            error_class, error, paths?, diff?, diff_truncated?, duration_ms? }   (diff: a file-changing tool's unified diff)
 * // Worker:   { session_id, task, model, status: running|completed|failed, summary, failure_mode, cost_usd }
 *
 * type ConnState = 'connecting' | 'live' | 'reconnecting' | 'closed';
 * interface StateInfo {
 *   replayed?: number;       // 'live' after a resume with the cursor: events replayed to catch up
 *   resynced?: string;       // 'live' after a fresh snapshot replaced the view: why
 *                            //   (cursor_expired | replay_too_large | invalid_cursor | streaming_gap)
 *   resumed?: boolean;       // 'live' on a reconnect (not the first attach)
 *   closeCode?: number;      // 'reconnecting': the WebSocket close code (1008 too slow / heartbeat, 1001 shutdown, 1006 lost)
 *   closeReason?: string;    // the close reason's code ('client_too_slow', 'server_shutdown', ...)
 *   attempt?: number;        // 'reconnecting': consecutive failed attempts
 *   delayMs?: number;        // 'reconnecting': wait before the next attempt
 *   error?: string;          // what went wrong ('closed' after a permanent refusal: session gone, invalid filter)
 * }
 * class Follower {
 *   constructor(opts: {
 *     api: Api; sessionId: string;
 *     filter?: { preset?: 'preset:chat' | 'preset:full'; types?: string[]; actors?: string[]; include_worker_sessions?: boolean };
 *                                   // default preset:chat; types (explicit event_types) win over preset
 *     view?: View;                  // default a new View
 *     WebSocket?: typeof WebSocket; // default globalThis.WebSocket
 *     minBackoffMs?: number; maxBackoffMs?: number;   // 100, 5000
 *     random?: () => number;        // jitter source (tests)
 *   });
 *   readonly view: View; readonly state: ConnState; readonly sessionId: string;
 *   start(): void;                  // connect; idempotent
 *   stop(): void;                   // close for good ('closed'); no more callbacks
 *   cancel(turnId?: string, reason?: string): boolean;  // WebSocket cancel frame; default the view's in-flight turn;
 *                                                       // false when not live or no turn (use api.cancelTurn then)
 *   setFilter(f): void;             // re-subscribe on a new connection with a fresh snapshot (e.g. the inline-workers toggle)
 *   reconnect(): void;              // drop the connection and resume with the cursor (tests, "retry now" buttons)
 *   onEvent(fn: (e: RawEnvelope) => void): () => void;  // every event received, replay and unknown types included
 *                                                       // (trace mode); narrow with isEventType(e.type) to an Envelope
 *   onState(fn: (s: ConnState, info: StateInfo) => void): () => void;
 *   onChange(fn: () => void): () => void;               // the view changed; called synchronously after each frame:
 *                                                       // the UI batches to one render per animation frame
 * }
 *
 * function backoffDelay(attempt, minMs, maxMs, random?): number;  // the reconnect wait (exported for tests and UIs)
 * function wireFilter(f: FollowerFilter): Filter | PresetName;    // the subscribe frame's filter for f
 * ```
 *
 * Each `on*` returns its unsubscribe function.
 *
 * @module
 */

export * from './protocol.gen';
export { Api, ApiError, imageInput, sniffImage } from './api';
export type { ApiOptions, AttachInfo, MessagesPage, SessionChange, SessionsPage } from './api';
export { View, TOOL_AWAITING_APPROVAL } from './view';
export type { Json } from './decode';
export type { ViewMessage, ViewBlock, ToolCall, Worker, TurnState, ViewUsage, TurnInfo, ContextState } from './view';
export { Follower, backoffDelay, wireFilter } from './follower';
export { parseShellResult, shellExitCode } from './shellresult';
export type { ShellResult } from './shellresult';
export type { ConnState, StateInfo, FollowerOptions, FollowerFilter } from './follower';
