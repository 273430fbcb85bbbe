// Helpers of the ACP suites (tests/acp/*.test.mjs): a metis server on
// a free loopback port, and `metis acp` driven by the official
// TypeScript SDK (@agentclientprotocol/sdk) over stdio.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

export const bin = resolve(process.env.METIS_BIN ?? "bin/metis");
export const home = mkdtempSync(join(tmpdir(), "metis-acp-"));
export const workspace = join(home, "workspace");
mkdirSync(workspace);
writeFileSync(join(workspace, "README.md"), "hello\n");

// startServer starts a metis server on a free loopback port (its first stdout line names
// its URL), stopped by cleanup.
const servers = [];
export async function startServer(demoDelay, extraArgs = []) {
  const server = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--home", join(home, `home-${servers.length}`), "--demo-delay", demoDelay, "--log-level", "warn", ...extraArgs], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  servers.push(server);
  return new Promise((ok, fail) => {
    let buf = "";
    const timer = setTimeout(() => fail(new Error("metis serve did not start")), 30000);
    server.stdout.on("data", (d) => {
      buf += d;
      const m = buf.match(/http:\/\/[0-9.:]+/);
      if (m) {
        clearTimeout(timer);
        ok(m[0]);
      }
    });
    server.on("exit", (code) => fail(new Error(`metis serve exited with ${code}`)));
  });
}

// cleanup stops the servers and removes the home: each suite calls it
// after its tests.
export async function cleanup() {
  for (const server of servers) {
    server.kill("SIGTERM");
    await new Promise((ok) => server.once("exit", ok));
  }
  rmSync(home, { recursive: true, force: true });
}

// runAgent starts `metis acp` and runs op with the SDK's client context;
// it checks that stdout carried only JSON-RPC lines and that the agent
// exits 0 once its stdin closes. onPermission, when given, answers
// session/request_permission (its argument is the request's context:
// params, signal).
// requests, when given, maps other client methods (fs/read_text_file,
// fs/write_text_file) to their handlers; args are more flags of
// `metis acp`.
export async function runAgent(op, url, onPermission, requests = {}, args = []) {
  const child = spawn(bin, ["acp", "--server", url, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const lines = [];
  let pending = "";
  const input = Readable.toWeb(child.stdout).pipeThrough(
    new TransformStream({
      transform(chunk, ctrl) {
        pending += Buffer.from(chunk).toString("utf8");
        let i;
        while ((i = pending.indexOf("\n")) >= 0) {
          lines.push(pending.slice(0, i));
          pending = pending.slice(i + 1);
        }
        ctrl.enqueue(chunk);
      },
    }),
  );
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), input);
  const updates = [];
  let app = acp.client({ name: "metis-acp-test" }).onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });
  if (onPermission) app = app.onRequest(acp.methods.client.session.requestPermission, onPermission);
  for (const [method, handler] of Object.entries(requests)) app = app.onRequest(method, handler);
  const exited = new Promise((ok) => child.once("exit", (code) => ok(code)));
  const result = await app.connectWith(stream, (agent) => op(agent, updates));
  child.stdin.end();
  const code = await exited;
  assert.equal(code, 0, `metis acp exited with ${code}; stderr:\n${stderr}`);
  for (const l of lines) {
    if (l.trim() === "") continue;
    assert.equal(JSON.parse(l).jsonrpc, "2.0", `not a JSON-RPC line on stdout: ${l}`);
  }
  return result;
}

// until waits for an update that pred holds for (the updates a
// session's stream sends come when they come, not before an answer),
// and returns it.
export async function until(updates, pred, what) {
  for (let i = 0; i < 1500; i++) {
    const u = updates.find(pred);
    if (u) return u;
    await new Promise((ok) => setTimeout(ok, 20));
  }
  assert.fail(`timed out waiting for ${what}`);
}

export const text = (updates, kind) =>
  updates
    .filter((u) => u.sessionUpdate === kind && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");

export async function storedText(sessionId, url) {
  const r = await fetch(`${url}/sessions/${sessionId}/messages?limit=100`);
  const body = await r.json();
  return body.messages
    .filter((m) => m.role === "assistant")
    .flatMap((m) => m.content.filter((b) => b.type === "text").map((b) => b.text))
    .join("");
}

