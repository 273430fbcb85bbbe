package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/metis-agent/metis/client"
)

// A client of the server's unix socket: its HTTP calls and the stream's
// WebSocket both go over the socket, which only this user can open.
func ExampleNewSocket() {
	home, _ := os.UserHomeDir()
	c := client.NewSocket(filepath.Join(home, ".metis", client.SocketName))
	// The same: c := client.New("unix://" + filepath.Join(home, ".metis", "metis.sock"))
	ss, err := c.Sessions(context.Background())
	if err != nil {
		fmt.Println("no server on the socket:", err)
		return
	}
	for _, s := range ss {
		fmt.Println(s.ID, s.Title)
	}
}

// Finding the local server as the metis command-line tools do: an
// explicit URL, else $METIS_SERVER, else the home's socket when a server
// answers on it, else http://127.0.0.1:8421.
func ExampleLocate() {
	url := client.Locate(context.Background(), client.LocateOptions{})
	c := client.New(url)
	fmt.Println("talking to", url, "over the socket:", c.SocketPath() != "")
}
