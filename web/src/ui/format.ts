// Small formatting helpers shared by the pages.

export function usd(v: number | undefined | null): string {
  if (v == null || !isFinite(v)) return '$0.00';
  if (v === 0) return '$0.00';
  if (v < 0.01) return '$' + v.toFixed(4);
  return '$' + v.toFixed(2);
}

export function tokens(n: number | undefined | null): string {
  if (n == null || !isFinite(n)) return '0';
  if (n >= 1_000_000) return (n / 1_000_000).toFixed(1) + 'M';
  if (n >= 10_000) return Math.round(n / 1000) + 'k';
  if (n >= 1000) return (n / 1000).toFixed(1) + 'k';
  return String(n);
}

export function shortId(id: string | null | undefined): string {
  if (!id) return '';
  const i = id.indexOf('_');
  const body = i >= 0 ? id.slice(i + 1) : id;
  return (i >= 0 ? id.slice(0, i + 1) : '') + body.slice(-6);
}

export function ago(ts: string | undefined | null, now = Date.now()): string {
  if (!ts) return '';
  const t = Date.parse(ts);
  if (!isFinite(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return s + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return Math.floor(s / 86400) + 'd ago';
}

export function clock(ts: string): string {
  const d = new Date(ts);
  if (isNaN(d.getTime())) return ts;
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function ms(v: number): string {
  if (v < 1) return v.toFixed(2) + ' ms';
  if (v < 1000) return Math.round(v) + ' ms';
  return (v / 1000).toFixed(2) + ' s';
}

export function oneLine(s: string, max = 120): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

/** A human duration: "850 ms", "12 s", "3m 05s", "1h 02m". */
export function elapsed(v: number): string {
  if (!isFinite(v) || v < 0) return '';
  if (v < 1000) return Math.round(v) + ' ms';
  const s = Math.floor(v / 1000);
  if (s < 60) return (v < 10_000 ? (v / 1000).toFixed(1) : String(s)) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}
