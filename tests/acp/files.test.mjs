// The editor's files under the official TypeScript SDK: when the
// client offers fs/read_text_file and fs/write_text_file, metis's file
// tools read the editor's buffer (unsaved changes included) and write
// through the editor, after the server's own checks; the disk serves
// what the editor cannot. Run by scripts/test.d/40-acp.sh.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { cleanup, runAgent, startServer, workspace } from "./helpers.mjs";

// accept_edits: edits inside the workspace run without asking.
const url = await startServer("0s", ["--default-mode", "accept_edits"]);
after(cleanup);

const fsCaps = { fs: { readTextFile: true, writeTextFile: true } };
const init = (agent, clientCapabilities = fsCaps) =>
  agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities });
const newSession = (agent) => agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
const tool = (agent, sessionId, name, input) =>
  agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: `/tool ${name} ${JSON.stringify(input)}` }] });

// completed is the raw output of the turn's completed tool call.
const completed = (updates) => {
  const u = updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
  assert.equal(u.length, 1, JSON.stringify(updates));
  return u[0];
};

// editor is an editor's buffers: open files with unsaved text. save
// says whether fs/write_text_file also saves the file (Zed's does).
function editor({ save = true, failReads = false } = {}) {
  const buffers = new Map();
  const calls = [];
  return {
    buffers,
    calls,
    handlers: {
      [acp.methods.client.fs.readTextFile]: ({ params }) => {
        calls.push({ method: "read", ...params });
        if (failReads) throw acp.RequestError.internalError(undefined, "the buffer is busy");
        const text = buffers.get(params.path) ?? readFileSync(params.path, "utf8");
        return { content: text };
      },
      [acp.methods.client.fs.writeTextFile]: ({ params }) => {
        calls.push({ method: "write", ...params });
        buffers.set(params.path, params.content);
        if (save) writeFileSync(params.path, params.content);
        return {};
      },
    },
  };
}

test("read_file reads the editor's unsaved buffer", async () => {
  const file = join(workspace, "unsaved.txt");
  writeFileSync(file, "on disk\n");
  const ed = editor();
  ed.buffers.set(file, "unsaved in the editor\n");
  await runAgent(
    async (agent, updates) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      assert.equal((await tool(agent, sessionId, "read_file", { path: "unsaved.txt" })).stopReason, "end_turn");
      const u = completed(updates);
      assert.equal(u.rawOutput.via, "editor");
      assert.ok(u.content.some((c) => c.content?.text === "unsaved in the editor\n"), JSON.stringify(u.content));
      assert.deepEqual(
        ed.calls.map((c) => [c.method, c.path, c.sessionId]),
        [["read", file, sessionId]],
      );
    },
    url,
    undefined,
    ed.handlers,
  );
});

for (const save of [true, false]) {
  test(`edit_file edits the editor's buffer and the edit lands in the editor (the editor ${save ? "saves" : "does not save"})`, async () => {
    const file = join(workspace, save ? "edit-saved.txt" : "edit-unsaved.txt");
    writeFileSync(file, "alpha\n");
    const ed = editor({ save });
    ed.buffers.set(file, "alpha\nbeta\n"); // an unsaved line
    await runAgent(
      async (agent, updates) => {
        await init(agent);
        const { sessionId } = await newSession(agent);
        const r = await tool(agent, sessionId, "edit_file", { path: file.slice(workspace.length + 1), old_string: "beta", new_string: "gamma" });
        assert.equal(r.stopReason, "end_turn");
        const u = completed(updates);
        assert.equal(u.rawOutput.via, "editor");
        // The diff is the buffer's: the unsaved line was there.
        const diff = u.content.find((c) => c.type === "diff");
        assert.equal(diff.path, file);
        assert.match(diff.oldText, /beta/);
        assert.match(diff.newText, /gamma/);
        assert.deepEqual(ed.calls.map((c) => c.method), ["read", "write"]);
        assert.equal(ed.buffers.get(file), "alpha\ngamma\n");
        // Every other client sees the same file on disk.
        assert.equal(readFileSync(file, "utf8"), "alpha\ngamma\n");
        if (!save) assert.match(u.rawOutput.summary, /the server wrote it on disk/);
      },
      url,
      undefined,
      ed.handlers,
    );
  });
}

test("write_file writes through the editor", async () => {
  const file = join(workspace, "new-file.txt");
  const ed = editor();
  await runAgent(
    async (agent, updates) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      await tool(agent, sessionId, "write_file", { path: "new-file.txt", content: "written\n" });
      assert.equal(completed(updates).rawOutput.via, "editor");
      assert.deepEqual(ed.calls.map((c) => [c.method, c.path, c.content]), [["write", file, "written\n"]]);
      assert.equal(readFileSync(file, "utf8"), "written\n");
    },
    url,
    undefined,
    ed.handlers,
  );
});

test("a read the editor refuses is served by the disk, and the result says so", async () => {
  const file = join(workspace, "refused.txt");
  writeFileSync(file, "from the disk\n");
  const ed = editor({ failReads: true });
  await runAgent(
    async (agent, updates) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      await tool(agent, sessionId, "read_file", { path: "refused.txt" });
      const u = completed(updates);
      assert.equal(u.rawOutput.via, "disk");
      assert.match(u.rawOutput.summary, /on disk: the editor refused/);
      assert.ok(u.content.some((c) => c.content?.text === "from the disk\n"));
    },
    url,
    undefined,
    ed.handlers,
  );
});

test("a path out of the workspace never reaches the editor", async () => {
  const ed = editor();
  await runAgent(
    async (agent, updates) => {
      await init(agent);
      const { sessionId } = await newSession(agent);
      await tool(agent, sessionId, "read_file", { path: "../outside.txt" });
      assert.ok(updates.some((u) => u.sessionUpdate === "tool_call_update" && u.status === "failed"));
      assert.deepEqual(ed.calls, []);
    },
    url,
    undefined,
    ed.handlers,
  );
});

test("--editor-fs=false and an editor that offers nothing: the disk, and no marker", async () => {
  const file = join(workspace, "plain.txt");
  writeFileSync(file, "plain\n");
  for (const [caps, args] of [
    [fsCaps, ["--editor-fs=false"]],
    [{}, []],
  ]) {
    const ed = editor();
    ed.buffers.set(file, "never read\n");
    await runAgent(
      async (agent, updates) => {
        await init(agent, caps);
        const { sessionId } = await newSession(agent);
        await tool(agent, sessionId, "read_file", { path: "plain.txt" });
        const u = completed(updates);
        assert.equal(u.rawOutput.via, undefined);
        assert.ok(u.content.some((c) => c.content?.text === "plain\n"));
        assert.deepEqual(ed.calls, []);
      },
      url,
      undefined,
      ed.handlers,
      args,
    );
  }
});
