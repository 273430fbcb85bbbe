// MCP servers: the servers metis connects to (config.yaml's and those
// sessions were given), each with its state, its tools and its last
// error. Shown on the sessions page (GET /mcp) and, for one session, on
// its Workers tab (GET /sessions/{id}/mcp_servers). Nothing shows when
// none is configured.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { MCPStatus } from '../client/index';
import { api } from './api';
import { ago } from './format';

const POLL_MS = 5000;

export function McpServers(p: { sessionId?: string }): VNode | null {
  const [st, setSt] = useState<MCPStatus | null>(null);
  const [err, setErr] = useState('');
  useEffect(() => {
    let stop = false;
    const load = async (): Promise<void> => {
      try {
        const s = p.sessionId ? await api.sessionMcp(p.sessionId) : await api.mcp();
        if (!stop) (setSt(s), setErr(''));
      } catch (e) {
        if (!stop) setErr((e as Error).message);
      }
    };
    void load();
    const t = setInterval(() => void load(), POLL_MS);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, [p.sessionId]);
  if (err && !st) return null;
  if (!st || (st.servers.length === 0 && !st.config_error)) return null;
  return html`<section class="mcp" id="mcp-servers" aria-label="MCP servers">
    <h2>MCP servers <span class="muted small">${st.servers.length}</span></h2>
    ${st.config_error ? html`<div class="notice error">config.yaml mcp_servers: ${st.config_error}</div>` : null}
    <div class="mcp-list">
      ${st.servers.map(
        (s) => html`<details key=${s.scope + ':' + s.name} class=${'mcp-server st-' + s.state} data-mcp=${s.name}>
          <summary>
            <span class="mcp-name">${s.name}</span>
            <span class=${'badge st-' + (s.state === 'running' ? 'completed' : s.state === 'failed' || s.state === 'invalid' ? 'failed' : s.state === 'restarting' || s.state === 'starting' ? 'running' : 'idle')}>${s.state}</span>
            <span class="muted small">${s.scope} · ${s.transport} · ${s.tools.filter((t) => !t.skipped).length} tools${s.restarts ? ` · ${s.restarts} restarts` : ''}</span>
          </summary>
          <div class="mcp-body">
            <div class="mono small muted">${s.command ?? s.url ?? ''}</div>
            ${s.server_name ? html`<div class="small muted">${s.server_name} ${s.server_version ?? ''}</div>` : null}
            ${s.last_error ? html`<div class="tool-error">${s.last_error}${s.last_error_at ? html` <span class="muted">(${ago(s.last_error_at)})</span>` : null}</div>` : null}
            <ul class="mcp-tools">
              ${s.tools.map(
                (t) => html`<li key=${t.tool} class=${t.skipped ? 'skipped' : ''}>
                  <span class="mono">${t.name || t.tool}</span>
                  ${t.kind ? html` <span class="badge">${t.kind}</span>` : null}
                  ${t.description ? html` <span class="muted small">${t.description}</span>` : null}
                  ${t.problem ? html` <span class="tool-error">${t.problem}</span>` : null}
                </li>`,
              )}
            </ul>
          </div>
        </details>`,
      )}
    </div>
  </section>`;
}
