package torch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// conn is one server process and its two protocol pipes. Calls are made
// one at a time.
type conn struct {
	cmd    *exec.Cmd
	w      *os.File // requests to the server
	frames chan []byte
	rerr   error         // why the reply stream ended; read after frames is closed
	exited chan struct{} // closed once the process has exited
	werr   error         // the process's exit error; read after exited is closed
	stderr *tail
	stall  time.Duration
	nextID int64
	dead   error // once set, every call fails with it
	mu     sync.Mutex
}

// startConn starts argv with the request pipe as file descriptor 3 and the
// reply pipe as descriptor 4 (the server is told so by its arguments).
func startConn(argv []string, env []string, stderr io.Writer, stall time.Duration) (*conn, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("torch engine: pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, fmt.Errorf("torch engine: pipe: %w", err)
	}
	c := &conn{w: reqW, frames: make(chan []byte, 16), exited: make(chan struct{}), stderr: newTail(64<<10, stderr), stall: stall}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{reqR, repW}
	cmd.Stdout = c.stderr
	cmd.Stderr = c.stderr
	cmd.WaitDelay = 2 * time.Second
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		reqR.Close()
		reqW.Close()
		repR.Close()
		repW.Close()
		return nil, fmt.Errorf("torch engine: start %s: %w", argv[0], err)
	}
	// The child holds its own copies; closing ours lets a dead server show
	// as the end of the reply stream.
	reqR.Close()
	repW.Close()
	c.cmd = cmd
	go func() {
		defer close(c.frames)
		defer repR.Close()
		for {
			b, err := readFrame(repR)
			if err != nil {
				c.rerr = err
				return
			}
			c.frames <- b
		}
	}()
	go func() {
		c.werr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// kill ends the server's process group.
func (c *conn) kill() { killGroup(c.cmd) }

// deathError describes a server that stopped answering during op: its exit
// status and the tail of its stderr.
func (c *conn) deathError(op string) error {
	select {
	case <-c.exited:
	case <-time.After(3 * time.Second):
		c.kill()
		<-c.exited
	}
	status := "exited"
	if c.werr != nil {
		status = c.werr.Error()
	}
	return fmt.Errorf("torch engine: %s: server died (%s)%s", op, status, c.tailNote())
}

func (c *conn) tailNote() string {
	t := c.stderr.Lines(20)
	if t == "" {
		return "; its stderr was empty"
	}
	return "; last lines of its stderr:\n" + indent(t)
}

// call sends one request and waits for its final reply, decoding the result
// into out (when not nil). It fails when ctx is cancelled (the server is
// killed), when no frame arrives for the stall time (the server is
// killed), when the server dies, or when it reports an error.
func (c *conn) call(ctx context.Context, op string, args any, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return fmt.Errorf("torch engine: %s: server is unusable: %w", op, c.dead)
	}
	c.nextID++
	id := c.nextID
	werr := make(chan error, 1)
	go func() { werr <- writeFrame(c.w, request{ID: id, Op: op, Args: args}) }()
	stall := c.stall
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	timer := time.NewTimer(stall)
	defer timer.Stop()
	fail := func(err error) error {
		c.dead = err
		c.kill()
		return err
	}
	for {
		select {
		case err := <-werr:
			if err != nil {
				return fail(c.deathError(op))
			}
			werr = nil
		case b, ok := <-c.frames:
			if !ok {
				return fail(c.deathError(op))
			}
			var r reply
			if err := json.Unmarshal(b, &r); err != nil {
				return fail(fmt.Errorf("torch engine: %s: undecodable reply frame: %w%s", op, err, c.tailNote()))
			}
			if r.ID != id {
				return fail(fmt.Errorf("torch engine: %s: reply to request %d while waiting for %d%s", op, r.ID, id, c.tailNote()))
			}
			if r.Progress != nil && r.Result == nil && r.Error == nil {
				timer.Reset(stall) // Go 1.23 timers: Reset drops a pending tick
				continue
			}
			if r.Error != nil {
				r.Error.Op = op
				return r.Error
			}
			if r.Result == nil {
				return fail(fmt.Errorf("torch engine: %s: reply has neither a result nor an error", op))
			}
			if out != nil {
				if err := json.Unmarshal(r.Result, out); err != nil {
					return fmt.Errorf("torch engine: %s: decode result: %w", op, err)
				}
			}
			return nil
		case <-ctx.Done():
			return fail(fmt.Errorf("torch engine: %s: %w (server killed)", op, ctx.Err()))
		case <-timer.C:
			return fail(fmt.Errorf("torch engine: %s: no progress from the server for %v (server killed)%s", op, stall, c.tailNote()))
		}
	}
}

// close asks the server to stop, then waits for it (killing it after a
// grace period).
func (c *conn) close(grace time.Duration) error {
	var err error
	if c.dead == nil {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		err = c.call(ctx, "close", struct{}{}, nil)
		cancel()
		c.mu.Lock()
		if c.dead == nil {
			c.dead = errors.New("closed")
		}
		c.mu.Unlock()
	}
	c.w.Close()
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.kill()
		<-c.exited
	}
	return err
}
