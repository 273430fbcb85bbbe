// The editor's terminal under the official TypeScript SDK: when the
// client offers terminals, each shell call is mirrored in an editor
// terminal whose command is `metis tool-output` (a read-only view of the
// call's live output: the command itself runs on the server, in its
// sandbox). The client here runs each terminal's command for real, as
// an editor would; the terminal's output must equal the command's, and
// its exit code the command's. Without the capability nothing changes.
// Run by scripts/test.d/40-acp.sh.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { basename } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { cleanup, runAgent, startServer, workspace } from "./helpers.mjs";

// auto: shell runs without asking.
const url = await startServer("0s", ["--default-mode", "auto"]);
after(cleanup);

const init = (agent, clientCapabilities) =>
  agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities });
const newSession = (agent) => agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
const shell = (agent, sessionId, input) =>
  agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: `/tool shell ${JSON.stringify(input)}` }] });

// terminals is an editor's terminals: each runs its command for real.
function terminals() {
  const list = new Map();
  const calls = [];
  let n = 0;
  return {
    list,
    calls,
    handlers: {
      [acp.methods.client.terminal.create]: ({ params }) => {
        const id = `term-${++n}`;
        calls.push({ method: "create", ...params });
        const env = { ...process.env };
        for (const { name, value } of params.env ?? []) env[name] = value;
        const child = spawn(params.command, params.args ?? [], { env, stdio: ["ignore", "pipe", "pipe"] });
        const t = { output: "", exit: null, child };
        t.exited = new Promise((ok) =>
          child.once("exit", (exitCode, signal) => {
            t.exit = { exitCode, signal };
            ok(t.exit);
          }),
        );
        child.stdout.on("data", (d) => (t.output += d));
        child.stderr.on("data", (d) => (t.output += d));
        list.set(id, t);
        return { terminalId: id };
      },
      [acp.methods.client.terminal.output]: ({ params }) => {
        const t = list.get(params.terminalId);
        return { output: t.output, truncated: false, exitStatus: t.exit };
      },
      [acp.methods.client.terminal.waitForExit]: async ({ params }) => {
        calls.push({ method: "wait", ...params });
        return await list.get(params.terminalId).exited;
      },
      [acp.methods.client.terminal.release]: ({ params }) => {
        calls.push({ method: "release", ...params });
        const t = list.get(params.terminalId);
        if (t.exit === null) t.child.kill("SIGKILL");
        return {};
      },
    },
  };
}

const waitFor = async (what, cond) => {
  const deadline = Date.now() + 20000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 20));
  }
};

test("a shell call is mirrored in an editor terminal: same output, same exit code, released after", async () => {
  const ed = terminals();
  const command = "echo first; sleep 0.3; echo to-stderr >&2; sleep 0.2; echo last; exit 7";
  await runAgent(
    async (agent, updates) => {
      await init(agent, { terminal: true });
      const { sessionId } = await newSession(agent);
      const res = await shell(agent, sessionId, { command });
      assert.equal(res.stopReason, "end_turn");
      // The terminal was created for the call, running the mirror.
      const create = ed.calls.find((c) => c.method === "create");
      assert.ok(create, "no terminal/create");
      assert.equal(basename(create.command), "metis");
      assert.equal(create.args[0], "tool-output");
      assert.equal(create.args[1], sessionId);
      assert.equal(create.sessionId, sessionId);
      // The tool call embeds it, while running and at the end.
      const withTerm = updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.content?.some((c) => c.type === "terminal"));
      assert.ok(withTerm.length >= 2, JSON.stringify(updates));
      const done = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
      assert.equal(done.content[0].type, "terminal");
      assert.equal(done.content[0].terminalId, "term-1");
      assert.equal(done.rawOutput.exit_code, 7);
      // The mirror printed what the command printed and exited with its code.
      const t = ed.list.get("term-1");
      await t.exited;
      assert.equal(t.output, "first\nto-stderr\nlast\n");
      assert.deepEqual(t.exit, { exitCode: 7, signal: null });
      // Released after waiting for the exit.
      await waitFor("terminal/release", () => ed.calls.some((c) => c.method === "release"));
      const order = ed.calls.map((c) => c.method);
      assert.ok(order.indexOf("wait") < order.indexOf("release"), order.join(","));
    },
    url,
    undefined,
    ed.handlers,
  );
});

test("a background shell call gets no terminal", async () => {
  const ed = terminals();
  await runAgent(
    async (agent) => {
      await init(agent, { terminal: true });
      const { sessionId } = await newSession(agent);
      await shell(agent, sessionId, { command: "sleep 0.1", background: true });
      assert.equal(ed.calls.length, 0, JSON.stringify(ed.calls));
    },
    url,
    undefined,
    ed.handlers,
  );
});

test("without the terminal capability (or with --editor-terminal=false) nothing changes", async () => {
  for (const [caps, args] of [
    [{}, []],
    [{ terminal: true }, ["--editor-terminal=false"]],
  ]) {
    const ed = terminals();
    await runAgent(
      async (agent, updates) => {
        await init(agent, caps);
        const { sessionId } = await newSession(agent);
        await shell(agent, sessionId, { command: "echo hi" });
        assert.equal(ed.calls.length, 0);
        const done = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
        assert.ok(!done.content.some((c) => c.type === "terminal"), JSON.stringify(done));
        assert.match(done.content.at(-1).content.text, /hi/);
      },
      url,
      undefined,
      ed.handlers,
      args,
    );
  }
});
