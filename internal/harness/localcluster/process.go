package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a control-plane binary from KUBEBUILDER_ASSETS, logging to <name>.log.
type process struct {
	name string
	args []string
	cmd  *exec.Cmd
	log  *os.File
	exit chan struct{}
}

func (p *process) start(ctx context.Context, logDir string) error {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), p.name)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is not in KUBEBUILDER_ASSETS (%w): build it with hack/envtest.sh", p.name, err)
	}
	log, err := os.Create(filepath.Join(logDir, p.name+".log"))
	if err != nil {
		return fmt.Errorf("creating %s.log: %w", p.name, err)
	}
	p.log = log
	p.cmd = exec.CommandContext(ctx, bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Die with the test process, even when it is killed by a timeout.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.exit = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.exit) }()
	return nil
}

func (p *process) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exit:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	_ = p.log.Close()
}
