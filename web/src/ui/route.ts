// Hash routing: the server serves one page at "/", so the dashboard's
// own paths live after the '#' and never collide with the API.
//
//   #/                       sessions
//   #/s/<id>                 a session's conversation
//   #/s/<id>/workers         its workers
//   #/s/<id>/trace           trace mode
import { signal } from '@preact/signals';

export type Tab = 'chat' | 'workers' | 'trace';
export type Route = { page: 'sessions' } | { page: 'session'; id: string; tab: Tab };

export function parse(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decode);
  if (parts[0] === 's' && parts[1]) {
    const tab = parts[2] === 'workers' || parts[2] === 'trace' ? parts[2] : 'chat';
    return { page: 'session', id: parts[1], tab };
  }
  return { page: 'sessions' };
}

/** decodeURIComponent that takes a malformed escape as literal text. */
function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function href(r: Route): string {
  if (r.page === 'sessions') return '#/';
  const base = '#/s/' + encodeURIComponent(r.id);
  return r.tab === 'chat' ? base : base + '/' + r.tab;
}

export const route = signal<Route>(parse(location.hash));
addEventListener('hashchange', () => (route.value = parse(location.hash)));

export function go(r: Route): void {
  const h = href(r);
  if (location.hash !== h) location.hash = h;
  else route.value = parse(h);
}
