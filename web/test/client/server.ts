// Starts a real bin/metis on a loopback port with a temporary home, for
// the Follower's tests. The server is killed when the test process ends.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './helpers';

export interface TestServer {
  url: string;
  workspace: string;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/** Starts `metis serve` with extra flags; resolves once it prints its URL. */
export async function startServer(flags: string[] = []): Promise<TestServer> {
  const bin = process.env['METIS_BIN'] ?? join(repoRoot(), 'bin', 'metis');
  const dir = mkdtempSync(join(tmpdir(), 'metis-tsclient-'));
  const home = join(dir, 'home');
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  writeFileSync(join(workspace, 'README.md'), '# test workspace\n');
  const env = { ...process.env };
  delete env['ANTHROPIC_API_KEY'];
  delete env['OPENAI_API_KEY'];
  delete env['OPENAI_BASE_URL'];
  const p = spawn(bin, ['serve', '--home', home, '--addr', '127.0.0.1:0', '--log-level', 'warn', ...flags], {
    env, stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(p);
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`metis did not start:\n${out}`)), 30_000);
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /serving (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    p.stdout!.on('data', onData);
    p.stderr!.on('data', onData);
    p.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`metis exited (${code}):\n${out}`));
    });
  });
  return {
    url,
    workspace,
    stop: () =>
      new Promise<void>((resolve) => {
        live.delete(p);
        if (p.exitCode !== null) {
          rmSync(dir, { recursive: true, force: true });
          resolve();
          return;
        }
        const kill = setTimeout(() => p.kill('SIGKILL'), 10_000);
        p.once('exit', () => {
          clearTimeout(kill);
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        p.kill('SIGTERM');
      }),
  };
}

/** Resolves when cond() holds, checking after every call of poke (and on a slow timer). */
export function until(cond: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const t = setInterval(() => {
      if (cond()) {
        clearInterval(t);
        resolve();
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(t);
        reject(new Error(`timed out waiting for ${what}`));
      }
    }, 5);
  });
}
