// The session's background commands (shell with background: true): a
// strip above the composer, folded, that says how many run; open, each
// command with its state (running for how long, exited with its code,
// killed, timed out, stopped with the server, lost with the server or
// with its cluster node). They outlive the turn that
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
  owner_lost: 'lost (its cluster node failed)',
  supervisor_killed: 'stopped (killed its supervisor)',
};

/** What a reason means, for the state's tooltip. */
const HINTS: Record<string, string> = {
  server_lost: 'the server stopped without ending it; its next start found the command gone',
  owner_lost: 'cluster mode: the node that ran it lost this session to another node (it died or was cut off), and the command went with it',
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
          <span class=${'badge ' + st.cls} title=${HINTS[c.end_reason ?? ''] ?? undefined}>${st.text}</span>
          <code class="cmd" title=${c.command}>$ ${oneLine(c.command, 160)}</code>
          <span class="muted small" title=${c.id}>started ${ago(c.started_at)}</span>
        </li>`;
      })}
    </ul>
  </details>`;
}
