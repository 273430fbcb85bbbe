package tool_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

func TestToolEnvironAllowList(t *testing.T) {
	server := []string{
		"PATH=/opt/bin:/usr/bin", "HOME=/home/u", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TZ=UTC",
		"ANTHROPIC_API_KEY=sk-ant", "OPENAI_API_KEY=sk-oai", "OPENAI_BASE_URL=http://x", "METIS_TOKEN=t0k",
		"METIS_HOME=/h", "GITHUB_TOKEN=gh", "AWS_SECRET_ACCESS_KEY=aws", "DATABASE_URL=postgres://u:p@h/db",
		"MY_SETTING=1", "SSH_AUTH_SOCK=/tmp/agent", "HOME=/home/v",
	}
	extra := []string{"MY_SETTING", "GITHUB_TOKEN", "OPENAI_API_KEY", "METIS_HOME", "ANTHROPIC_API_KEY"}
	got := tool.ToolEnviron(server, extra)
	want := []string{"PATH=/opt/bin:/usr/bin", "HOME=/home/v", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TZ=UTC", "MY_SETTING=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("environ\n got %q\nwant %q", got, want)
	}
	if got := tool.ToolEnviron([]string{"HOME=/h"}, nil); !slices.Equal(got, []string{"HOME=/h", "PATH=" + tool.DefaultPath}) {
		t.Fatalf("without PATH: %q", got)
	}
}

func TestIsSecretEnv(t *testing.T) {
	for _, n := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_ORG", "METIS_TOKEN", "METIS_HOME",
		"metis_token", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SOME_API_KEY", "NPM_AUTH", "DB_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS",
		"SECRET", "private_key", "X_APIKEY"} {
		if !tool.IsSecretEnv(n) {
			t.Errorf("%s: not taken for a secret", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "LANG", "LC_ALL", "GOPATH", "KEYBOARD_LAYOUT", "EDITOR", "MONKEYS"} {
		if tool.IsSecretEnv(n) {
			t.Errorf("%s: taken for a secret", n)
		}
	}
}

// TestShellGetsNoCredentials: the shell's environment is the allow-list,
// whatever the server's holds.
func TestShellGetsNoCredentials(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
	t.Setenv("OPENAI_API_KEY", "sk-oai-leak")
	t.Setenv("METIS_TOKEN", "metis-leak")
	t.Setenv("UNLISTED_VAR", "unlisted-leak")
	t.Setenv("PASSED_VAR", "passed-value")
	env := newEnv(t, t.TempDir())
	res, err := tool.Shell{ExtraEnv: []string{"PASSED_VAR", "OPENAI_API_KEY"}}.Run(context.Background(), env, shellIn("env", 0))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, "leak") {
		t.Fatalf("a secret reached the shell:\n%s", res.Content)
	}
	if !strings.Contains(res.Content, "PASSED_VAR=passed-value") || !strings.Contains(res.Content, "PATH=") {
		t.Fatalf("environment lacks PATH or the configured addition:\n%s", res.Content)
	}
}
