// The session's background commands (shell with background: true): a
// strip above the composer, folded, that says how many run; open, each
// command with its state (running for how long, exited with its code,
// killed, timed out, stopped with the server). They outlive the turn that
// started them: cancelling a turn does not stop them.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { BackgroundCommand } from '../client/index';
import { ago, elapsed, oneLine } from './format';
import type { LiveSession } from './live';

const REASONS: Record<string, string> = {
  exited: 'exited',
  killed: 'killed',
  timeout: 'timed out',
  session_deleted: 'stopped (session deleted)',
  server_shutdown: 'stopped with the server',
  server_lost: 'lost (the server died)',
  supervisor_killed: 'stopped (killed its supervisor)',
};

/** A command's state in a few words. */
export function bgState(c: BackgroundCommand, now = Date.now()): { cls: string; text: string } {
  if (c.running) {
    const t = Date.parse(c.started_at);
    return { cls: 'st-running', text: 'running' + (isFinite(t) ? ' ' + elapsed(Math.max(0, now - t)) : '') };
  }
  const why = REASONS[c.end_reason ?? 'exited'] ?? c.end_reason ?? 'ended';
  const code = c.exit_code === null || c.exit_code === undefined ? '' : ` (${c.exit_code})`;
  const ok = (c.end_reason ?? 'exited') === 'exited' && c.exit_code === 0;
  return { cls: ok ? 'st-completed' : c.end_reason === 'exited' || !c.end_reason ? 'st-failed' : 'st-cancelled', text: why + code };
}

export function BackgroundCommands(p: { live: LiveSession }): VNode | null {
  const cmds = p.live.backgroundCommands();
  if (cmds.length === 0) return null;
  const running = cmds.filter((c) => c.running).length;
  return html`<details class="bg-commands" id="bg-commands" open=${running > 0}>
    <summary>
      <span class=${'badge ' + (running ? 'st-running' : '')}>${running} running</span>
      <span>background command${cmds.length === 1 ? '' : 's'}${running < cmds.length ? ` · ${cmds.length - running} ended` : ''}</span>
      <span class="muted small">they outlive the turn; cancelling it does not stop them</span>
    </summary>
    <ul>
      ${cmds.map((c) => {
        const st = bgState(c);
        return html`<li key=${c.id} class="bg-command" data-bg=${c.id} data-running=${String(c.running)}>
          <span class=${'badge ' + st.cls}>${st.text}</span>
          <code class="cmd" title=${c.command}>$ ${oneLine(c.command, 160)}</code>
          <span class="muted small" title=${c.id}>started ${ago(c.started_at)}</span>
        </li>`;
      })}
    </ul>
  </details>`;
}
