package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Tests against the npm reference servers (@modelcontextprotocol/
// server-everything and server-filesystem, pinned in package.json).

func TestEverythingServerOverStdio(t *testing.T) {
	m, _ := newManager(t, everythingEntry(t, "everything"))
	tools := toolsOf(t, m, "s1")
	for _, n := range []string{"mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything__get-tiny-image",
		"mcp__everything__get-structured-content", "mcp__everything__get-env"} {
		mustTool(t, tools, n)
	}
	ctx := ctxT(t, 30*time.Second)

	res, err := call(t, ctx, tools["mcp__everything__echo"], `{"message": "hello there"}`)
	if err != nil || !strings.Contains(res.Content, "hello there") {
		t.Fatalf("echo: %q, %v", res.Content, err)
	}
	res, err = call(t, ctx, tools["mcp__everything__get-sum"], `{"a": 2, "b": 3}`)
	if err != nil || !strings.Contains(res.Content, "5") {
		t.Fatalf("get-sum: %q, %v", res.Content, err)
	}
	res, err = call(t, ctx, tools["mcp__everything__get-tiny-image"], `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(out(res).Images) != 1 || out(res).Images[0].MediaType != "image/png" || len(out(res).Images[0].Data) == 0 {
		t.Fatalf("get-tiny-image kept %d images: %+v", len(out(res).Images), out(res).Images)
	}
	// The tiny image goes to the model as an image block of the tool
	// result, and the text says so. (Its iCCP chunk has a wrong CRC, which
	// Go's decoder refuses: the chunk is left out, the pixels are kept.)
	if len(res.Images) != 1 || res.Images[0].Type != message.BlockImage || res.Images[0].MediaType != "image/png" ||
		res.Images[0].Width == 0 || len(res.Images[0].SHA256) != 64 || len(res.Images[0].Data) == 0 ||
		len(res.Images[0].Data) > len(out(res).Images[0].Data) {
		t.Fatalf("get-tiny-image gave the model %+v, want its PNG; text %q", res.Images, res.Content)
	}
	if !strings.Contains(res.Content, "[image 1: PNG ") || !strings.Contains(res.Content, "attached") {
		t.Fatalf("get-tiny-image's text does not say the image is attached: %q", res.Content)
	}
	res, err = call(t, ctx, tools["mcp__everything__get-structured-content"], `{"location": "New York"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(out(res).Structured) == 0 || !strings.Contains(string(out(res).Structured), "temperature") {
		t.Fatalf("get-structured-content: structured %s, content %q", out(res).Structured, res.Content)
	}

	st := serverStatus(t, m, "everything")
	if st.State != protocol.MCPStateRunning || st.PID == 0 || st.Transport != protocol.MCPTransportStdio || st.ServerName == "" {
		t.Fatalf("status: %+v", st)
	}
}

func TestServerEnvironmentHoldsNoSecretUnlessNamed(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret-in-metis")
	t.Setenv("GITHUB_TOKEN", "ghp-secret-in-metis")
	t.Setenv("PASSED_TOKEN", "passed-on-purpose")
	m, _ := newManager(t, everythingEntry(t, "everything", `env: {MY_TOKEN: "${PASSED_TOKEN}", PLAIN: "yes"}`))
	tools := toolsOf(t, m, "s1")
	res, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__everything__get-env"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-ant-secret-in-metis", "ghp-secret-in-metis", "ANTHROPIC_API_KEY", "GITHUB_TOKEN"} {
		if strings.Contains(res.Content, secret) {
			t.Errorf("the server's environment holds %s", secret)
		}
	}
	for _, want := range []string{"passed-on-purpose", `"PLAIN": "yes"`, "PATH"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the server's environment lacks %s", want)
		}
	}
}

func TestFilesystemServerOverStdio(t *testing.T) {
	entry := npmServer(t, "server-filesystem")
	dir := t.TempDir()
	m, _ := newManager(t, "  fs:\n    command: node\n    args: [\""+entry+"\", \""+dir+"\"]\n    trust_read_only_hints: true\n")
	tools := toolsOf(t, m, "s1")
	ctx := ctxT(t, 30*time.Second)
	if _, err := call(t, ctx, mustTool(t, tools, "mcp__fs__write_file"), `{"path": "`+dir+`/a.txt", "content": "alpha"}`); err != nil {
		t.Fatal(err)
	}
	res, err := call(t, ctx, mustTool(t, tools, "mcp__fs__read_text_file"), `{"path": "`+dir+`/a.txt"}`)
	if err != nil || !strings.Contains(res.Content, "alpha") {
		t.Fatalf("read_text_file: %q, %v", res.Content, err)
	}
	// Outside its allowed directory the server refuses: isError.
	_, err = call(t, ctx, tools["mcp__fs__read_text_file"], `{"path": "/etc/hostname"}`)
	if err == nil || classOf(err) != tool.ClassExecution {
		t.Fatalf("reading outside the allowed directory: %v", err)
	}
	// Trusted read-only hints: read_text_file reads, write_file does not.
	if k := tool.KindOf(tools["mcp__fs__read_text_file"]); k != tool.KindRead {
		t.Errorf("read_text_file is %s with trust_read_only_hints", k)
	}
	if k := tool.KindOf(tools["mcp__fs__write_file"]); k != tool.KindExternal {
		t.Errorf("write_file is %s", k)
	}
}
