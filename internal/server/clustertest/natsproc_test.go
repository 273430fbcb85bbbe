package clustertest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsProcEnv, when set in the environment of the test binary, makes
// TestMain run one NATS server (with JetStream, in a cluster) instead of
// the tests: a server the tests can kill the hard way (SIGKILL) and
// restart on the same store. Its value is the server's natsProcConfig
// as JSON.
const natsProcEnv = "METIS_CLUSTERTEST_NATS"

// natsProcConfig is what a process NATS server is started with.
type natsProcConfig struct {
	Name        string   `json:"name"`
	Port        int      `json:"port"`
	ClusterPort int      `json:"cluster_port"`
	Routes      []string `json:"routes"`
	StoreDir    string   `json:"store_dir"`
}

// natsClusterName names the cluster of process NATS servers.
const natsClusterName = "metis-fault-cluster"

// runNATSProc serves one NATS server until it is killed or interrupted:
// "ready" on stdout once it takes connections.
func runNATSProc() int {
	var pc natsProcConfig
	if err := json.Unmarshal([]byte(os.Getenv(natsProcEnv)), &pc); err != nil {
		fmt.Fprintln(os.Stderr, "natsproc:", err)
		return 2
	}
	var routes []*url.URL
	for _, r := range pc.Routes {
		u, err := url.Parse(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natsproc:", err)
			return 2
		}
		routes = append(routes, u)
	}
	s, err := server.NewServer(&server.Options{ServerName: pc.Name, Host: "127.0.0.1", Port: pc.Port,
		JetStream: true, StoreDir: pc.StoreDir, NoSigs: true,
		Cluster: server.ClusterOpts{Name: natsClusterName, Host: "127.0.0.1", Port: pc.ClusterPort}, Routes: routes})
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsproc:", err)
		return 1
	}
	s.ConfigureLogger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s.Start()
	if !s.ReadyForConnections(time.Minute) {
		fmt.Fprintln(os.Stderr, "natsproc: not ready")
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// natsProc is a NATS server running in a child process.
type natsProc struct {
	t      testing.TB
	cfg    natsProcConfig
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// natsProcs is a cluster of process NATS servers.
type natsProcs struct {
	servers []*natsProc
}

// URLs returns every server's client URL joined with commas.
func (c *natsProcs) URLs() string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.url
	}
	return strings.Join(urls, ",")
}

// startNATSProcs starts n NATS servers (n ≥ 3) in one cluster, each in a
// process of its own on its own store, and waits until JetStream
// answers. They are killed when the test ends.
func startNATSProcs(t *testing.T, n int) *natsProcs {
	t.Helper()
	ports := make([]int, 2*n)
	var held []net.Listener
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		held = append(held, l)
	}
	for _, l := range held {
		l.Close()
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i])
	}
	c := &natsProcs{}
	for i := range n {
		dir := t.TempDir()
		c.servers = append(c.servers, &natsProc{t: t, cfg: natsProcConfig{Name: fmt.Sprintf("nats-%d", i+1), Port: ports[i],
			ClusterPort: ports[n+i], Routes: routes, StoreDir: filepath.Join(dir, "js")},
			url: fmt.Sprintf("nats://127.0.0.1:%d", ports[i]), log: filepath.Join(dir, "nats.log")})
	}
	for _, s := range c.servers {
		s.start()
	}
	// JetStream answers once the servers formed the cluster and elected
	// a meta leader.
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process NATS cluster's JetStream did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start starts (or restarts, on the same store) the server's process.
func (s *natsProc) start() {
	t := s.t
	t.Helper()
	pc, err := json.Marshal(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), natsProcEnv+"="+string(pc))
	cmd.Stderr = logFile
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	exited := s.exited
	ready := make(chan struct{}, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				select {
				case ready <- struct{}{}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case <-ready:
	case <-exited:
		b, _ := os.ReadFile(s.log)
		t.Fatalf("NATS server %s exited before it was ready:\n%s", s.cfg.Name, b)
	case <-time.After(time.Minute):
		t.Fatalf("NATS server %s: not ready", s.cfg.Name)
	}
}

// kill kills the server's process (SIGKILL) and waits until it is gone.
func (s *natsProc) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// streamLeader returns the server that leads the stream's replicas.
func (c *natsProcs) streamLeader(t *testing.T, stream string) *natsProc {
	t.Helper()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil {
		t.Fatalf("stream %s: no cluster information", stream)
	}
	for _, s := range c.servers {
		if s.cfg.Name == info.Cluster.Leader {
			return s
		}
	}
	t.Fatalf("stream %s is led by %q, not one of the test's servers", stream, info.Cluster.Leader)
	return nil
}
