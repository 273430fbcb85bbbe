// LiveSession: what a session page holds while it is open. One Follower
// (preset:full, so the same socket feeds the conversation, the workers
// and trace mode), its View, the events seen for trace mode, the
// connection state with its notices, and a FrameTicker so that however
// many events arrive, the page re-renders at most once per animation
// frame.
import { signal } from '@preact/signals';
import { Follower, View, type ConnState, type RawEnvelope, type StateInfo } from '../client/index';
import { api } from './api';
import { FrameTicker } from './frame';
import { loadHistory, mergeById } from './history';

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
  /** A title this page set (a rename), until the next snapshot carries it. */
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

  constructor(readonly sessionId: string) {
    this.follower = new Follower({ api, sessionId, filter: { preset: 'preset:full' }, view: new View() });
    this.offs.push(
      this.follower.onChange(this.ticker.poke),
      this.follower.onEvent((e) => {
        this.events.push(e);
        if (this.events.length > TRACE_CAP) this.events.splice(0, this.events.length - TRACE_CAP);
        this.eventsVersion++;
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
    if (s === 'live' && info.resynced) {
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
