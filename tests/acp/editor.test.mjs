// The editor-facing parts of `metis acp` under the official TypeScript
// SDK: permission requests (each of the four options, a cancel while
// asking), session modes and config options, a rename and a mode change
// made elsewhere between prompts, metis's slash commands, diffs of
// edits, and what session/load keeps (diffs, cancelled turns).
// Run by scripts/test.d/40-acp.sh with `node --test`.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { cleanup, runAgent, startServer, text, until, workspace } from "./helpers.mjs";

// Sessions start in default mode: shell and edits ask.
const url = await startServer("0s", ["--default-mode", "default"]);
after(cleanup);

const init = (agent) => agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
const newSession = (agent) => agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
const prompt = (agent, sessionId, t) => agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: t }] });
const shell = (command) => `/tool shell ${JSON.stringify({ command })}`;
const selected = (optionId) => ({ outcome: { outcome: "selected", optionId } });

// toolResults are the session's stored tool results, oldest first.
async function toolResults(sessionId) {
  const r = await fetch(`${url}/sessions/${sessionId}/messages?limit=100`);
  assert.equal(r.status, 200);
  return (await r.json()).messages.filter((m) => m.role === "tool").flatMap((m) => m.content.filter((b) => b.type === "tool_result"));
}

for (const [option, runs, asksAgain] of [
  ["allow_once", true, true],
  ["allow_always", true, false],
  ["reject_once", false, true],
  ["reject_always", false, false],
]) {
  test(`session/request_permission: ${option}`, async () => {
    const asked = [];
    await runAgent(
      async (agent) => {
        await init(agent);
        const { sessionId } = await newSession(agent);
        assert.equal((await prompt(agent, sessionId, shell("echo one"))).stopReason, "end_turn");
        assert.equal(asked.length, 1);
        const req = asked[0];
        assert.equal(req.sessionId, sessionId);
        assert.match(req.toolCall.title, /^Run echo one/);
        assert.equal(req.toolCall.kind, "execute");
        assert.deepEqual(
          req.options.map((o) => o.kind),
          ["allow_once", "allow_always", "reject_once", "reject_always"],
        );
        await prompt(agent, sessionId, shell("echo two"));
        assert.equal(asked.length, asksAgain ? 2 : 1, "was the second call asked");
        const results = await toolResults(sessionId);
        assert.equal(results.length, 2);
        for (const r of results) {
          assert.equal(r.is_error, !runs, JSON.stringify(r));
          if (runs) assert.match(r.content, /one|two/);
        }
      },
      url,
      ({ params }) => {
        asked.push(params);
        return selected(option);
      },
    );
  });
}

test("a cancel while the editor asks: the cancelled outcome, the prompt ends cancelled, nothing runs", async () => {
  await runAgent(
    async (agent) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      const r = await prompt(agent, sessionId, shell("echo never"));
      assert.equal(r.stopReason, "cancelled");
      const results = await toolResults(sessionId);
      assert.ok(results.every((b) => b.is_error), JSON.stringify(results));
    },
    url,
    async ({ params, agent }) => {
      await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
      return { outcome: { outcome: "cancelled" } };
    },
  );
});

test("modes and config options: offered on session/new, changed with session/set_mode and session/set_config_option", async () => {
  await runAgent(async (agent, updates) => {
    await init(agent);
    const s = await newSession(agent);
    assert.equal(s.modes.currentModeId, "default");
    assert.deepEqual(
      s.modes.availableModes.map((m) => m.id),
      ["default", "accept_edits", "plan", "auto"],
    );
    const byId = (opts) => Object.fromEntries(opts.map((o) => [o.id, o]));
    const opts = byId(s.configOptions);
    assert.equal(opts.mode.currentValue, "default");
    assert.equal(opts.mode.category, "mode");
    assert.equal(opts.model.currentValue, "builtin:demo");
    assert.equal(opts.model.category, "model");
    assert.ok(opts.model.options.some((o) => o.value === "builtin:demo"));

    await agent.request(acp.methods.agent.session.setMode, { sessionId: s.sessionId, modeId: "plan" });
    const summary = await (await fetch(`${url}/sessions/${s.sessionId}`)).json();
    assert.equal(summary.session.mode, "plan");
    const r = await agent.request(acp.methods.agent.session.setConfigOption, { sessionId: s.sessionId, configId: "mode", value: "auto" });
    assert.equal(byId(r.configOptions).mode.currentValue, "auto");
    await assert.rejects(agent.request(acp.methods.agent.session.setMode, { sessionId: s.sessionId, modeId: "yolo" }), (e) => e.code === -32602);
    await assert.rejects(
      agent.request(acp.methods.agent.session.setConfigOption, { sessionId: s.sessionId, configId: "model", value: "not a model" }),
      (e) => e.code === -32602,
    );
    assert.ok(updates.some((u) => u.sessionUpdate === "config_option_update"));
  }, url);
});

test("a rename and a mode change made elsewhere between prompts reach the idle editor", async () => {
  await runAgent(async (agent, updates) => {
    await init(agent);
    const { sessionId } = await newSession(agent);
    assert.equal((await prompt(agent, sessionId, "/echo before")).stopReason, "end_turn");
    // As the dashboard or the TUI does, while no prompt runs.
    const patch = (body) =>
      fetch(`${url}/sessions/${sessionId}`, { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    assert.equal((await patch({ title: "renamed in the dashboard" })).status, 200);
    const info = await until(updates, (u) => u.sessionUpdate === "session_info_update", "session_info_update");
    assert.equal(info.title, "renamed in the dashboard");
    assert.equal((await patch({ mode: "plan" })).status, 200);
    await until(updates, (u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "plan", "current_mode_update(plan)");
    const opts = await until(
      updates,
      (u) => u.sessionUpdate === "config_option_update" && u.configOptions.find((o) => o.id === "mode").currentValue === "plan",
      "config_option_update(plan)",
    );
    assert.equal(opts.configOptions.find((o) => o.id === "mode").category, "mode");
    assert.equal(updates.filter((u) => u.sessionUpdate === "session_info_update").length, 1);
  }, url);
});

test("slash commands: announced, run by metis, never sent to the model", async () => {
  await runAgent(async (agent, updates) => {
    await init(agent);
    const { sessionId } = await newSession(agent);
    const cmds = await until(updates, (u) => u.sessionUpdate === "available_commands_update", "available_commands_update");
    assert.deepEqual(
      cmds.availableCommands.map((c) => c.name),
      ["compact", "mode", "model", "help"],
    );
    assert.equal((await prompt(agent, sessionId, "/mode accept_edits")).stopReason, "end_turn");
    await until(updates, (u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "accept_edits", "current_mode_update(accept_edits)");
    await prompt(agent, sessionId, "/help");
    assert.match(text(updates, "agent_message_chunk"), /Mode: accept_edits\.metis commands/);
    const summary = await (await fetch(`${url}/sessions/${sessionId}`)).json();
    assert.equal(summary.session.mode, "accept_edits");
    assert.equal(summary.session.turn_count, 0);
    const r = await prompt(agent, sessionId, "/compact");
    assert.equal(r.stopReason, "end_turn");
    assert.match(text(updates, "agent_message_chunk"), /Compacting the conversation|Nothing compacted/);
  }, url);
});

let editSession;

test("an edit's diff: asked with the proposed change, completed with diff content and locations", async () => {
  let asked;
  await runAgent(
    async (agent, updates) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      editSession = sessionId;
      await prompt(agent, sessionId, '/tool edit_file {"path": "README.md", "old_string": "hello", "new_string": "hi there"}');
      const diff = asked.toolCall.content.find((c) => c.type === "diff");
      assert.deepEqual(diff, { type: "diff", path: `${workspace}/README.md`, oldText: "hello", newText: "hi there" });
      const done = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
      const d = done.content.find((c) => c.type === "diff");
      assert.equal(d.path, `${workspace}/README.md`);
      assert.equal(d.oldText, "hello\n");
      assert.equal(d.newText, "hi there\n");
      assert.deepEqual(done.locations, [{ path: `${workspace}/README.md`, line: 1 }]);
      // A cancelled turn, for the load below.
      const cancelled = prompt(agent, sessionId, '/tool shell {"command": "sleep 30"}');
      await cancelled;
    },
    url,
    ({ params, agent }) => {
      if (params.toolCall.kind === "edit") {
        asked = params;
        return selected("allow_once");
      }
      return agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId }).then(() => ({ outcome: { outcome: "cancelled" } }));
    },
  );
});

test("session/load keeps the diff and marks the cancelled turn", async () => {
  assert.ok(editSession, "the edit test made a session");
  await runAgent(async (agent, updates) => {
    await init(agent);
    const r = await agent.request(acp.methods.agent.session.load, { sessionId: editSession, cwd: workspace, mcpServers: [] });
    assert.equal(r.modes.currentModeId, "default");
    const done = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
    assert.ok(done.content.some((c) => c.type === "diff" && c.newText === "hi there\n"), JSON.stringify(done));
    assert.match(text(updates, "agent_message_chunk"), /\*Cancelled\* \(user_cancel\)\n$/);
    assert.ok(updates.some((u) => u.sessionUpdate === "available_commands_update"));
  }, url);
});
