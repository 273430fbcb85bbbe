// The official TypeScript ACP SDK, as a second and independent client of
// `metis acp`: it drives the real binary (bin/metis) over stdio through
// a whole builtin:demo turn, then a session/load of the same session.
// Run by scripts/test.d/40-acp.sh with `node --test`.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { cleanup, runAgent as run, startServer, storedText as stored, text, workspace } from "./helpers.mjs";

const serverURL = await startServer("0s");
after(cleanup);
const runAgent = (op, url = serverURL) => run(op, url);
const storedText = (sid, url = serverURL) => stored(sid, url);

let sessionId;

test("a whole turn: thinking, a tool call, usage, end_turn", async () => {
  await runAgent(async (agent, updates) => {
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.agentCapabilities.loadSession, true);
    const s = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    sessionId = s.sessionId;
    const r = await agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "What is in this workspace?" }],
    });
    assert.equal(r.stopReason, "end_turn");

    assert.match(text(updates, "agent_thought_chunk"), /look at the workspace/);
    assert.equal(text(updates, "agent_message_chunk"), await storedText(sessionId));
    const calls = updates.filter((u) => u.sessionUpdate === "tool_call");
    assert.equal(calls.length, 1);
    assert.equal(calls[0].kind, "search");
    const statuses = updates
      .filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === calls[0].toolCallId && u.status)
      .map((u) => u.status);
    assert.deepEqual(statuses, ["in_progress", "completed"]);
    const done = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
    assert.match(done.content[0].content.text, /README\.md/);
    const usage = updates.filter((u) => u.sessionUpdate === "usage_update");
    assert.equal(usage.length, 2);
    assert.ok(usage[1].used > 0 && usage[1].cost.currency === "USD");
  });
});

test("session/load replays the conversation", async () => {
  assert.ok(sessionId, "the first test made a session");
  await runAgent(async (agent, updates) => {
    await agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    await agent.request(acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
    assert.equal(text(updates, "user_message_chunk"), "What is in this workspace?");
    assert.equal(text(updates, "agent_message_chunk"), await storedText(sessionId));
    const calls = updates.filter((u) => u.sessionUpdate === "tool_call");
    assert.equal(calls.length, 1);
    // The title its first prompt gave it, before the answer (ACP's answers carry none).
    const { session } = await (await fetch(`${serverURL}/sessions/${sessionId}`)).json();
    assert.ok(session.title, "the first prompt titled the session");
    assert.deepEqual(updates.filter((u) => u.sessionUpdate === "session_info_update").map((u) => u.title), [session.title]);
  });
});

test("session/load while a turn runs replays the answer so far, then streams the rest: nothing twice", async () => {
  const url = await startServer("5ms");
  const post = async (path, body) => (await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
  const s = await post("/sessions", { workspace_path: workspace });
  await post(`/sessions/${s.id}/turns`, { content: "/long 150" });
  await new Promise((ok) => setTimeout(ok, 700)); // part of the answer streams
  await runAgent(async (agent, updates) => {
    await agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    await agent.request(acp.methods.agent.session.load, { sessionId: s.id, cwd: workspace, mcpServers: [] });
    const atLoad = text(updates, "agent_message_chunk");
    assert.match(atLoad, /^Sentence 1 of 150\. Sentence 2 of 150\./);
    for (let i = 0; i < 300; i++) {
      const r = await (await fetch(`${url}/sessions/${s.id}`)).json();
      if (!r.session.current_turn_id) break;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    const want = await storedText(s.id, url);
    for (let i = 0; i < 100 && text(updates, "agent_message_chunk").length < want.length; i++) await new Promise((ok) => setTimeout(ok, 50));
    assert.ok(atLoad.length < want.length, "the turn had ended before the load");
    assert.equal(text(updates, "agent_message_chunk"), want);
  }, url);
});

test("an unknown method is a JSON-RPC error and the agent goes on", async () => {
  await runAgent(async (agent) => {
    await assert.rejects(agent.request("no/such_method", {}), (e) => e.code === -32601);
    const init = await agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    assert.equal(init.protocolVersion, 1);
  });
});
