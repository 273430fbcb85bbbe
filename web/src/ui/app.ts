// The dashboard's shell: the top bar, the page for the route, the
// palette, and the global keys (Ctrl/Cmd+K, Esc).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect } from 'preact/hooks';
import { installCopy } from './copy';
import { Palette, paletteOpen } from './palette';
import { route } from './route';
import { SessionPage } from './session';
import { SessionsPage } from './sessions';
import { cycleTheme, resolvedTheme, themeChoice } from './theme';

export function App(): VNode {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'k') {
        e.preventDefault();
        paletteOpen.value = !paletteOpen.value;
      } else if (e.key === 'Escape' && paletteOpen.value) {
        paletteOpen.value = false;
      }
    };
    addEventListener('keydown', onKey);
    const offCopy = installCopy();
    return () => {
      removeEventListener('keydown', onKey);
      offCopy();
    };
  }, []);
  const r = route.value;
  const theme = resolvedTheme();
  return html`<div class="app">
    <header class="topbar">
      <a class="brand" href="#/">metis</a>
      <span class="spacer"></span>
      <button class="small ghost" id="palette-button" onClick=${() => (paletteOpen.value = true)} title="Jump to a session or run a command (Ctrl K)" aria-label="search and commands">
        <span class="search-icon" aria-hidden="true">⌕</span><span class="palette-label">Search</span>
        <span class="keys"><kbd>${navigator.platform.startsWith('Mac') ? '⌘' : 'Ctrl'}</kbd> <kbd>K</kbd></span>
      </button>
      <button class="small ghost" id="theme-toggle" onClick=${cycleTheme}
        title=${'Theme: ' + themeChoice.value + ' (click to switch)'}>${theme === 'dark' ? '☾' : '☀'}<span class="theme-label"> ${theme}${themeChoice.value === 'system' ? ' (system)' : ''}</span></button>
    </header>
    <main>
      ${r.page === 'sessions' ? html`<${SessionsPage} />` : html`<${SessionPage} key=${r.id} id=${r.id} tab=${r.tab} />`}
    </main>
    <${Palette} />
  </div>`;
}
