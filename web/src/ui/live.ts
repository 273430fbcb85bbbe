// LiveSession: what a session page holds while it is open. One Follower
// (preset:full, so the same socket feeds the conversation, the workers
// and trace mode), its View, the events seen for trace mode, the
// connection state with its notices, and a FrameTicker so that however
// many events arrive, the page re-renders at most once per animation
// frame.
import { signal } from '@preact/signals';
import { Follower, View, type BackgroundCommand, type ConnState, type RawEnvelope, type RevertResult, type StateInfo } from '../client/index';
import type { CheckpointStatus, TurnInfo as TurnRow } from '../client/protocol.gen';
import { api } from './api';
import { FrameTicker } from './frame';
import { loadHistory, mergeById } from './history';
import { EMPTY_OUTPUT, foldOutput, outputEnded, type LiveOutput } from './liveoutput';
import { editListed } from './sessions';

/** A notice under the header: what the connection just did. */
export interface Notice {
  kind: 'info' | 'warn' | 'error';
  text: string;
  at: number;
}

/** The banner shows only if reconnecting lasts longer than this. */
export const BANNER_DELAY_MS = 400;
/** Most events kept for trace mode (oldest dropped first). */
export const TRACE_CAP = 200_000;

export class LiveSession {
  readonly follower: Follower;
  readonly ticker = new FrameTicker();
  readonly conn = signal<ConnState>('connecting');
  readonly connInfo = signal<StateInfo>({});
  /** The debounced "reconnecting…" banner. */
  readonly banner = signal(false);
  readonly notice = signal<Notice | null>(null);
  readonly inline = signal(false);
  /** A title fetched (the first turn started after a snapshot without one) or set by this page's rename; the summary's wins. */
  readonly title = signal('');
  /** Events seen (replays included), in arrival order = id order per connection. */
  readonly events: RawEnvelope[] = [];
  /** Bumps when events were added or cleared (once per frame, through ticker). */
  eventsVersion = 0;
  /** Bumps when the log was rewritten rather than appended to (history merged). */
  eventsEpoch = 0;
  /** Times the event log was cut (a fresh snapshot replaced the view). */
  readonly gaps: { afterIndex: number; why: string }[] = [];
  private bannerTimer: ReturnType<typeof setTimeout> | undefined;
  private noticeTimer: ReturnType<typeof setTimeout> | undefined;
  private offs: (() => void)[] = [];
  private started = false;
  /** The inline state the trace history was loaded for (null: not loaded). */
  private historyFor: boolean | null = null;
  /** What trace mode says about its history. */
  readonly historyNote = signal('');
  /** GET /sessions/{id}/turns by turn id: what each turn changed, whether it can be reverted. */
  readonly turnRows = signal<ReadonlyMap<string, TurnRow>>(new Map());
  /** Whether the server takes checkpoints (null until the turn list came). */
  readonly checkpoints = signal<CheckpointStatus | null>(null);
  /** The last revert, undo or restoring fork seen (workspace.reverted, or this page's answer). */
  readonly lastRevert = signal<RevertResult | null>(null);
  /** Running shell calls' live output by tool_use_id (tool.output_delta), until their tool.completed / tool.failed. */
  readonly outputs = new Map<string, LiveOutput>();
  /** Background commands as their events tell them (over the snapshot's background_commands). */
  private bgSeen = new Map<string, BackgroundCommand>();
  private turnsTimer: ReturnType<typeof setTimeout> | undefined;
  /** Calls whose live output ended (the newest 1,000). */
  private ended = new Set<string>();
  /** A title fetch is under way. */
  private titleAsked = false;

  constructor(readonly sessionId: string) {
    this.follower = new Follower({ api, sessionId, filter: { preset: 'preset:full' }, view: new View() });
    this.offs.push(
      this.follower.onChange(this.ticker.poke),
      this.follower.onEvent((e) => {
        this.events.push(e);
        if (this.events.length > TRACE_CAP) this.events.splice(0, this.events.length - TRACE_CAP);
        this.eventsVersion++;
        this.noteEvent(e);
        this.ticker.poke();
      }),
      this.follower.onState((s, info) => this.onState(s, info)),
    );
  }

  get view(): View {
    return this.follower.view;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.follower.start();
  }

  stop(): void {
    for (const off of this.offs) off();
    this.offs = [];
    this.follower.stop();
    this.ticker.dispose();
    clearTimeout(this.bannerTimer);
    clearTimeout(this.noticeTimer);
    clearTimeout(this.turnsTimer);
  }

  /** Folds the events the page shows besides the view: background commands, reverts, the turn list's refresh. */
  private noteEvent(e: RawEnvelope): void {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case 'tool.output_delta': {
        const id = typeof p['tool_use_id'] === 'string' ? p['tool_use_id'] : '';
        const offset = typeof p['offset'] === 'number' ? p['offset'] : 0;
        if (!id || this.ended.has(id)) return; // a late delta (a replay overlap) never brings a finished call back
        const prev = this.outputs.get(id) ?? EMPTY_OUTPUT;
        const next = foldOutput(prev, String(p['stream'] ?? 'stdout'), typeof p['data'] === 'string' ? p['data'] : '', offset, p['capped'] === true);
        if (next !== prev) this.outputs.set(id, next);
        return;
      }
      case 'tool.completed':
      case 'tool.failed': {
        // The final result replaces the live output.
        const id = typeof p['tool_use_id'] === 'string' ? p['tool_use_id'] : '';
        if (id && this.outputs.delete(id)) {
          this.ended.add(id);
          if (this.ended.size > 1000) this.ended.delete(this.ended.values().next().value!);
        }
        return;
      }
      case 'tool.background_started':
      case 'tool.background_exited': {
        const id = typeof p['background_id'] === 'string' ? p['background_id'] : '';
        if (!id || e.session_id !== this.sessionId) return;
        const old = this.bgSeen.get(id);
        const c: BackgroundCommand = old
          ? { ...old }
          : { id, command: String(p['command'] ?? ''), started_at: String(p['started_at'] ?? e.ts), running: true, exit_code: null };
        if (typeof p['tool_use_id'] === 'string') c.tool_use_id = p['tool_use_id'];
        if (e.type === 'tool.background_exited') {
          c.running = false;
          c.exit_code = typeof p['exit_code'] === 'number' ? p['exit_code'] : null;
          c.end_reason = String(p['reason'] ?? 'exited');
          c.ended_at = typeof p['ended_at'] === 'string' ? p['ended_at'] : e.ts;
        }
        this.bgSeen.set(id, c);
        return;
      }
      case 'session.updated':
        // A rename or an archive (this session's or a worker's): the view
        // keeps its own summary current; the shared list follows too.
        editListed(e.session_id, p);
        return;
      case 'workspace.reverted':
        if (e.session_id === this.sessionId) this.lastRevert.value = p as unknown as RevertResult;
        this.refreshTurns();
        return;
      case 'turn.started':
        // The first turn titles the session (the server derives it): a
        // snapshot taken before it had none, so ask for it.
        if (e.session_id === this.sessionId && !this.title.value && !this.view.session?.title) this.fetchTitle();
        this.refreshTurns();
        return;
      case 'turn.completed':
      case 'turn.cancelled':
      case 'workspace.changed':
        if (e.session_id === this.sessionId) this.refreshTurns();
        return;
    }
  }

  /**
   * The session's background commands, the running first: the snapshot's
   * background_commands with what tool.background_started / _exited said
   * since (a command that ended never runs again, whatever order the two
   * sources come in).
   */
  backgroundCommands(): BackgroundCommand[] {
    const out = new Map<string, BackgroundCommand>();
    for (const c of this.view.session?.background_commands ?? []) out.set(c.id, c);
    for (const [id, c] of this.bgSeen) {
      const base = out.get(id);
      if (base && !base.running && c.running) continue;
      out.set(id, base ? { ...base, ...c, command: c.command || base.command } : c);
    }
    return [...out.values()].sort((a, b) => Number(b.running) - Number(a.running) || (a.started_at < b.started_at ? 1 : -1));
  }

  /** The server's title, once (GET /sessions/{id}); the header shows a placeholder meanwhile. */
  private fetchTitle(): void {
    if (this.titleAsked) return;
    this.titleAsked = true;
    void api.getSession(this.sessionId).then(
      (a) => {
        if (!this.title.value && a.session.title) this.title.value = a.session.title;
        this.titleAsked = false;
      },
      () => (this.titleAsked = false),
    );
  }

  /** Loads the turn list again, soon (events come in bursts). */
  refreshTurns(delayMs = 250): void {
    clearTimeout(this.turnsTimer);
    this.turnsTimer = setTimeout(() => void this.loadTurns(), delayMs);
  }

  private async loadTurns(): Promise<void> {
    try {
      const list = await api.listTurns(this.sessionId, { limit: 500 });
      this.turnRows.value = new Map(list.turns.map((t) => [t.turn_id, t]));
      this.checkpoints.value = list.checkpoints;
      this.ticker.poke();
    } catch {
      // The turn list only adds the revert buttons: without it they are absent.
    }
  }

  /** The inline toggle: re-subscribe with or without the workers' events. */
  setInline(on: boolean): void {
    if (this.inline.value === on) return;
    this.inline.value = on;
    this.follower.setFilter({ preset: 'preset:full', include_worker_sessions: on });
    if (this.historyFor !== null) void this.loadHistory();
  }

  /**
   * Trace mode: add the session's stored events from its start (and its
   * workers' when inline) to the event log, merged by id.
   */
  async loadHistory(): Promise<void> {
    const inline = this.inline.value;
    if (this.historyFor === inline) return;
    this.historyFor = inline;
    this.historyNote.value = 'loading history…';
    try {
      const h = await loadHistory(this.sessionId, inline);
      if (this.historyFor !== inline) return; // toggled meanwhile; a newer load runs
      const merged = mergeById(h.events, this.events);
      this.events.splice(0, this.events.length, ...merged.slice(-TRACE_CAP));
      this.eventsVersion++;
      this.eventsEpoch++;
      this.historyNote.value = h.gap
        ? `history: ${h.events.length} events (streaming events the server no longer holds are not listed)`
        : `history: ${h.events.length} events`;
      this.ticker.poke();
    } catch (e) {
      const code = (e as Error).message;
      this.historyNote.value =
        code === 'replay_too_large'
          ? 'history too long to replay: listing from when this page opened'
          : `history not loaded (${code}): listing from when this page opened`;
    }
  }

  private onState(s: ConnState, info: StateInfo): void {
    this.conn.value = s;
    this.connInfo.value = info;
    if (s === 'reconnecting') {
      if (this.bannerTimer === undefined) {
        this.bannerTimer = setTimeout(() => (this.banner.value = true), BANNER_DELAY_MS);
      }
      return;
    }
    clearTimeout(this.bannerTimer);
    this.bannerTimer = undefined;
    this.banner.value = false;
    if (s === 'live') this.refreshTurns(0);
    if (s === 'live' && info.resynced) {
      // A fresh snapshot: keep the output of calls still running (their
      // next delta marks what was missed), drop the rest.
      for (const id of [...this.outputs.keys()]) if (outputEnded(this.view.tools.get(id)?.status)) this.outputs.delete(id);
      this.gaps.push({ afterIndex: this.events.length, why: info.resynced });
      const why =
        info.resynced === 'streaming_gap'
          ? 'some streamed text was no longer available'
          : info.resynced.replace(/_/g, ' ');
      this.say('warn', `Resynced from a fresh snapshot (${why}).`);
    } else if (s === 'live' && info.resumed) {
      const n = info.replayed ?? 0;
      this.say('info', `Reconnected: replayed ${n} event${n === 1 ? '' : 's'}.`);
    } else if (s === 'closed' && info.error) {
      this.say('error', info.error);
    }
    this.ticker.poke();
  }

  say(kind: Notice['kind'], text: string, forMs = 6000): void {
    this.notice.value = { kind, text, at: Date.now() };
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => (this.notice.value = null), forMs);
  }
}
